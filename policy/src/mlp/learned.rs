//! A learned global policy of either kind, chosen by its sidecar's format:
//! the one-frame MLP ([`MlpPolicy`]) or the stream MLP ([`StreamMlp`]).

use super::stream::{StreamMlp, STREAM_FORMAT};
use super::{MlpError, MlpPolicy};
use crate::epoch::EpochScenes;
use crate::{GlobalPolicy, Plan, PlanInput, System};

/// A learned policy loaded from its ONNX file and sidecar.
#[derive(Debug)]
pub enum Learned {
    /// The MLP distilled from the one-frame ILP (both boxed: large, and
    /// of different sizes).
    Frame(Box<MlpPolicy>),
    /// The MLP distilled from the stream oracle.
    Stream(Box<StreamMlp>),
}

impl Learned {
    /// Loads the policy `sidecar` describes (its `format` says which kind).
    pub fn new(system: &System, onnx: &[u8], sidecar: &str) -> Result<Self, MlpError> {
        #[derive(serde::Deserialize)]
        struct Format {
            format: String,
        }
        let tag: Format = serde_json::from_str(sidecar)?;
        if tag.format == STREAM_FORMAT {
            Ok(Learned::Stream(Box::new(StreamMlp::new(
                system, onnx, sidecar,
            )?)))
        } else {
            Ok(Learned::Frame(Box::new(MlpPolicy::new(
                system, onnx, sidecar,
            )?)))
        }
    }
}

impl GlobalPolicy for Learned {
    fn name(&self) -> &str {
        match self {
            Learned::Frame(p) => p.name(),
            Learned::Stream(p) => p.name(),
        }
    }

    fn plan(&mut self, system: &System, input: &PlanInput) -> Plan {
        match self {
            Learned::Frame(p) => p.plan(system, input),
            Learned::Stream(p) => p.plan(system, input),
        }
    }

    fn plan_epoch(&mut self, system: &System, input: &PlanInput, epoch: &EpochScenes) -> Plan {
        match self {
            Learned::Frame(p) => p.plan_epoch(system, input, epoch),
            Learned::Stream(p) => p.plan_epoch(system, input, epoch),
        }
    }
}
