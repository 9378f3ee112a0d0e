//! What one item's outputs mean: a detector's objects, or a per-object
//! result with what it does to its object.

use camdnn_protocol::OutputValue;
use camdnn_vision::{BBox, Detection, Transform};

/// A detection with its class name.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Box, score and class id, frame pixels.
    pub detection: Detection,
    /// Class name.
    pub class: String,
}

/// What one item's outputs mean.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// A detector's objects (of one of the frame's detector items).
    Objects(Vec<Found>),
    /// A per-object result; `rotate` tells children to see the crop turned 180 degrees.
    Output {
        /// The protocol value.
        value: OutputValue,
        /// Whether children should rotate the crop.
        rotate: bool,
        /// What this result does to the object.
        verdict: Verdict,
    },
}

/// What a per-object result does to its object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Nothing: the object keeps its box and its children run.
    Keep,
    /// The object gets a new box (its children crop it) and score.
    Refine {
        /// New box, frame pixels.
        bbox: BBox,
        /// New score.
        score: f32,
    },
    /// The object keeps its box, but its children crop this part of it (a person's face), or
    /// do not run when the part was not found.
    Part(Option<BBox>),
    /// The object is not what the detector thought: its children do not run and it is
    /// left out of the frame's result.
    Reject,
}

impl Verdict {
    /// The box this object's children crop, given the object's box after the verdict
    /// (`None`: they do not run).
    pub fn child_crop(&self, object_box: BBox) -> Option<BBox> {
        match self {
            Verdict::Keep | Verdict::Refine { .. } => Some(object_box),
            Verdict::Part(part) => *part,
            Verdict::Reject => None,
        }
    }
}

/// What a decoder knows about the item besides its outputs.
#[derive(Debug, Clone, Copy)]
pub struct ItemContext<'a> {
    /// Network pixels to frame pixels, one transform per region of the frame drawn on the
    /// input: one for a resized or letterboxed frame (and per-object items), one per pyramid
    /// scale packed on a P-Net canvas (its offset in `pad_x` / `pad_y`).
    pub regions: &'a [Transform],
    /// The object's box the input was cut from (per-object items).
    pub bbox: Option<BBox>,
}
