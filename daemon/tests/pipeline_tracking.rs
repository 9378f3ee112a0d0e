//! Tracking and result reuse in the serving daemon, end to end: the real pipeline (scheduler
//! thread, preparation pool, sim-engine workers, the shipped simulated-RB5 config with
//! `[pipeline.track]` and each classifier's `reuse` on) behind the real server on a Unix
//! socket, fed frames with upstream boxes one at a time, its counters read from the real
//! Prometheus exporter.

mod service_common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use camdnn_daemon::config::DaemonConfig;
use camdnn_daemon::pipeline::{self, FrameProcessor, Outcome};
use camdnn_daemon::server::config::ServerConfig;
use camdnn_daemon::telemetry::{self, Exporter, MetricsConfig};
use camdnn_policy::reuse::ReuseConfig;
use camdnn_policy::schedulers::{Recording, SceneLog};
use camdnn_protocol::{
    BBox, ClassRef, Client, Frame, FrameResult, PixelFormat, ServerMessage, UpstreamDetection,
};
use camdnn_vision::track::TrackerConfig;
use service_common::{raw, TestServer};
use tokio::sync::oneshot;

/// Frames of the stream before a stored result is inferred again.
const INTERVAL: u32 = 4;
const SIDE: (u32, u32) = (64, 48);

/// The process-wide exporter; the tests take turns, since its counters are shared.
fn exporter() -> &'static Exporter {
    static E: OnceLock<Exporter> = OnceLock::new();
    E.get_or_init(|| telemetry::install(&MetricsConfig::default(), "test").expect("recorder"))
}

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// The simulated RB5 with tracking (a track is confirmed on its second frame) and reuse on
/// every classifier.
fn config() -> DaemonConfig {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/camdnnd-sim.toml");
    let mut cfg = DaemonConfig::load(&path).unwrap();
    cfg.pipeline.track = Some(TrackerConfig {
        birth_hits: 2,
        ..Default::default()
    });
    for m in cfg
        .pipeline
        .models
        .iter_mut()
        .filter(|m| m.parent.is_some())
    {
        m.reuse = Some(ReuseConfig {
            reinfer_interval: INTERVAL,
            ..Default::default()
        });
    }
    cfg.pipeline.check().unwrap();
    cfg
}

fn server() -> TestServer {
    exporter();
    let processor = pipeline::build(&config().pipeline).expect("the pipeline starts");
    TestServer::start(ServerConfig::with_socket("unused"), processor)
}

/// A frame of stream 1 carrying `boxes` (class, box) as upstream detections.
fn frame(seq: u64, boxes: &[(&str, [f32; 4])]) -> Frame {
    let detections = boxes
        .iter()
        .map(|&(class, [x0, y0, x1, y1])| UpstreamDetection {
            bbox: BBox { x0, y0, x1, y1 },
            class: ClassRef::Name(class.into()),
            score: 0.9,
        })
        .collect();
    Frame {
        stream_id: 1,
        seq,
        capture_ts_us: 0,
        width: SIDE.0,
        height: SIDE.1,
        pixel_format: PixelFormat::Rgb24,
        priority: None,
        deadline: None,
        detections: Some(detections),
        payload: Bytes::from(vec![90u8; (SIDE.0 * SIDE.1 * 3) as usize]),
    }
}

/// A person walking right one pixel a frame beside a parked car.
fn walking(seq: u64) -> Frame {
    let x = seq as f32;
    frame(
        seq,
        &[
            ("person", [4.0 + x, 4.0, 20.0 + x, 40.0]),
            ("car", [36.0, 20.0, 60.0, 40.0]),
        ],
    )
}

/// Sends one frame and waits for its `Result`.
fn ask(client: &mut Client, f: &Frame) -> FrameResult {
    client.send_frame(f).expect("send");
    match client.recv().expect("an answer") {
        ServerMessage::Result(r) => r,
        other => panic!("frame {} not answered with a result: {other:?}", f.seq),
    }
}

