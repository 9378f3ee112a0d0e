//! camdnn's versioned socket protocol: message types, the framing codec and a Rust client
