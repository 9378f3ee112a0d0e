//! Boxes and detections: the shapes every decoder produces and every later stage consumes.

/// An axis-aligned box `(x0, y0)`-`(x1, y1)` in pixels, `x0 <= x1` and `y0 <= y1` when valid.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BBox {
    /// Left edge.
    pub x0: f32,
    /// Top edge.
    pub y0: f32,
    /// Right edge (exclusive in pixel terms: a one-pixel box at x=3 is 3..4).
    pub x1: f32,
    /// Bottom edge.
    pub y1: f32,
}

impl BBox {
    /// A box from its corners.
    pub fn new(x0: f32, y0: f32, x1: f32, y1: f32) -> Self {
        Self { x0, y0, x1, y1 }
    }

    /// A box from its centre and size (the YOLO and SSD encoding).
    pub fn from_center(cx: f32, cy: f32, w: f32, h: f32) -> Self {
        Self::new(cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0)
    }

    /// Width, zero for an inverted box.
    pub fn width(&self) -> f32 {
        (self.x1 - self.x0).max(0.0)
    }

    /// Height, zero for an inverted box.
    pub fn height(&self) -> f32 {
        (self.y1 - self.y0).max(0.0)
    }

    /// Area, zero for an inverted box.
    pub fn area(&self) -> f32 {
        self.width() * self.height()
    }

    /// True when all four coordinates are finite numbers.
    pub fn is_finite(&self) -> bool {
        self.x0.is_finite() && self.y0.is_finite() && self.x1.is_finite() && self.y1.is_finite()
    }

    /// Intersection over union with `other`; 0 when either box is empty.
    pub fn iou(&self, other: &BBox) -> f32 {
        let iw = (self.x1.min(other.x1) - self.x0.max(other.x0)).max(0.0);
        let ih = (self.y1.min(other.y1) - self.y0.max(other.y0)).max(0.0);
        let inter = iw * ih;
        let union = self.area() + other.area() - inter;
        if union > 0.0 {
            inter / union
        } else {
            0.0
        }
    }

    /// This box clamped to the image `0..width` x `0..height`.
    pub fn clamp(&self, width: f32, height: f32) -> BBox {
        BBox::new(
            self.x0.clamp(0.0, width),
            self.y0.clamp(0.0, height),
            self.x1.clamp(0.0, width),
            self.y1.clamp(0.0, height),
        )
    }
}

/// One detected object: where it is (frame pixels), what it is and how sure the detector is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detection {
    /// Box in frame pixels.
    pub bbox: BBox,
    /// Class index in the detector's label list.
    pub class_id: usize,
    /// Confidence in `0..=1` for the decoders of this crate.
    pub score: f32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iou_of_known_boxes() {
        let a = BBox::new(0.0, 0.0, 10.0, 10.0);
        let b = BBox::new(5.0, 0.0, 15.0, 10.0);
        assert!((a.iou(&b) - 50.0 / 150.0).abs() < 1e-6);
        assert_eq!(a.iou(&a), 1.0);
        assert_eq!(a.iou(&BBox::new(20.0, 20.0, 30.0, 30.0)), 0.0);
        assert_eq!(BBox::new(5.0, 5.0, 1.0, 1.0).area(), 0.0);
        assert_eq!(a.iou(&BBox::new(5.0, 5.0, 5.0, 5.0)), 0.0);
    }

    #[test]
    fn clamp_and_center() {
        let b = BBox::from_center(5.0, 5.0, 20.0, 4.0).clamp(8.0, 8.0);
        assert_eq!(b, BBox::new(0.0, 3.0, 8.0, 7.0));
    }
}