/// The sum of the series of `name` whose labels include every one of `labels`.
fn metric(name: &str, labels: &[(&str, &str)]) -> f64 {
    exporter()
        .render()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            let all = labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            (n == name && all).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// Waits (up to 20 s: the close reaches the scheduler thread after the last answer is
/// written) for a gauge to read `want`.
fn await_gauge(name: &str, want: f64) {
    let until = Instant::now() + Duration::from_secs(20);
    while metric(name, &[]) != want {
        assert!(
            Instant::now() < until,
            "{name} is {} after 20 s, not {want}",
            metric(name, &[])
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Per object of a result, in order: (track id, each output's age).
fn tracks_and_ages(r: &FrameResult) -> Vec<(u32, Vec<u32>)> {
    r.objects
        .iter()
        .map(|o| (o.track_id, o.outputs.iter().map(|x| x.age).collect()))
        .collect()
}

#[test]
fn continuing_boxes_reuse_results_with_rising_ages_under_one_track_and_are_counted() {
    let _turn = one_at_a_time();
    let server = server();
    let reused0 = metric("camdnn_requests_reused_total", &[("model", "inception_v1")]);
    let inferred0 = metric(
        "camdnn_requests_inferred_total",
        &[("model", "inception_v1")],
    );
    let mut client = Client::connect(&server.socket, "cam").expect("connect");
    assert_eq!(client.welcome().version, 3);
    let frames = 2 * INTERVAL as u64 + 1;
    let got: Vec<_> = (0..frames)
        .map(|seq| tracks_and_ages(&ask(&mut client, &walking(seq))))
        .collect();
    let (person, car) = (got[0][0].0, got[0][1].0);
    assert!(person != 0 && car != 0 && person != car, "{got:?}");
    let mut reused = 0;
    for (seq, objects) in got.iter().enumerate() {
        assert_eq!(objects.len(), 2, "frame {seq}: {got:?}");
        assert_eq!(
            (objects[0].0, objects[1].0),
            (person, car),
            "frame {seq}: the same objects keep their tracks: {got:?}"
        );
        // Born on frame 0 (inferred), confirmed on frame 1: from then on each result
        // stands for INTERVAL frames, its age rising, then the model runs again.
        let age = seq as u32 % INTERVAL;
        for (_, ages) in objects {
            assert_eq!(ages, &vec![age], "frame {seq}: {got:?}");
        }
        reused += usize::from(age > 0);
    }
    assert!(reused >= frames as usize / 2, "{got:?}");
    // Every person request of the stream is counted once: reused or inferred.
    let reused_n = metric("camdnn_requests_reused_total", &[("model", "inception_v1")]) - reused0;
    let inferred_n = metric(
        "camdnn_requests_inferred_total",
        &[("model", "inception_v1")],
    ) - inferred0;
    assert_eq!(
        (reused_n, inferred_n),
        (reused as f64, (frames as usize - reused) as f64),
        "{got:?}"
    );
    assert!(
        metric(
            "camdnn_requests_inferred_total",
            &[("model", "inception_v1"), ("reason", "interval")]
        ) >= 1.0
    );
    assert_eq!(metric("camdnn_track_streams", &[]), 1.0);
    assert_eq!(metric("camdnn_tracks_live", &[]), 2.0);
    client.bye().expect("bye");
    // The connection's streams end with it: their tracks are freed.
    await_gauge("camdnn_track_streams", 0.0);
    await_gauge("camdnn_tracks_live", 0.0);
    server.shutdown();
}

#[test]
fn boxes_that_never_continue_are_inferred_on_every_frame() {
    let _turn = one_at_a_time();
    let server = server();
    let reused0 = metric("camdnn_requests_reused_total", &[]);
    let mut client = Client::connect(&server.socket, "cam").expect("connect");
    // Each frame's person stands in a cell of the frame no earlier box touched.
    let (cols, rows) = (SIDE.0 / 8, SIDE.1 / 8);
    let mut ids = Vec::new();
    for seq in 0..u64::from(cols * rows).min(16) {
        let (c, r) = ((seq as u32 * 5) % cols, (seq as u32 * 5 / cols) % rows);
        let (x, y) = ((c * 8) as f32, (r * 8) as f32);
        let f = frame(seq, &[("person", [x + 1.0, y + 1.0, x + 7.0, y + 7.0])]);
        let got = tracks_and_ages(&ask(&mut client, &f));
        assert_eq!(got.len(), 1, "frame {seq}: {got:?}");
        assert_eq!(
            got[0].1,
            vec![0],
            "frame {seq} reused a stale result: {got:?}"
        );
        ids.push(got[0].0);
    }
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "a new track per frame: {ids:?}");
    assert_eq!(metric("camdnn_requests_reused_total", &[]), reused0);
    client.bye().expect("bye");
    server.shutdown();
}

#[test]
fn a_version_2_client_is_answered_in_version_2_and_its_stream_is_reused() {
    let _turn = one_at_a_time();
    let server = server();
    let reused0 = metric("camdnn_requests_reused_total", &[]);
    let (mut client, version) = raw::Raw::connect_offering(&server.socket, &[1, 2]);
    assert_eq!(version, 2);
    for seq in 0..INTERVAL as u64 {
        client.send_frame(&walking(seq));
        let bytes = client.recv_bytes();
        assert_eq!(u16::from_le_bytes([bytes[4], bytes[5]]), 2, "frame {seq}");
        let (msg, _) = ServerMessage::decode(&bytes, u32::MAX).unwrap().unwrap();
        let ServerMessage::Result(r) = msg else {
            panic!("frame {seq}: {msg:?}")
        };
        // Version 2 has no track or ages: every object still has its output.
        assert!(r
            .objects
            .iter()
            .all(|o| o.track_id == 0 && o.outputs.len() == 1 && o.outputs[0].age == 0));
        assert_eq!(r.objects.len(), 2);
    }
    assert!(metric("camdnn_requests_reused_total", &[]) > reused0);
    server.shutdown();
}

/// The scene each frame shows the scheduler (and its global step) counts only the requests
/// that are inferred: a frame whose objects were all answered from their tracks is an empty
/// scene, not the two objects it shows.
#[test]
fn the_planners_see_only_the_requests_that_are_inferred() {
    let _turn = one_at_a_time();
    exporter();
    let scenes = SceneLog::default();
    let log = Arc::clone(&scenes);
    let built = pipeline::start_with(&config().pipeline, move |inner| {
        Box::new(Recording::new(inner).0.logging_scenes_to(log))
    })
    .expect("the pipeline starts");
    let frames = 2 * INTERVAL as u64;
    for seq in 0..frames {
        let (tx, rx) = oneshot::channel();
        built
            .pipeline
            .submit(walking(seq), Instant::now(), None, tx);
        let Outcome::Done(r) = rx.blocking_recv().unwrap() else {
            panic!("frame {seq} not answered")
        };
        let inferred = r.objects.iter().filter(|o| o.outputs[0].age == 0).count();
        let scene = scenes.lock().unwrap().last().cloned().expect("a scene");
        // Models in config order: the detector, then inception_v1 (person), squeezenet (car).
        let want = if inferred == 0 { 0 } else { 1 };
        assert_eq!(
            (scene[1], scene[2]),
            (want, want),
            "frame {seq}: {inferred} inferred, the scene {scene:?}"
        );
    }
    assert_eq!(
        scenes.lock().unwrap().len(),
        frames as usize,
        "one scene per frame"
    );
}
