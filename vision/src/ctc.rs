//! CTC greedy decoding for PP-OCR text recognition: argmax per time step, merge repeats, drop
//! the blank (index 0), map the rest through the character dictionary.

use crate::{Result, VisionError};

/// Recognised text and its confidence (mean of the kept steps' max probabilities, 0 if none).
#[derive(Debug, Clone, PartialEq)]
pub struct TextResult {
    /// The decoded string.
    pub text: String,
    /// Confidence in `0..=1` for softmax outputs.
    pub score: f32,
}

/// A CTC decoder over a character dictionary: class 0 is blank, class `i >= 1` is
/// `chars[i - 1]`.
#[derive(Debug, Clone)]
pub struct CtcDecoder {
    chars: Vec<String>,
}

impl CtcDecoder {
    /// A decoder over `chars` (at least one entry, blank not included).
    pub fn new(chars: Vec<String>) -> Result<Self> {
        if chars.is_empty() {
            return Err(VisionError::config(
                "chars",
                "the character dictionary is empty",
            ));
        }
        Ok(Self { chars })
    }

    /// A decoder from a PP-OCR dictionary file's text (one character per line), with a space
    /// appended when `use_space_char` (PP-OCR's default).
    pub fn from_dict_text(text: &str, use_space_char: bool) -> Result<Self> {
        let mut chars: Vec<String> = text
            .lines()
            .map(|l| l.trim_end_matches('\r').to_string())
            .collect();
        if use_space_char {
            chars.push(" ".to_string());
        }
        Self::new(chars)
    }

    /// Number of output classes the model must have: the dictionary plus blank.
    pub fn num_classes(&self) -> usize {
        self.chars.len() + 1
    }

    /// Decodes one `[steps, classes]` output row-major.
    pub fn decode(&self, probs: &[f32]) -> Result<TextResult> {
        let c = self.num_classes();
        if probs.is_empty() || probs.len() % c != 0 {
            return Err(VisionError::tensor(
                "CTC recognition output",
                format!(
                    "{} values is not a whole number of {c}-class steps",
                    probs.len()
                ),
            ));
        }
        let mut text = String::new();
        let (mut sum, mut kept) = (0f32, 0usize);
        let mut prev = usize::MAX;
        for step in probs.chunks_exact(c) {
            let (mut best, mut best_p) = (0usize, f32::NEG_INFINITY);
            for (i, &p) in step.iter().enumerate() {
                if p > best_p {
                    best = i;
                    best_p = p;
                }
            }
            if best != 0 && best != prev {
                text.push_str(&self.chars[best - 1]);
                sum += best_p;
                kept += 1;
            }
            prev = best;
        }
        let score = if kept == 0 { 0.0 } else { sum / kept as f32 };
        Ok(TextResult { text, score })
    }

    /// Decodes a `[batch, steps, classes]` output into one result per crop.
    pub fn decode_batch(&self, output: &[f32], batch: usize) -> Result<Vec<TextResult>> {
        if batch == 0 || output.is_empty() || output.len() % batch != 0 {
            return Err(VisionError::tensor(
                "CTC recognition output",
                format!("{} values do not split into {batch} crops", output.len()),
            ));
        }
        output
            .chunks_exact(output.len() / batch)
            .map(|o| self.decode(o))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-hot-ish steps: `ids` are the argmax classes, with probability 0.9.
    fn steps(ids: &[usize], classes: usize) -> Vec<f32> {
        let mut out = vec![0.1 / (classes - 1) as f32; ids.len() * classes];
        for (t, &i) in ids.iter().enumerate() {
            out[t * classes + i] = 0.9;
        }
        out
    }

    #[test]
    fn merges_repeats_and_drops_blank() {
        let dec = CtcDecoder::from_dict_text("a\nb\nc", true).unwrap();
        assert_eq!(dec.num_classes(), 5);
        // a a _ a b b _ _ space c  -> "aab c"
        let r = dec
            .decode(&steps(&[1, 1, 0, 1, 2, 2, 0, 0, 4, 3], 5))
            .unwrap();
        assert_eq!(r.text, "aab c");
        assert!((r.score - 0.9).abs() < 1e-6);
        let r = dec.decode(&steps(&[0, 0, 0], 5)).unwrap();
        assert_eq!((r.text.as_str(), r.score), ("", 0.0));
    }

    #[test]
    fn batch_and_bad_shapes() {
        let dec = CtcDecoder::new(vec!["x".into(), "y".into()]).unwrap();
        let mut out = steps(&[1, 0, 2], 3);
        out.extend(steps(&[2, 2, 2], 3));
        let r = dec.decode_batch(&out, 2).unwrap();
        assert_eq!((r[0].text.as_str(), r[1].text.as_str()), ("xy", "y"));
        assert!(dec.decode(&[0.5; 4]).is_err());
        assert!(dec.decode_batch(&out, 0).is_err());
        assert!(dec.decode_batch(&out, 4).is_err());
        assert!(dec.decode_batch(&[], 2).is_err());
        assert!(CtcDecoder::new(vec![]).is_err());
    }
}
