//! What each kind of choice would have done out of sample: the last step's
//! choices replayed on the epoch that followed it, kept as a decayed record.

use super::choice::Choice;
use super::follow::Follow;
use super::tuning::Tuning;
use crate::Cluster;

/// The choices of one global step as they stood at `at_ms`: what each would
/// have done on the epoch that followed is scored at the next step.
#[derive(Clone, Debug)]
pub(super) struct Audit {
    pub(super) at_ms: f64,
    pub(super) probes: Vec<Probe>,
}

/// One choice of an audited step: its dispatcher and cluster after its
/// loads, and the earlier choice it is the same as, if any (that one's
/// score stands for it).
#[derive(Clone, Debug)]
pub(super) struct Probe {
    pub(super) choice: Choice,
    pub(super) follow: Follow,
    pub(super) cluster: Cluster,
    pub(super) same_as: Option<Choice>,
}

/// Each kind of choice's record out of sample: at every global step, what
/// every choice offered at the previous step would have done on the epoch
/// that followed it (replayed from that step's state on the scenes that then
/// came), in frames on time, decayed by [`Tuning::record_decay`] per epoch
/// of audited time, so its memory does not shorten when steps come early.
/// The replay of the past window picks a choice; the record says whether
/// such picks paid on the frames after them.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TrackRecord {
    pub(super) on_time: [f64; Choice::COUNT],
    pub(super) frames: f64,
    /// The longest audited span, ms: the epoch when there is no timer.
    longest_ms: f64,
    /// Per kind of choice, how recently what it delivered fell far short of
    /// its own replay ([`TrackRecord::misjudge`]), decayed with the rest.
    misjudged: [f64; Choice::COUNT],
    decay: f64,
    margin: f64,
    mark: f64,
    enabled: bool,
}

impl TrackRecord {
    /// An empty record kept with `tuning`'s decay and margins.
    pub(super) fn new(tuning: &Tuning) -> Self {
        TrackRecord {
            on_time: [0.0; Choice::COUNT],
            frames: 0.0,
            longest_ms: 0.0,
            misjudged: [0.0; Choice::COUNT],
            decay: tuning.record_decay,
            margin: tuning.record_margin,
            mark: tuning.misjudged_mark,
            enabled: tuning.record,
        }
    }

    /// Adds one audited span of `span_ms` and `frames` frames: each
    /// choice's frames on time; `epoch_ms` is the step's epoch (not
    /// finite: no timer, and the longest span audited stands for it).
    pub(super) fn add(
        &mut self,
        on_time: [f64; Choice::COUNT],
        frames: usize,
        span_ms: f64,
        epoch_ms: f64,
    ) {
        let span_ms = if span_ms.is_finite() {
            span_ms.max(0.0)
        } else {
            0.0
        };
        self.longest_ms = self.longest_ms.max(span_ms);
        let epoch_ms = super::replay::timer_epoch(epoch_ms).unwrap_or(self.longest_ms);
        let decay = if epoch_ms > 0.0 {
            self.decay.powf(span_ms / epoch_ms)
        } else {
            self.decay
        };
        for (r, n) in self.on_time.iter_mut().zip(on_time) {
            *r = *r * decay + n;
        }
        self.frames = self.frames * decay + frames as f64;
        for m in &mut self.misjudged {
            *m *= decay;
        }
    }

    /// What `choice` delivered since it was kept fell short of its own
    /// replay by more than [`Tuning::reality_gap`]: the replays cannot be
    /// trusted on that kind for a while (the mark decays with the record).
    pub(super) fn misjudge(&mut self, choice: Choice) {
        self.misjudged[choice.index()] += 1.0;
    }

    /// Whether `choice` has done clearly worse out of sample than the
    /// default: by more than the margin's share of the frames audited (one
    /// frame at least).
    pub(super) fn trails(&self, choice: Choice) -> bool {
        let margin = (self.frames / (1.0 / self.margin)).max(1.0);
        self.enabled
            && choice != Choice::DEFAULT
            && self.on_time[choice.index()] < self.on_time[Choice::DEFAULT.index()] - margin
    }

    /// Whether what `choice` delivered recently fell far short of its own
    /// replay ([`TrackRecord::misjudge`]): its replays are not scored.
    pub(super) fn misjudged(&self, choice: Choice) -> bool {
        choice != Choice::DEFAULT && self.misjudged[choice.index()] >= self.mark
    }

    /// Whether `choice` has been audited and kept up with the default on the
    /// frames on time: only then may it win a step on a small delay gain.
    /// A delay gain on the replayed window is weak evidence, and at the
    /// first step there is no record.
    pub(super) fn proves(&self, choice: Choice) -> bool {
        self.frames > 0.0 && self.on_time[choice.index()] >= self.on_time[Choice::DEFAULT.index()]
    }
}
