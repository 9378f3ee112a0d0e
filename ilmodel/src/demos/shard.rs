//! Shards: index-addressed parts of a demonstration run that machines solve
//! independently into one shared folder.

use super::*;

/// One of `count` index-addressed parts of a run: the chunks `c` with
/// `c mod count == index`. Interleaved rather than contiguous, so every
/// shard gets a like share of the grid's easy and hard scenes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 0-based index of this shard.
    pub index: u64,
    /// Number of shards.
    pub count: u64,
}

/// Environment variables [`Shard::parse`] reads an index from when named:
/// a Kubernetes Indexed Job's and a Slurm job array's.
pub const SHARD_INDEX_VARS: [&str; 2] = ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID"];

impl Shard {
    /// Parses `I/N`, where `I` is a number or one of [`SHARD_INDEX_VARS`],
    /// read through `env` (for `SLURM_ARRAY_TASK_ID`, minus
    /// `SLURM_ARRAY_TASK_MIN` when set, so `--array=1-8` works as well as
    /// `--array=0-7`).
    pub fn parse(spec: &str, env: impl Fn(&str) -> Option<String>) -> Result<Shard, DemoError> {
        let bad = |reason: String| DemoError::BadShard {
            spec: spec.to_owned(),
            reason,
        };
        let (i, n) = spec
            .split_once('/')
            .ok_or_else(|| bad("expected I/N, e.g. 3/8 or JOB_COMPLETION_INDEX/8".into()))?;
        let count: u64 = n
            .trim()
            .parse()
            .map_err(|_| bad(format!("N = {n:?} is not a whole number")))?;
        if count == 0 {
            return Err(bad("N must be at least 1".into()));
        }
        let number = |what: &str, v: &str| -> Result<u64, DemoError> {
            v.trim()
                .parse()
                .map_err(|_| bad(format!("{what} = {v:?} is not a whole number")))
        };
        let i = i.trim();
        let index = if SHARD_INDEX_VARS.contains(&i) {
            let v =
                env(i).ok_or_else(|| bad(format!("the environment variable {i} is not set")))?;
            let mut index = number(i, &v)?;
            if i == "SLURM_ARRAY_TASK_ID" {
                if let Some(min) = env("SLURM_ARRAY_TASK_MIN") {
                    let min = number("SLURM_ARRAY_TASK_MIN", &min)?;
                    index = index
                        .checked_sub(min)
                        .ok_or_else(|| bad(format!("{i} = {v} is below SLURM_ARRAY_TASK_MIN")))?;
                }
            }
            index
        } else if i.chars().all(|c| c.is_ascii_digit()) && !i.is_empty() {
            number("I", i)?
        } else {
            return Err(bad(format!(
                "I = {i:?} is neither a number nor one of {SHARD_INDEX_VARS:?}"
            )));
        };
        if index >= count {
            return Err(bad(format!("index {index} is not below N = {count}")));
        }
        Ok(Shard { index, count })
    }

    /// Whether chunk `c` belongs to this shard.
    pub fn owns(&self, c: usize) -> bool {
        c as u64 % self.count == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}
