//! Health and metrics cannot be locked out (`server::http`): with 100 idle
//! TCP connections held open on the HTTP port, and then 100 that sent half
//! a request head, `/health/live` and `/metrics` still answer 200.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use camdnn_daemon::server::http;
use camdnn_daemon::telemetry;
use camdnn_daemon::telemetry::MetricsConfig;

/// GET `path`: the status.
fn get(addr: &str, path: &str) -> u16 {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("an answer, not a reset");
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {text:?}"))
}

#[test]
fn health_and_metrics_answer_while_100_connections_sit_idle() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let exporter = telemetry::install(&MetricsConfig::default(), "test").expect("recorder");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let ready: http::ReadyFn = Arc::new(|| Ok(()));
    rt.spawn(http::serve(listener, Some(exporter), ready));
    // The test holds more connections than there are slots.
    const { assert!(100 > http::MAX_CONNECTIONS) };
    let idle: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(&addr).expect("connect"))
        .collect();
    assert_eq!(get(&addr, "/health/live"), 200);
    assert_eq!(get(&addr, "/metrics"), 200);
    let half: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).expect("connect");
            s.write_all(b"GET /health/li").expect("write");
            s
        })
        .collect();
    assert_eq!(get(&addr, "/health/live"), 200);
    assert_eq!(get(&addr, "/health/ready"), 200);
    drop((idle, half));
}
