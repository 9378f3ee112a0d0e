//! Errors of the offline tools; each names what was wrong.

use std::path::PathBuf;

use camdnn_policy::InputError;
use thiserror::Error;

/// Why the ILP oracle gave no plan.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum OracleError {
    /// The input vectors do not fit the system.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A value of the input is out of range.
    #[error("{what} = {value}: {reason}")]
    BadValue {
        /// Which input, e.g. `rem_ms[2]`.
        what: String,
        /// The value given.
        value: String,
        /// What it must be.
        reason: &'static str,
    },
    /// No plan satisfies the residency limits for this scene.
    #[error("no feasible plan: {0}")]
    Infeasible(String),
    /// HiGHS found no feasible plan before its time limit (one may exist).
    #[error("the time limit ({limit_s} s) was reached before any feasible plan was found")]
    NoPlanInTime {
        /// The time limit per solve stage, seconds.
        limit_s: f64,
    },
    /// HiGHS failed (not infeasibility): a build or solve error.
    #[error("ILP solver failed: {0}")]
    Solver(String),
}

/// Why the exhaustive enumerator refused an instance.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum BruteError {
    /// The input vectors do not fit the system.
    #[error(transparent)]
    Input(#[from] InputError),
    /// Too many candidate plans to enumerate.
    #[error("{candidates} candidate plans exceed the enumeration limit of {limit}")]
    TooLarge {
        /// Candidate plans the instance has (saturating).
        candidates: u64,
        /// The limit.
        limit: u64,
    },
}

/// Why a demonstration run stopped.
#[derive(Debug, Error)]
pub enum DemoError {
    /// The system file was refused.
    #[error("system file: {0}")]
    System(#[from] camdnn_policy::SpecError),
    /// A parameter is out of range.
    #[error("{what} = {value}: {reason}")]
    BadParam {
        /// The parameter.
        what: &'static str,
        /// The value given.
        value: String,
        /// What it must be.
        reason: &'static str,
    },
    /// The output folder holds a run made with other parameters.
    #[error("{dir} holds a run with a different {field} (found {found}, asked {asked}); use another --out or delete it")]
    ManifestMismatch {
        /// The output folder.
        dir: PathBuf,
        /// The differing field.
        field: String,
        /// Its value in the folder's manifest.
        found: String,
        /// Its value in this run.
        asked: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file of the run is not what this program writes.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// A `--shard` specification was refused.
    #[error("shard {spec:?}: {reason}")]
    BadShard {
        /// The specification given.
        spec: String,
        /// What was wrong.
        reason: String,
    },
    /// A merge found chunks no shard has written yet.
    #[error("{dir}: {missing} of {chunks} chunks are not finished (first: {first:?}); run the shards that own them (chunk c belongs to shard c mod N) and merge again")]
    Incomplete {
        /// The output folder.
        dir: PathBuf,
        /// Number of unfinished chunks.
        missing: usize,
        /// Number of chunks of the run.
        chunks: usize,
        /// The first few unfinished chunks.
        first: Vec<usize>,
    },
    /// The oracle failed on one demonstration (other than infeasibility).
    #[error("demonstration {index}: {source}")]
    Oracle {
        /// Index of the demonstration.
        index: u64,
        /// The cause.
        #[source]
        source: OracleError,
    },
}
