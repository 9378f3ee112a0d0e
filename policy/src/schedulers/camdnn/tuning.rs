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
    /// whatever this says (the record is kept against it).
    pub offered: [bool; Choice::COUNT],
    /// Epochs of past scenes each choice is replayed on. Off: 1.
    pub history_epochs: usize,
    /// At most this many frames of an epoch (its first ones) are kept for
    /// the replays, so a step's cost does not grow with the camera's rate.
    /// A bound on time, not a heuristic: at 14 frames/s an epoch is 70
    /// frames and the cap never acts.
    pub replay_frames: usize,
    /// Epochs of the latest scene each choice is also replayed on, after
    /// the past: the scene on camera is the best guess of the next epoch's.
    /// Off: 0.
    pub lookahead_epochs: f64,
    /// A challenger wins a step with this share of the replayed frames more
    /// on time than the incumbent (one frame at least). Off: 0 (one frame).
    pub win_margin: f64,
    /// A challenger as often on time wins on delay when its replayed delay
    /// is under this factor of the incumbent's, once its record proves
    /// such wins hold ([`Tuning::delay_factor_unproven`] until then). Off: 1.
    pub delay_factor_proven: f64,
    /// The same before the record proves it. Off: the proven factor.
    pub delay_factor_unproven: f64,
    /// A delay win needs replays on time for at least this share of their
    /// frames (below it the delay is mostly misses). Off: 0.
    pub delay_needs_on_time: f64,
    /// Whether the out-of-sample record keeps a choice that trails the
    /// default by more than [`Tuning::record_margin`] out unless it gains
    /// [`Tuning::record_override`]. Off: no choice ever trails.
    pub record: bool,
    /// The record's weight after one more epoch of audited time. Off: 0
    /// (only the last audit counts).
    pub record_decay: f64,
    /// How far behind the default, as a share of the frames audited (one
    /// frame at least), a choice's record must be to trail.
    pub record_margin: f64,
    /// A trailing choice is still taken with this share of the replayed
    /// frames more on time than the best of the others. Off: never taken.
    pub record_override: f64,
    /// A kind of choice whose delivery since it was kept fell short of its
    /// own replay by this share of the frames is not replayed while the
    /// mark lasts (until it decays under [`Tuning::misjudged_mark`]). Off:
    /// infinite (no kind is ever marked).
    pub reality_gap: f64,
    /// The decayed mark at or above which a misjudged kind is not replayed.
    pub misjudged_mark: f64,
    /// The stream residency adds a replica while it brings the most loaded
    /// unit's work per frame under this factor of what it was. Off: 1.
    pub replica_factor: f64,
    /// While a step's loads run, the dispatcher neither loads a detector
    /// copy over a classifier resident nowhere else, nor (static-DIST)
    /// waits behind a load when a resident copy finishes sooner. Off:
    /// false.
    pub settle_guard: bool,
    /// The policy plans for at most this many distinct scenes of the
    /// replayed frames ([`crate::epoch::EpochScenes::from_frames`]): the
    /// latest and the most frequent others, each weighted by its frames.
    /// Off: 1 (the latest scene alone).
    pub epoch_scenes: usize,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            offered: [true; Choice::COUNT],
            history_epochs: 3,
            replay_frames: 150,
            lookahead_epochs: 2.0,
            win_margin: 0.02,
            delay_factor_proven: 0.95,
            delay_factor_unproven: 0.8,
            delay_needs_on_time: 0.5,
            record: true,
            record_decay: 0.8,
            record_margin: 0.02,
            record_override: 0.1,
            reality_gap: 0.2,
            misjudged_mark: 0.5,
            replica_factor: 0.95,
            settle_guard: true,
            epoch_scenes: 3,
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

    /// The margin of frames a share of `frames` gives, one frame at least.
    pub(super) fn frames_margin(share: f64, frames: usize) -> usize {
        ((frames as f64 * share + 1e-9).floor() as usize).max(1)
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
        out.extend([
            rule("history", |t| t.history_epochs = 1),
            rule("lookahead", |t| t.lookahead_epochs = 0.0),
            rule("win-margin", |t| t.win_margin = 0.0),
            rule("delay-factor-proven", |t| t.delay_factor_proven = 1.0),
            rule("delay-factor-unproven", |t| {
                t.delay_factor_unproven = t.delay_factor_proven
            }),
            rule("delay-needs-on-time", |t| t.delay_needs_on_time = 0.0),
            rule("record", |t| t.record = false),
            rule("record-decay", |t| t.record_decay = 0.0),
            rule("record-override", |t| t.record_override = f64::INFINITY),
            rule("reality-gap", |t| t.reality_gap = f64::INFINITY),
            rule("replica-factor", |t| t.replica_factor = 1.0),
            rule("settle-guard", |t| t.settle_guard = false),
            rule("epoch-scenes", |t| t.epoch_scenes = 1),
        ]);
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
        // The default choice is never ablated: the record is kept against it.
        assert!(base
            .clone()
            .without(Choice::DEFAULT)
            .offers(Choice::DEFAULT));
    }

    #[test]
    fn removing_rules_together_composes_the_single_removals() {
        let single = Tuning::ablations();
        let names = [
            "lookahead".to_string(),
            "queue".to_string(),
            "record".to_string(),
        ];
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
        expected.record = false;
        assert_eq!(together, expected);
        assert!(!together.offers(Choice::Queue));
        let err = Tuning::without_rules(&["lookahed".to_string()]).unwrap_err();
        assert_eq!(err.name, "lookahed");
        assert!(err.known.contains("lookahead") && err.known.contains("stay-plan"));
    }

    #[test]
    fn the_frames_margin_is_a_share_of_the_frames_one_at_least() {
        assert_eq!(Tuning::frames_margin(0.02, 10), 1);
        assert_eq!(Tuning::frames_margin(0.02, 150), 3);
        assert_eq!(Tuning::frames_margin(0.02, 349), 6);
        assert_eq!(Tuning::frames_margin(0.02, 350), 7);
        assert_eq!(Tuning::frames_margin(0.0, 350), 1);
        for frames in 0..2000 {
            assert_eq!(Tuning::frames_margin(0.02, frames), (frames / 50).max(1));
        }
    }
}
