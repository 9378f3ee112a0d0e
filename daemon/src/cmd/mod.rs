//! The `camdnnd` command line: one module per subcommand.

pub mod bench;
pub mod check_config;
pub mod feed;
pub mod profile;
pub mod recovery;
pub mod serve;
pub mod simulate;
pub mod suite;
pub mod track_eval;

use clap::{Parser, Subcommand};

/// camdnn: real-time serving of networks of DNNs on heterogeneous boards.
#[derive(Parser, Debug)]
#[command(name = "camdnnd", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs schedulers on a board profile and a scene trace in the simulator
    /// and prints frame delay, drops and utilisation side by side.
    Simulate(simulate::Args),
    /// Runs every scheduler over generated boards x scene shapes (and any
    /// shipped profile) and prints the full scheduler's wins and losses on
    /// the on-time share.
    Suite(suite::Args),
    /// Runs the daemon: serves frames on the Unix socket until SIGTERM.
    Serve(serve::Args),
    /// Streams images, a scene trace or synthetic frames to a running daemon
    /// at a given fps and prints the answers as JSON lines.
    Feed(feed::Args),
    /// Validates a daemon config without serving: parses it, checks the
    /// pipeline and loads every model on every processor that supports it.
    CheckConfig(check_config::Args),
    /// Measures t_e(i,j,k) and t_l(i,j) of the configured models on this
    /// host's processors and writes the profile file the scheduler reads.
    Profile(profile::Args),
    /// Benchmarks the real pipeline against a sequential Rust loop and a
    /// sequential Python/onnxruntime script, and the simulator's prediction.
    Bench(bench::Args),
    /// Replays a clip through the real graph per frame and with tracking and per-object
    /// result reuse, and prints per model the inferences saved and the agreement of the
    /// reused results with per-frame inference.
    TrackEval(track_eval::Args),
}

/// The report commands print tables that are often piped into `head`:
/// like any Unix filter they stop when the reader goes away (SIGPIPE's
/// default action) instead of panicking in `println!`. `serve`, `feed` and
/// `bench` keep Rust's ignored SIGPIPE, as they write to sockets.
fn stop_quietly_when_stdout_closes() {
    // SAFETY: `signal` with a valid signal number and SIG_DFL only resets
    // the disposition; called before the command starts any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Parses the command line and runs the subcommand.
pub fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Simulate(args) => {
            stop_quietly_when_stdout_closes();
            simulate::run(&args)
        }
        Command::Suite(args) => {
            stop_quietly_when_stdout_closes();
            suite::run(&args)
        }
        Command::Serve(args) => serve::run(&args),
        Command::Feed(args) => feed::run(&args),
        Command::CheckConfig(args) => check_config::run(&args),
        Command::Profile(args) => profile::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::TrackEval(args) => {
            stop_quietly_when_stdout_closes();
            track_eval::run(&args)
        }
    }
}
