//! Errors of the policy crate: every one names the field and value at fault.

use thiserror::Error;

/// Why a system description was refused.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SpecError {
    /// The TOML itself did not parse or had the wrong shape.
    #[error("invalid system file: {0}")]
    Toml(String),
    /// A field holds a value outside its range.
    #[error("{field} = {value}: {reason}")]
    BadValue {
        /// Dotted path of the field, e.g. `profile.squeezenet.gpu.exec_ms[2]`.
        field: String,
        /// The value as written.
        value: String,
        /// What the value must be.
        reason: &'static str,
    },
    /// Two processors or two models share a name.
    #[error("duplicate {what} name {name:?}")]
    Duplicate {
        /// `processor` or `model`.
        what: &'static str,
        /// The repeated name.
        name: String,
    },
    /// A reference to a processor or model that is not declared.
    #[error("{field} names unknown {what} {name:?}")]
    Unknown {
        /// Where the reference was found.
        field: String,
        /// `processor` or `model`.
        what: &'static str,
        /// The unknown name.
        name: String,
    },
    /// A model that no processor can run.
    #[error("model {0:?} has no profile entry on any processor, so nothing can run it")]
    Unsupported(String),
    /// The graph has no detector.
    #[error("no model without a parent: the graph needs a detector at its root")]
    NoRoot,
    /// Following parents from this model comes back to it.
    #[error("model {0:?} is its own ancestor: the graph must be acyclic")]
    Cycle(String),
    /// One detector class routed to two models.
    #[error("class {class:?} is routed to both {first:?} and {second:?}")]
    ClassRoutedTwice {
        /// The class.
        class: String,
        /// The first model claiming it.
        first: String,
        /// The second model claiming it.
        second: String,
    },
}

/// Why a scene, plan or trace does not fit the system it is used with.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum InputError {
    /// A vector has the wrong number of entries.
    #[error("{what} has {got} entries but the system needs {want}")]
    Length {
        /// What was measured.
        what: &'static str,
        /// Entries found.
        got: usize,
        /// Entries expected.
        want: usize,
    },
    /// A trace line did not parse.
    #[error("trace line {line}: {reason}")]
    Trace {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
}
