//! A global step takes `SimConfig::step_cost_ms` to compute, as on the
//! daemon's step thread: it decides on the state at its start, its choice
//! applies that much later, and the dispatcher goes on meanwhile. Checked by
//! hand: frames every 1000/14 ms, steps every 530 ms.

use camdnn_policy::scheduler::{Batching, EpochJob, EpochOutcome, Scheduler};

use camdnn_policy::schedulers::{Camdnn, GreedyPlanner};
use camdnn_policy::sim::{simulate, SimConfig, SimError, SimReport, Trace};
use camdnn_policy::{Cluster, ModelId, ProcId, System};

mod common;

fn cfg(step_cost_ms: f64) -> SimConfig {
    SimConfig {
        epoch_ms: 530.0,
        drop_step_gap_ms: 0.0,
        step_cost_ms,
        ..SimConfig::default()
    }
}

fn run(system: &System, s: &mut dyn Scheduler, step_cost_ms: f64) -> SimReport {
    let trace = Trace::parse("20 0\n", 1).unwrap();
    let r = simulate(system, s, &trace, &cfg(step_cost_ms)).unwrap();
    assert_eq!(r.epochs, 2, "steps at 530 and 1060 ms");
    r
}

fn delays(r: &SimReport) -> Vec<f64> {
    r.frames
        .iter()
        .map(|f| (f.delay_ms.expect("none dropped") * 100.0).round() / 100.0)
        .collect()
}

/// Two CPUs that can each run the detector, `slow` in 30 ms and `fast` in
/// 10 ms.
fn two_units() -> System {
    System::from_toml(
        r#"
name = "two-units"
max_batch = 1

[[processor]]
name = "slow"
kind = "cpu"
max_resident = 2

[[processor]]
name = "fast"
kind = "cpu"
max_resident = 2

[[model]]
name = "detector"

[[model]]
name = "cls"
parent = "detector"
classes = ["thing"]

[profile.detector.slow]
exec_ms = [30.0]
load_ms = 10.0

[profile.detector.fast]
exec_ms = [10.0]
load_ms = 10.0

[profile.cls.slow]
exec_ms = [5.0]
load_ms = 10.0

[profile.cls.fast]
exec_ms = [5.0]
load_ms = 10.0
"#,
    )
    .unwrap()
}

/// Places everything on one unit; each global step moves it to the other.
/// The step's job carries the time it started, and the scheduler records
/// (started, applied) for each.
struct Switching {
    host: ProcId,
    steps: Vec<(f64, f64)>,
}

impl Scheduler for Switching {
    fn name(&self) -> String {
        "switching".into()
    }
    fn batching(&self) -> Batching {
        Batching::PerRequest
    }
    fn place(
        &mut self,
        _: &System,
        _: &Cluster,
        _: f64,
        _: ModelId,
        _: usize,
    ) -> Option<(ProcId, usize)> {
        Some((self.host, 1))
    }
    fn start_epoch(
        &mut self,
        _: &System,
        _: &Cluster,
        now: f64,
        _: &[u32],
        _: f64,
        _: f64,
    ) -> Option<EpochJob> {
        Some(EpochJob::new(move || now))
    }
    fn finish_epoch(
        &mut self,
        _: &System,
        _: &mut Cluster,
        now: f64,
        job: EpochJob,
    ) -> EpochOutcome {
        let started = job.into_result::<f64>().expect("this scheduler's job");
        self.steps.push((started, now));
        self.host = ProcId(1 - self.host.0);
        EpochOutcome::default()
    }
}

#[test]
fn a_step_applies_its_cost_after_it_started_while_the_dispatcher_goes_on() {
    let system = two_units();
    let switching = || Switching {
        host: ProcId(0),
        steps: Vec::new(),
    };
    // Free steps: frames 0-7 (to 500 ms) on the slow unit, 8-14 (571 to
    // 1000 ms) on the fast one, 15-19 (from 1071 ms) on the slow one again.
    let mut s = switching();
    let free = delays(&run(&system, &mut s, 0.0));
    assert_eq!(s.steps, vec![(530.0, 530.0), (1060.0, 1060.0)]);
    let want = |f: usize| if (8..15).contains(&f) { 10.0 } else { 30.0 };
    assert_eq!(free, (0..20).map(want).collect::<Vec<_>>());
    // At 50 ms a step applies at 580 and 1110: frame 8 (571.4) and frame 15
    // (1071.4) are placed as before the step, at once (not held until it
    // ends: a held frame would wait for 580 or 1110 first).
    let mut s = switching();
    let costly = delays(&run(&system, &mut s, 50.0));
    assert_eq!(s.steps, vec![(530.0, 580.0), (1060.0, 1110.0)]);
    let want = |f: usize| if (9..16).contains(&f) { 10.0 } else { 30.0 };
    assert_eq!(costly, (0..20).map(want).collect::<Vec<_>>());
}

#[test]
fn camdnns_step_with_a_cost_holds_no_frame() {
    let system = common::one_unit(10.0);
    let mut greedy = Camdnn::new(GreedyPlanner::default(), 5.0);
    let r = run(&system, &mut greedy, 50.0);
    assert!(delays(&r).iter().all(|&d| d == 10.0), "{:?}", delays(&r));
    assert_eq!(
        greedy.choices().iter().sum::<u32>(),
        2,
        "both steps applied"
    );
}

#[test]
fn a_negative_step_cost_is_a_config_error() {
    let system = common::one_unit(10.0);
    let mut s = Camdnn::new(GreedyPlanner::default(), 5.0);
    let cfg = SimConfig {
        step_cost_ms: -1.0,
        ..SimConfig::default()
    };
    let trace = Trace::parse("1 0\n", 1).unwrap();
    let err = simulate(&system, &mut s, &trace, &cfg).unwrap_err();
    assert!(matches!(err, SimError::Config { .. }), "{err}");
    assert!(err.to_string().contains("step_cost_ms"), "{err}");
}
