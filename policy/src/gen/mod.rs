//! Seeded generators of test situations nobody tuned a scheduler to: boards
//! ([`board`]) and scene-trace shapes ([`Shape`]). Pure and deterministic:
//! the same seed gives the same board and trace on every machine.

mod board;
mod scenes;

pub use board::{board, LOAD_RANGE_MS, SPEED_RANGE};
pub use scenes::{heavy_count, Shape};
