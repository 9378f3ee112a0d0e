//! camdnnd: the camdnn daemon and its operator commands.

mod cmd;

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
    Simulate(cmd::simulate::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Simulate(args) => cmd::simulate::run(&args),
    }
}
