//! camdnnd: the camdnn daemon and its operator commands.

fn main() -> anyhow::Result<()> {
    camdnn_daemon::cmd::main()
}
