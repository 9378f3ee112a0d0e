//! The kinds of choice a global step replays and keeps: each is a residency
//! to load (or none) and the way the dispatcher places requests until the
//! next step.

use crate::HostRule;

use super::follow::Mode;

/// One kind of choice of the global step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Choice {
    /// The global policy's plan for the epoch (its loads included),
    /// followed request by request.
    Plan,
    /// Algorithm 1 alone with the paper's host rule on the residency as it
    /// is: what `camdnn-local` does, the step's reference ([`Choice::DEFAULT`]).
    Paper,
    /// Algorithm 1 alone with the earliest-finish rule, residency as it is.
    FinishTime,
    /// A residency for the stream's bottleneck with the group-split rule.
    StreamSplit,
}

impl Choice {
    /// How many kinds there are.
    pub const COUNT: usize = 4;

    /// Every kind, in index order.
    pub const ALL: [Choice; Choice::COUNT] = [
        Choice::Plan,
        Choice::Paper,
        Choice::FinishTime,
        Choice::StreamSplit,
    ];

    /// The choice that changes nothing in the residency: Algorithm 1 alone
    /// with the paper's rule, what `camdnn-local` does. It is always
    /// offered, so a step can always leave the residency as it is.
    pub const DEFAULT: Choice = Choice::Paper;

    /// Its index in per-kind arrays ([`crate::schedulers::Camdnn::choices`]).
    pub fn index(self) -> usize {
        self as usize
    }

    /// A short name for reports and ablation rows.
    pub fn name(self) -> &'static str {
        match self {
            Choice::Plan => "plan",
            Choice::Paper => "paper",
            Choice::FinishTime => "finish-time",
            Choice::StreamSplit => "stream-split",
        }
    }

    /// The kind of choice that keeps a dispatcher in `mode` as it is: the
    /// one that loads nothing with that mode. None for a dispatcher that
    /// follows a plan or splits groups: no kind leads there without a
    /// load, so the step takes the best replayed choice.
    pub fn of_mode(mode: Mode) -> Option<Choice> {
        match mode {
            Mode::Local(HostRule::PerRequest) => Some(Choice::Paper),
            Mode::Local(HostRule::FinishTime) => Some(Choice::FinishTime),
            Mode::Plan | Mode::Local(HostRule::GroupFinish) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Choice;

    #[test]
    fn the_kinds_are_listed_in_index_order_with_distinct_names() {
        for (n, c) in Choice::ALL.iter().enumerate() {
            assert_eq!(c.index(), n);
        }
        let mut names: Vec<&str> = Choice::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Choice::COUNT);
    }
}
