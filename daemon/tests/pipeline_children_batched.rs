//! A deeper model's requests of one frame start together, as in the
//! simulator: MTCNN's O-Net crops wait until every R-Net request of the frame
//! is answered, so they reach the batcher at once and share batches instead
//! of running one by one. Checked on the real models with the daemon's own
//! `camdnn_batch_size` histogram, so this test has a process (and a global
//! metrics recorder) of its own.

mod pipeline_real_common;

use camdnn_daemon::pipeline::Outcome;
use metrics_exporter_prometheus::PrometheusBuilder;
use pipeline_real_common::{frame, run, start, test_image, variants};

/// (batches, requests) of `model` in a Prometheus text body, summed over processors.
fn batches_and_requests(body: &str, model: &str) -> (f64, f64) {
    let label = format!("model=\"{model}\"");
    let sum = |family: &str| -> f64 {
        body.lines()
            .filter(|l| l.starts_with(family) && l.contains(&label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (
        sum("camdnn_batch_size_count{"),
        sum("camdnn_batch_size_sum{"),
    )
}

#[test]
fn a_frames_onet_crops_share_batches() {
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .expect("this test binary's only metrics recorder");
    let (_, cfg) = variants("camdnnd-faces.toml")
        .into_iter()
        .find(|(l, _)| *l == "ort")
        .expect("an ort variant");
    let built = start("ort", &cfg);
    let img = test_image("astronaut.ppm");
    // One frame at a time, so every O-Net batch holds one frame's crops.
    for seq in 1..=3 {
        let out = run(&built.pipeline, frame(seq, &img, None));
        assert!(matches!(out, Outcome::Done(_)), "frame {seq}: {out:?}");
    }
    let (batches, crops) = batches_and_requests(&handle.render(), "onet");
    assert!(
        crops >= 9.0,
        "the astronaut photo gives R-Net several candidates that pass to O-Net each frame: {crops} O-Net crops in 3 frames"
    );
    // Released one by one, each crop would be a batch of its own.
    assert!(
        batches <= crops / 2.0,
        "{batches} O-Net batches for {crops} crops: a frame's crops did not start together"
    );
}
