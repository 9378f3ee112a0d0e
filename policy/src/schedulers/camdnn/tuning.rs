//! Every constant of camdnn's global step in one struct, and the ablation
//! variants that switch each choice and each threshold off in turn
//! (`camdnnd suite --ablate`).

use super::choice::Choice;

/// The global step's knobs. [`Tuning::default`] is what camdnn runs;
/// [`Tuning::ablations`] gives, for each choice and each threshold, the
/// same step without it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// The kinds of choice the step replays; [`Choice::DEFAULT`] is offered
    /// whatever this says.
    pub offered: [bool; Choice::COUNT],
    /// At most this many frames of an epoch (its first ones) are kept for
    /// the replays, so a step's cost does not grow with the camera's rate.
    /// A bound on time, not a heuristic: at 14 frames/s an epoch is 70
    /// frames and the cap never acts.
    pub replay_frames: usize,
    /// Epochs of the latest scene each choice is also replayed on, after
    /// the past: the scene on camera is the best guess of the next epoch's.
    /// Off: 0.
    pub lookahead_epochs: f64,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            offered: [true; Choice::COUNT],
            replay_frames: 150,
            lookahead_epochs: 2.0,
        }
    }
}

impl Tuning {
    /// Whether the step replays `choice`.
    pub fn offers(&self, choice: Choice) -> bool {
        choice == Choice::DEFAULT || self.offered[choice.index()]
    }

    /// The same tuning without `choice`.
    pub fn without(mut self, choice: Choice) -> Self {
        self.offered[choice.index()] = false;
        self
    }

    /// Every rule of the step the ablation can switch off, by name (a
    /// choice's [`Choice::name`], or a threshold's), with the change that
    /// switches it off.
    fn removals() -> Vec<(String, Removal)> {
        let mut out: Vec<(String, Removal)> = Choice::ALL
            .iter()
            .filter(|&&c| c != Choice::DEFAULT)
            .map(|&c| {
                let removal: Removal = Box::new(move |t| t.offered[c.index()] = false);
                (c.name().to_string(), removal)
            })
            .collect();
        let rule =
            |name: &str, change: fn(&mut Tuning)| (name.to_string(), Box::new(change) as Removal);
        out.push(rule("lookahead", |t| t.lookahead_epochs = 0.0));
        out
    }

    /// One variant per choice (but the default) and per threshold, each
    /// the default step with that one switched off, named `-WHAT`: the
    /// ablation `camdnnd suite --ablate` runs.
    pub fn ablations() -> Vec<(String, Tuning)> {
        Self::removals()
            .into_iter()
            .map(|(name, remove)| {
                let mut t = Tuning::default();
                remove(&mut t);
                (format!("-{name}"), t)
            })
            .collect()
    }

    /// The default step with every rule `names` names switched off at
    /// once (`camdnnd suite --ablate-together`), in the order
    /// [`Tuning::ablations`] lists them; an unknown name is an error that
    /// lists the known ones.
    pub fn without_rules(names: &[String]) -> Result<Tuning, UnknownRule> {
        let removals = Self::removals();
        if let Some(unknown) = names.iter().find(|n| removals.iter().all(|(r, _)| r != *n)) {
            return Err(UnknownRule {
                name: unknown.clone(),
                known: removals
                    .iter()
                    .map(|(r, _)| r.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut t = Tuning::default();
        for (_, remove) in removals.iter().filter(|(r, _)| names.contains(r)) {
            remove(&mut t);
        }
        Ok(t)
    }
}

/// The change that switches one rule of the step off.
type Removal = Box<dyn Fn(&mut Tuning)>;

/// A rule name [`Tuning::without_rules`] does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown rule {name:?} of the global step; known: {known}")]
pub struct UnknownRule {
    /// The name given.
    pub name: String,
    /// Every name the ablation knows, comma-separated.
    pub known: String,
}

#[cfg(test)]
mod tests {
    use super::{Choice, Tuning};

    #[test]
    fn every_ablation_differs_from_the_default_and_has_its_own_name() {
        let all = Tuning::ablations();
        let base = Tuning::default();
        for (name, t) in &all {
            assert_ne!(t, &base, "{name} changes nothing");
        }
        let mut names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        // The default choice is never ablated: a step can always stay.
        assert!(base
            .clone()
            .without(Choice::DEFAULT)
            .offers(Choice::DEFAULT));
    }

    #[test]
    fn removing_rules_together_composes_the_single_removals() {
        let single = Tuning::ablations();
        let names = ["lookahead".to_string(), "stream-split".to_string()];
        let together = Tuning::without_rules(&names).expect("known rules");
        let mut expected = Tuning::default();
        for (name, t) in &single {
            if names.iter().any(|n| format!("-{n}") == *name) {
                expected.offered = expected
                    .offered
                    .iter()
                    .zip(t.offered)
                    .map(|(a, b)| *a && b)
                    .collect::<Vec<_>>()
                    .try_into()
                    .expect("one flag per choice");
            }
        }
        expected.lookahead_epochs = 0.0;
        assert_eq!(together, expected);
        assert!(!together.offers(Choice::StreamSplit));
        let err = Tuning::without_rules(&["lookahed".to_string()]).unwrap_err();
        assert_eq!(err.name, "lookahed");
        assert!(err.known.contains("lookahead") && err.known.contains("stream-split"));
    }
}
