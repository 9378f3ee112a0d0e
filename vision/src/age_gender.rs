//! Age and gender from a face model with two heads (the `faceres` model of the Human
//! library): a 100-way softmax over age in years and one sigmoid for gender (above 0.5 male).

use crate::{Result, VisionError};

/// A face's estimated age and gender.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgeGender {
    /// Age in years.
    pub age: f32,
    /// `"male"` or `"female"`.
    pub gender: &'static str,
    /// How sure the gender head is, `0..=1` (0 at a sigmoid of 0.5, 1 at 0 or 1).
    pub gender_score: f32,
}

/// Reads the two heads. The age is the most likely year moved towards its likelier neighbour
/// by ten times that neighbour's probability, as the model's authors read it.
pub fn decode_age_gender(age_probs: &[f32], male_prob: f32) -> Result<AgeGender> {
    if age_probs.len() != 100 {
        return Err(VisionError::tensor(
            "age head",
            format!("has {} values, needs 100 (years 0-99)", age_probs.len()),
        ));
    }
    if !male_prob.is_finite() || age_probs.iter().any(|p| !p.is_finite()) {
        return Err(VisionError::tensor(
            "age/gender heads",
            "values are not finite",
        ));
    }
    let (idx, _) = age_probs
        .iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &p)| {
            if p > best.1 {
                (i, p)
            } else {
                best
            }
        });
    let below = idx.checked_sub(1).map_or(0.0, |i| age_probs[i]);
    let above = age_probs.get(idx + 1).copied().unwrap_or(0.0);
    let age = if below > above {
        idx as f32 - 10.0 * below
    } else {
        idx as f32 + 10.0 * above
    };
    Ok(AgeGender {
        age: age.max(0.0),
        gender: if male_prob > 0.5 { "male" } else { "female" },
        gender_score: ((male_prob - 0.5).abs() * 2.0).min(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_year_moves_towards_its_likelier_neighbour() {
        let mut p = vec![0.0; 100];
        p[30] = 0.5;
        p[31] = 0.2;
        p[29] = 0.1;
        let a = decode_age_gender(&p, 0.9).unwrap();
        assert!((a.age - 32.0).abs() < 1e-5, "{a:?}");
        assert_eq!(a.gender, "male");
        assert!((a.gender_score - 0.8).abs() < 1e-6);
        p[29] = 0.3;
        let a = decode_age_gender(&p, 0.2).unwrap();
        assert!((a.age - 27.0).abs() < 1e-5, "{a:?}");
        assert_eq!(a.gender, "female");
        // The last year has no upper neighbour.
        let mut q = vec![0.0; 100];
        q[99] = 1.0;
        assert_eq!(decode_age_gender(&q, 0.5).unwrap().age, 99.0);
    }

    #[test]
    fn bad_heads_are_named_errors() {
        let e = decode_age_gender(&[0.0; 10], 0.5).unwrap_err();
        assert!(e.to_string().contains("needs 100"), "{e}");
        let e = decode_age_gender(&[0.0; 100], f32::NAN).unwrap_err();
        assert!(e.to_string().contains("not finite"), "{e}");
    }
}
