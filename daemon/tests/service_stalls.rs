//! The real `camdnnd serve` binary when something hangs or races, on the
//! shipped simulated-RB5 config with the sim engine's test-only faults:
//! an engine run that hangs for a minute is answered at its limit while
//! every client is served and readiness says why; a pipeline where nothing
//! moves stops feeding the systemd watchdog; signals during start-up; a bad
//! socket path fails before any model loads; a live socket of another user
//! is left alone. Nothing here compares measured durations.

mod daemon_common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::os::unix::process::CommandExt;
use std::time::Duration;

use camdnn_protocol::{Client, DropReason, ServerMessage};
use daemon_common::{config_text, frame, with_model_line, Daemon};

/// `[pipeline.stall]` lines for the sim config: every sim run takes at most
/// 151 ms, so each run's limit is the floor.
fn stall_section(floor_ms: u64, progress_ms: u64) -> String {
    format!(
        "\n[pipeline.stall]\ntimeout_factor = 1.0\nrun_timeout_floor_ms = {floor_ms}\nprogress_timeout_ms = {progress_ms}\n"
    )
}

/// The sim config with `stall` appended to `[pipeline]` (before the first
/// processor) and `faults` on `model`.
fn faulty(
    socket: &std::path::Path,
    metrics: &str,
    model: &str,
    faults: &str,
    stall: &str,
) -> String {
    let text = with_model_line(&config_text(socket, metrics, 5.0), model, faults);
    text.replacen(
        "[[pipeline.processor]]",
        &format!("{stall}\n[[pipeline.processor]]"),
        1,
    )
}

/// Sends `n` frames of `classes`, one at a time, waiting for each answer;
/// the answers.
fn one_by_one(c: &mut Client, stream: u32, n: u64, classes: Option<&[&str]>) -> Vec<ServerMessage> {
    (0..n)
        .map(|seq| {
            c.send_frame(&frame(stream, seq, classes)).expect("send");
            c.recv().expect("answer")
        })
        .collect()
}

/// An engine run stalled for 60 s, which could hold both in-flight slots,
/// is answered at its 1 s limit; persons, cars and frames for the detector
/// are all answered meanwhile, and readiness says which thread is stuck.
#[test]
fn a_run_hung_for_a_minute_is_answered_and_every_client_is_served() {
    let d = Daemon::start_with("camdnnd.sock", |socket, metrics| {
        faulty(
            socket,
            metrics,
            "inception_v1",
            "sim_faults = { stall_ms = 60000, stall_on_runs = [2] }",
            &stall_section(1_000, 60_000),
        )
    });
    let mut persons = Client::connect(&d.socket, "persons").expect("connect");
    let answers = one_by_one(&mut persons, 1, 1, Some(&["person"]));
    match &answers[0] {
        ServerMessage::Dropped(x) => assert_eq!(x.reason, DropReason::ProcessingFailed),
        other => panic!("expected processing_failed at the limit, got {other:?}"),
    }
    let (status, body) = d.get("/health/ready").expect("health");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("stuck in the engine") && body.contains("inception_v1"),
        "{body}"
    );
    d.wait_for(|| d.metric_sum("camdnn_engine_timeouts_total") >= 1.0);
    d.wait_for(|| d.metric_sum("camdnn_worker_threads_stuck") >= 1.0);
    d.wait_for(|| d.metric("camdnn_ready") == 0.0);
    // While the thread is stuck, every kind of client is served.
    let mut cars = Client::connect(&d.socket, "cars").expect("connect");
    let mut detector = Client::connect(&d.socket, "detector").expect("connect");
    for (c, stream, classes) in [
        (&mut cars, 2, Some(&["car"][..])),
        (&mut detector, 3, None),
        (&mut persons, 4, Some(&["person"][..])),
    ] {
        let answers = one_by_one(c, stream, 5, classes);
        assert!(
            answers
                .iter()
                .all(|m| matches!(m, ServerMessage::Result(_) | ServerMessage::Dropped(_))),
            "{answers:?}"
        );
        assert!(
            answers
                .iter()
                .any(|m| matches!(m, ServerMessage::Result(_))),
            "stream {stream} served: {answers:?}"
        );
    }
    assert_eq!(
        d.get("/health/ready").map(|x| x.0),
        Some(503),
        "still stuck: the run hangs for 60 s"
    );
}

