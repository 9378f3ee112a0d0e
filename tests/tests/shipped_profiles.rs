//! Every shipped board profile validates, and on the RB5-like profile the
//! local dispatcher alone beats HEFT and Central Queue on the paper's trace.

use camdnn_policy::schedulers;
use camdnn_policy::sim::{simulate, SimConfig, Trace};
use camdnn_policy::System;
use camdnn_tests::repo_root;

fn load(name: &str) -> System {
    let path = repo_root().join("config/profiles").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    System::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_shipped_profile_is_valid() {
    let dir = repo_root().join("config/profiles");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            load(path.file_name().unwrap().to_str().unwrap());
            n += 1;
        }
    }
    assert!(n >= 1, "no profiles in {}", dir.display());
}

#[test]
fn rb5_profile_matches_the_paper_application() {
    let s = load("rb5.toml");
    let names: Vec<&str> = s.models.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        ["detector", "inception_v1", "squeezenet", "mobilenet_v1"]
    );
    let (cpu, dsp) = (
        s.proc_by_name("cpu").unwrap(),
        s.proc_by_name("dsp").unwrap(),
    );
    let det = s.model_by_name("detector").unwrap();
    assert_eq!(
        s.supporting(det).collect::<Vec<_>>(),
        [cpu],
        "detector is CPU-only"
    );
    assert!(
        !s.supports(s.model_by_name("squeezenet").unwrap(), dsp),
        "no SqueezeNet on the DSP"
    );
    assert_eq!(s.load_ms(s.model_by_name("squeezenet").unwrap(), cpu), 20.6);
    // The paper's preferred batch order for MobileNet V1 on the CPU.
    assert_eq!(
        s.preferred_batches(s.model_by_name("mobilenet_v1").unwrap(), cpu),
        &[4, 3, 2, 1, 5]
    );
}

#[test]
fn local_dispatcher_beats_heft_and_central_queue_on_the_paper_trace() {
    let system = load("rb5.toml");
    let trace = Trace::paper_fig11();
    let cfg = SimConfig::default();
    let mean = |name: &str| {
        let mut s = schedulers::by_name(&system, name, 5.0).unwrap();
        let r = simulate(&system, s.as_mut(), &trace, &cfg).unwrap();
        (r.delay().mean, r.dropped())
    };
    let (local, local_drops) = mean("camdnn-local");
    let (heft, heft_drops) = mean("heft");
    let (cq, cq_drops) = mean("cq");
    assert!(
        local < heft,
        "camdnn-local {local:.1} ms vs HEFT {heft:.1} ms"
    );
    assert!(local < cq, "camdnn-local {local:.1} ms vs CQ {cq:.1} ms");
    // Lower delay must not come from dropping more frames.
    assert!(local_drops <= heft_drops && local_drops <= cq_drops);
}
