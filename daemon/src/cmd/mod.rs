//! One module per `camdnnd` subcommand.

pub mod simulate;