/// When nothing moves while frames are inside, the watchdog stops being
/// fed (and the log says why), and is fed again once the pipeline moves.
#[test]
fn a_pipeline_where_nothing_moves_stops_feeding_the_watchdog() {
    let dir = tempfile::tempdir().expect("temp dir");
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).expect("notify socket");
    notify
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let d = Daemon::spawn(
        "camdnnd.sock",
        |socket, metrics| {
            faulty(
                socket,
                metrics,
                "inception_v1",
                "sim_faults = { stall_ms = 4000, stall_on_runs = [2] }",
                &stall_section(60_000, 500),
            )
        },
        |cmd| {
            cmd.env("NOTIFY_SOCKET", &notify_path)
                .env("WATCHDOG_USEC", "200000")
                .env_remove("WATCHDOG_PID");
        },
    );
    let mut buf = [0u8; 4096];
    loop {
        let n = notify.recv(&mut buf).expect("notify");
        if String::from_utf8_lossy(&buf[..n]).contains("WATCHDOG=1") {
            break;
        }
    }
    let mut c = Client::connect(&d.socket, "persons").expect("connect");
    c.send_frame(&frame(1, 0, Some(&["person"]))).expect("send");
    d.wait_for(|| {
        d.log()
            .contains("the pipeline is not alive: no longer feeding the watchdog")
    });
    assert!(
        d.log().contains("stalled: 1 frame(s) inside"),
        "{}",
        d.log()
    );
    assert!(
        matches!(c.recv(), Ok(ServerMessage::Result(_))),
        "within its limit"
    );
    d.wait_for(|| {
        d.log()
            .contains("the pipeline is alive again: feeding the watchdog")
    });
}

/// A SIGHUP while models load (whose default action would end the daemon,
/// an exit systemd counts as clean) is logged and applied as a reload once
/// start-up is done; a SIGTERM during start-up ends it cleanly, saying so.
#[test]
fn signals_during_start_up_are_handled() {
    let slow_start = "sim_faults = { load_stall_ms = 3000, stall_on_loads = [1] }";
    let spawn = || {
        Daemon::spawn(
            "camdnnd.sock",
            |socket, metrics| {
                with_model_line(&config_text(socket, metrics, 5.0), "detector", slow_start)
            },
            |_| {},
        )
    };
    let loading = |d: &Daemon| {
        d.wait_for(|| {
            d.get("/health/ready")
                .is_some_and(|(s, body)| s == 503 && body.contains("loading models"))
        })
    };
    let mut d = spawn();
    loading(&d);
    d.signal(libc::SIGHUP);
    d.wait_ready();
    d.wait_for(|| d.metric("camdnn_config_reloads_total{result=\"ok\"}") == 1.0);
    assert!(d.log().contains("SIGHUP during start-up"), "{}", d.log());
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), 0, "{}", d.log());

    let mut d = spawn();
    loading(&d);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait_exit(), 0, "{}", d.log());
    assert!(d
        .log()
        .contains("signal during start-up: stopping before serving"));
}

/// The socket is taken before any model loads: with a start-up load that
/// would hang for ten minutes, a bad socket path still fails at once,
/// naming the path.
#[test]
fn a_bad_socket_path_fails_before_any_model_loads() {
    let mut d = Daemon::spawn(
        "a-file/camdnnd.sock",
        |socket, metrics| {
            std::fs::write(socket.parent().unwrap(), "not a folder").unwrap();
            with_model_line(
                &config_text(socket, metrics, 5.0),
                "detector",
                "sim_faults = { load_stall_ms = 600000, stall_on_loads = [1] }",
            )
        },
        |_| {},
    );
    assert_eq!(d.wait_exit(), 1, "{}", d.log());
    assert!(d.log().contains("creating socket folder"), "{}", d.log());
}

/// A socket file the daemon cannot connect to is not taken over: only a
/// refused connection means stale; here connecting fails with EACCES (as root the
/// daemon runs as nobody; otherwise the socket's mode forbids it) and the
/// daemon refuses to start, leaving the live socket alone.
#[test]
fn a_live_socket_that_cannot_be_reached_is_not_taken_over() {
    let root = unsafe { libc::geteuid() } == 0;
    let mut live: Option<UnixListener> = None;
    let mut d = Daemon::spawn(
        "shared/camdnnd.sock",
        |socket, metrics| {
            let shared = socket.parent().unwrap();
            if root {
                // The config is in our temporary folder: nobody must read it.
                let dir = shared.parent().unwrap();
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            std::fs::create_dir(shared).unwrap();
            std::fs::set_permissions(shared, std::fs::Permissions::from_mode(0o777)).unwrap();
            live = Some(UnixListener::bind(socket).expect("live server"));
            let mode = if root { 0o600 } else { 0o000 };
            std::fs::set_permissions(socket, std::fs::Permissions::from_mode(mode)).unwrap();
            config_text(socket, metrics, 5.0)
        },
        |cmd| {
            if root {
                cmd.uid(65534).gid(65534);
            }
        },
    );
    assert_eq!(d.wait_exit(), 1, "{}", d.log());
    assert!(
        d.log().contains("cannot tell whether") && d.log().contains("not replacing it"),
        "{}",
        d.log()
    );
    let live = live.expect("bound");
    live.set_nonblocking(true).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o600)).unwrap();
    let _client = std::os::unix::net::UnixStream::connect(&d.socket).expect("still ours");
    assert!(
        live.accept().is_ok(),
        "the live server still has its socket"
    );
}
