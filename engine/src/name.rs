//! The name a model is addressed by on the engine seam: loads, runs, unloads and their
//! reports carry a [`ModelName`], not a bare `String`, so a processor's name or a path
//! cannot stand in for it, and a command clones a pointer, not the text.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A model's name as its config gives it (unique within a pipeline).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct ModelName(Arc<str>);

impl ModelName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for ModelName {
    fn from(s: &str) -> Self {
        ModelName(s.into())
    }
}

impl From<String> for ModelName {
    fn from(s: String) -> Self {
        ModelName(s.into())
    }
}

impl From<&String> for ModelName {
    fn from(s: &String) -> Self {
        ModelName(s.as_str().into())
    }
}

impl From<&ModelName> for ModelName {
    fn from(n: &ModelName) -> Self {
        n.clone()
    }
}

impl From<ModelName> for String {
    fn from(n: ModelName) -> Self {
        n.0.to_string()
    }
}

impl Deref for ModelName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for ModelName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ModelName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for ModelName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for ModelName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for ModelName {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::ModelName;

    #[test]
    fn a_name_reads_and_writes_as_its_text_and_finds_its_entry_by_text() {
        let n: ModelName = serde_json::from_str("\"squeezenet\"").unwrap();
        assert_eq!(n, "squeezenet");
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"squeezenet\"");
        let resident = HashMap::from([(n.clone(), 1)]);
        assert_eq!(resident.get("squeezenet"), Some(&1));
        assert_eq!(format!("model `{n}`"), "model `squeezenet`");
    }
}
