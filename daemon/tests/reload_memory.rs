//! Reload keeps memory flat: the real binary on the simulated-RB5 config,
//! under steady load from two clients, reloaded by SIGHUP many times; its
//! resident memory after the last reload stays within a bound of what it
//! was after the first. Ignored by default (100 reloads take a few
//! minutes); run it with
//!
//! ```sh
//! cargo test -p camdnn-daemon --test reload_memory -- --ignored --nocapture
//! ```
//!
//! `CAMDNN_RELOADS` sets the number of reloads (default 100). It prints the
//! RSS after each tenth reload; docs/operations.md ("Reloads and memory")
//! gives the figures.

mod daemon_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use camdnn_protocol::Client;
use daemon_common::{frame, proc_status_kib, Daemon};

/// How far the RSS after the last reload may be above the RSS after the
/// first, MiB.
const RSS_GROWTH_BOUND_MIB: f64 = 8.0;

#[test]
#[ignore = "100 reloads take minutes; see the module docs"]
fn rss_stays_flat_over_100_reloads_under_load() {
    let reloads: u64 = std::env::var("CAMDNN_RELOADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let d = Daemon::start();
    let pid = d.child.id();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..2u32)
        .map(|stream| {
            let (socket, stop) = (d.socket.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut c = Client::connect(&socket, "reload-load").expect("connect");
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    c.send_frame(&frame(stream, seq, Some(&["person"])))
                        .expect("send");
                    c.recv().expect("answer");
                    seq += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                seq
            })
        })
        .collect();
    let mut first = None;
    let mut samples = Vec::new();
    for n in 1..=reloads {
        d.signal(libc::SIGHUP);
        d.wait_for(|| d.metric("camdnn_config_reloads_total{result=\"ok\"}") == n as f64);
        // The old pipeline is torn down on its own thread once its last frame is answered.
        std::thread::sleep(Duration::from_millis(300));
        let rss = proc_status_kib(pid, "VmRSS") as f64 / 1024.0;
        first.get_or_insert(rss);
        samples.push(rss);
        if n % 10 == 0 || n == 1 {
            println!("reload {n:3}: RSS {rss:.1} MiB");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let frames: u64 = clients.into_iter().map(|c| c.join().expect("client")).sum();
    let first = first.expect("at least one reload");
    let last = *samples.last().unwrap();
    let max = samples.iter().copied().fold(f64::MIN, f64::max);
    println!(
        "{reloads} reloads under load ({frames} frames answered): RSS after the first {first:.1} MiB, after the last {last:.1} MiB, highest {max:.1} MiB"
    );
    assert!(
        last <= first + RSS_GROWTH_BOUND_MIB,
        "RSS grew from {first:.1} to {last:.1} MiB over {reloads} reloads"
    );
}
