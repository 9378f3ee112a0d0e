//! Demonstration runs: content, determinism for a seed, resumption, refusal
//! of a folder made with other parameters, and the `ilmodel demos` command.

use std::fs;
use std::path::Path;
use std::process::Command;

use camdnn_ilmodel::demos::{
    chunk_path, generate, generate_shard, instance, merge_run, Demo, DemoConfig, DemoStatus, Shard,
    SolveTime,
};
use camdnn_ilmodel::DemoError;
use camdnn_policy::{Detector, Plan, PlanInput, System};

const TINY: &str = include_str!("fixtures/tiny.toml");
const PAIR: &str = include_str!("fixtures/pair.toml");

fn config(system: &str, out: &Path, samples: u64, jobs: usize) -> DemoConfig {
    DemoConfig {
        system_toml: system.into(),
        out: out.into(),
        seed: 42,
        max_objects: 3,
        samples,
        rem_max_ms: 50.0,
        frames_per_epoch: 70.0,
        chunk_size: 7,
        jobs,
        time_limit_s: 10.0,
        progress: false,
    }
}

fn read_demos(path: &Path) -> Vec<Demo> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every line's plan is feasible for its own input and has T = t_ms.
fn check_dataset(system_text: &str, demos: &[Demo]) {
    let system = System::from_toml(system_text).unwrap();
    let det = Detector::fastest(&system);
    for (n, d) in demos.iter().enumerate() {
        assert_eq!(d.index, n as u64);
        let a_old: Vec<bool> = d.a_old.concat();
        let input = PlanInput {
            scene: &d.scene,
            rem_ms: &d.rem_ms,
            residency: &a_old,
            frames_per_epoch: d.frames_per_epoch,
        };
        if d.status == DemoStatus::Infeasible {
            assert!(d.t_ms.is_none() && d.batches.is_none());
            continue;
        }
        let mut plan = Plan::empty(&system);
        for i in system.model_ids() {
            for j in system.proc_ids() {
                plan.set_resident(i, j, d.resident.as_ref().unwrap()[i.0][j.0]);
                for k in 1..=system.max_batch {
                    plan.set_batches(i, j, k, d.batches.as_ref().unwrap()[i.0][j.0][k - 1]);
                }
            }
        }
        assert_eq!(plan.infeasibility(&system, &input), None, "demo {n}");
        let t = plan.makespan_ms(&system, &input, det);
        assert!(
            (t - d.t_ms.unwrap()).abs() < 1e-9,
            "demo {n}: {t} vs {:?}",
            d.t_ms
        );
    }
}

#[test]
fn grid_mode_cycles_through_every_scene() {
    let dir = tempfile::tempdir().unwrap();
    // Two classifiers, 0..=3 objects: 16 scenes, 40 samples = 2.5 passes.
    let s = generate(&config(TINY, dir.path(), 40, 2)).unwrap();
    assert_eq!(
        (s.samples, s.chunks, s.chunks_reused, s.chunks_solved),
        (40, 6, 0, 6)
    );
    let demos = read_demos(&s.demos_path);
    assert_eq!(demos.len(), 40);
    for (n, d) in demos.iter().enumerate() {
        let g = n % 16;
        assert_eq!(d.scene, vec![0, (g / 4) as u32, (g % 4) as u32], "demo {n}");
        assert!(d.rem_ms.iter().all(|&r| (0.0..50.0).contains(&r)));
    }
    // Different draws of rem for the same scene.
    assert_ne!(demos[0].rem_ms, demos[16].rem_ms);
    check_dataset(TINY, &demos);
    let times: Vec<SolveTime> = fs::read_to_string(&s.times_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(times.len(), 40);
    assert!(times
        .iter()
        .enumerate()
        .all(|(n, t)| t.index == n as u64 && t.solve_ms > 0.0));
}

#[test]
fn sampled_mode_respects_limits_and_residency_caps() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(PAIR, dir.path(), 30, 2);
    c.max_objects = 14; // 225 scenes > 30 samples: sampled
    let s = generate(&c).unwrap();
    let demos = read_demos(&s.demos_path);
    assert!(demos
        .iter()
        .all(|d| d.scene[0] == 0 && d.scene[1..].iter().all(|&r| r <= 14)));
    let distinct: std::collections::BTreeSet<_> = demos.iter().map(|d| d.scene.clone()).collect();
    assert!(distinct.len() > 20, "{} distinct scenes", distinct.len());
    check_dataset(PAIR, &demos);
    let manifest = fs::read_to_string(dir.path().join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"scene_mode\": \"sampled\""),
        "{manifest}"
    );
}

#[test]
fn previous_residencies_respect_slots_and_budgets() {
    let system = System::from_toml(PAIR).unwrap();
    let det = Detector::fastest(&system);
    let np = system.num_processors();
    let mut seen_other = false;
    for index in 0..500 {
        let (_, _, a_old) = instance(&system, det, 9, index, 14, 1000, 80.0);
        assert!(a_old[det.proc.0], "detector resident on p_d");
        for j in system.proc_ids() {
            let p = &system.processors[j.0];
            let on: Vec<_> = system
                .model_ids()
                .filter(|i| a_old[i.0 * np + j.0])
                .collect();
            assert!(on.len() <= p.max_resident, "index {index}");
            let mb: f64 = on.iter().map(|&i| system.size_mb(i, j)).sum();
            assert!(p.memory_budget_mb.is_none_or(|b| mb <= b), "index {index}");
            seen_other |= on.len() > 1;
        }
    }
    assert!(seen_other, "some classifiers are drawn resident");
}

#[test]
fn same_seed_same_file_whatever_the_threads_and_resume_after_a_kill() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    let a = generate(&config(PAIR, one.path(), 33, 1)).unwrap();
    let b = generate(&config(PAIR, two.path(), 33, 2)).unwrap();
    let bytes = fs::read(&a.demos_path).unwrap();
    assert_eq!(bytes, fs::read(&b.demos_path).unwrap());

    // A killed run: one chunk never written, the merged file never made.
    fs::remove_file(chunk_path(&two.path().join("chunks"), 2)).unwrap();
    fs::remove_file(&b.demos_path).unwrap();
    let again = generate(&config(PAIR, two.path(), 33, 2)).unwrap();
    assert_eq!((again.chunks_reused, again.chunks_solved), (4, 1));
    assert_eq!(bytes, fs::read(&again.demos_path).unwrap());

    // Nothing left to do: everything reused.
    let idle = generate(&config(PAIR, two.path(), 33, 2)).unwrap();
    assert_eq!((idle.chunks_reused, idle.chunks_solved), (5, 0));

    // Another seed gives another dataset.
    let three = tempfile::tempdir().unwrap();
    let mut c = config(PAIR, three.path(), 33, 2);
    c.seed = 43;
    let d = generate(&c).unwrap();
    assert_ne!(bytes, fs::read(&d.demos_path).unwrap());
}

#[test]
fn shards_sharing_a_folder_merge_to_the_single_machine_file() {
    let single = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let whole = generate(&config(PAIR, single.path(), 33, 2)).unwrap();
    let shard = |index| Shard { index, count: 3 };
    // Chunks 0..5 of 7 demos: shard 0 owns 0 and 3, 1 owns 1 and 4, 2 owns 2.
    let s0 = generate_shard(&config(PAIR, shared.path(), 33, 1), shard(0)).unwrap();
    assert_eq!((s0.chunks, s0.owned, s0.chunks_solved), (5, 2, 2));
    assert!(
        !shared.path().join("demos.jsonl").exists(),
        "a shard does not merge"
    );
    let s2 = generate_shard(&config(PAIR, shared.path(), 33, 2), shard(2)).unwrap();
    assert_eq!((s2.owned, s2.chunks_solved), (1, 1));

    // Shard 1 has not run: the merge names its chunks and writes nothing.
    let err = merge_run(&config(PAIR, shared.path(), 33, 1)).unwrap_err();
    assert!(
        matches!(&err, DemoError::Incomplete { missing: 2, chunks: 5, first, .. } if first == &[1, 4]),
        "{err}"
    );
    assert!(!shared.path().join("demos.jsonl").exists());

    let s1 = generate_shard(&config(PAIR, shared.path(), 33, 1), shard(1)).unwrap();
    assert_eq!((s1.owned, s1.chunks_solved), (2, 2));
    // A shard run again resumes: nothing left to solve.
    let again = generate_shard(&config(PAIR, shared.path(), 33, 1), shard(1)).unwrap();
    assert_eq!((again.chunks_reused, again.chunks_solved), (2, 0));

    let merged = merge_run(&config(PAIR, shared.path(), 33, 1)).unwrap();
    assert_eq!((merged.chunks_solved, merged.samples), (0, 33));
    for file in ["demos.jsonl", "manifest.json"] {
        assert_eq!(
            fs::read(single.path().join(file)).unwrap(),
            fs::read(shared.path().join(file)).unwrap(),
            "{file} differs from the single-machine run"
        );
    }
    assert_eq!(whole.infeasible, merged.infeasible);
    // No temporary file is left behind.
    for entry in fs::read_dir(shared.path()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(!name.contains("tmp"), "{name} left behind");
    }
}

#[test]
fn shard_specs_come_from_numbers_or_the_schedulers_variables() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let none = env(&[]);
    assert_eq!(
        Shard::parse("2/5", none).unwrap(),
        Shard { index: 2, count: 5 }
    );
    assert_eq!(
        Shard::parse(
            "JOB_COMPLETION_INDEX/4",
            env(&[("JOB_COMPLETION_INDEX", "3")])
        )
        .unwrap(),
        Shard { index: 3, count: 4 }
    );
    // Slurm arrays may start at 1: the index counts from SLURM_ARRAY_TASK_MIN.
    let slurm = env(&[("SLURM_ARRAY_TASK_ID", "4"), ("SLURM_ARRAY_TASK_MIN", "1")]);
    assert_eq!(
        Shard::parse("SLURM_ARRAY_TASK_ID/4", slurm).unwrap(),
        Shard { index: 3, count: 4 }
    );
    for (spec, named) in [
        ("3", "I/N"),
        ("5/5", "not below"),
        ("1/0", "at least 1"),
        ("x/2", "neither a number"),
        ("-1/2", "neither a number"),
        ("1/two", "two"),
        ("JOB_COMPLETION_INDEX/2", "JOB_COMPLETION_INDEX is not set"),
    ] {
        let e = Shard::parse(spec, none).unwrap_err().to_string();
        assert!(e.contains(named), "{spec}: {e}");
    }
    let e = Shard::parse(
        "SLURM_ARRAY_TASK_ID/2",
        env(&[("SLURM_ARRAY_TASK_ID", "abc")]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("\"abc\" is not a whole number"), "{e}");
}

#[test]
fn a_folder_of_another_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    generate(&config(TINY, dir.path(), 5, 1)).unwrap();
    let mut c = config(TINY, dir.path(), 5, 1);
    c.seed = 7;
    match generate(&c) {
        Err(DemoError::ManifestMismatch { field, .. }) => assert_eq!(field, "seed"),
        other => panic!("expected a manifest mismatch, got {other:?}"),
    }
    match generate(&config(PAIR, dir.path(), 5, 1)) {
        Err(DemoError::ManifestMismatch { field, .. }) => assert_eq!(field, "system_name"),
        other => panic!("expected a manifest mismatch, got {other:?}"),
    }
}

#[test]
fn a_truncated_chunk_is_reported_not_merged() {
    let dir = tempfile::tempdir().unwrap();
    generate(&config(TINY, dir.path(), 14, 1)).unwrap();
    let chunk = chunk_path(&dir.path().join("chunks"), 1);
    let text = fs::read_to_string(&chunk).unwrap();
    let first_line = text.lines().next().unwrap().to_string() + "\n";
    fs::write(&chunk, first_line).unwrap();
    let err = generate(&config(TINY, dir.path(), 14, 1)).unwrap_err();
    assert!(matches!(err, DemoError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("chunk-000001.jsonl"), "{err}");
}

#[test]
fn bad_parameters_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(TINY, dir.path(), 0, 1);
    assert!(generate(&c).unwrap_err().to_string().contains("samples"));
    c.samples = 3;
    c.rem_max_ms = -1.0;
    assert!(generate(&c).unwrap_err().to_string().contains("rem_max_ms"));
    let c = config("not toml [", dir.path(), 3, 1);
    assert!(matches!(generate(&c), Err(DemoError::System(_))));
}

fn ilmodel(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ilmodel"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn demos_command_is_deterministic_and_resumes() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/trio.toml");
    let x = tempfile::tempdir().unwrap();
    let y = tempfile::tempdir().unwrap();
    let run = |out: &Path, jobs: &str| {
        let (ok, stdout, stderr) = ilmodel(&[
            "demos",
            "--system",
            fixture,
            "--out",
            out.to_str().unwrap(),
            "--seed",
            "5",
            "--max-objects",
            "4",
            "--samples",
            "24",
            "--chunk-size",
            "5",
            "--jobs",
            jobs,
            "--quiet",
        ]);
        assert!(ok, "{stderr}");
        stdout
    };
    let first = run(x.path(), "2");
    assert!(first.contains("24 demonstrations"), "{first}");
    assert!(first.contains("0 reused, 5 solved now"), "{first}");
    run(y.path(), "1");
    let bytes = fs::read(x.path().join("demos.jsonl")).unwrap();
    assert_eq!(bytes, fs::read(y.path().join("demos.jsonl")).unwrap());
    check_dataset(
        include_str!("fixtures/trio.toml"),
        &read_demos(&x.path().join("demos.jsonl")),
    );

    fs::remove_file(chunk_path(&x.path().join("chunks"), 3)).unwrap();
    let resumed = run(x.path(), "2");
    assert!(resumed.contains("4 reused, 1 solved now"), "{resumed}");
    assert_eq!(bytes, fs::read(x.path().join("demos.jsonl")).unwrap());
}

#[test]
fn demos_command_shards_from_the_environment_and_merges() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/trio.toml");
    let single = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let run = |out: &Path, extra: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ilmodel"));
        cmd.args(["demos", "--system", fixture, "--out", out.to_str().unwrap()])
            .args(["--seed", "5", "--max-objects", "4", "--samples", "24"])
            .args(["--chunk-size", "5", "--jobs", "1", "--quiet"])
            .args(extra)
            .env_remove("JOB_COMPLETION_INDEX")
            .env_remove("SLURM_ARRAY_TASK_ID")
            .env_remove("SLURM_ARRAY_TASK_MIN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let (ok, text) = run(single.path(), &[], &[]);
    assert!(ok, "{text}");
    // A Kubernetes Indexed Job's pod 0 and a Slurm array's task 2 of 1-2.
    let (ok, text) = run(
        shared.path(),
        &["--shard", "JOB_COMPLETION_INDEX/2"],
        &[("JOB_COMPLETION_INDEX", "0")],
    );
    assert!(ok && text.contains("shard 0/2: 3 of 5 chunks"), "{text}");
    let (ok, text) = run(shared.path(), &["--merge"], &[]);
    assert!(
        !ok && text.contains("2 of 5 chunks are not finished"),
        "{text}"
    );
    let (ok, text) = run(
        shared.path(),
        &["--shard", "SLURM_ARRAY_TASK_ID/2"],
        &[("SLURM_ARRAY_TASK_ID", "2"), ("SLURM_ARRAY_TASK_MIN", "1")],
    );
    assert!(ok && text.contains("shard 1/2: 2 of 5 chunks"), "{text}");
    let (ok, text) = run(shared.path(), &["--merge"], &[]);
    assert!(ok && text.contains("24 demonstrations"), "{text}");
    assert_eq!(
        fs::read(single.path().join("demos.jsonl")).unwrap(),
        fs::read(shared.path().join("demos.jsonl")).unwrap()
    );
    let (ok, text) = run(shared.path(), &["--shard", "JOB_COMPLETION_INDEX/2"], &[]);
    assert!(
        !ok && text.contains("JOB_COMPLETION_INDEX is not set"),
        "{text}"
    );
}

#[test]
fn solve_command_reports_errors_clearly() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tiny.toml");
    let (ok, _, stderr) = ilmodel(&["solve", "--system", fixture, "--scene", "1"]);
    assert!(!ok);
    assert!(
        stderr.contains("--scene has 1 values but the system has 2 classifiers (a, b)"),
        "{stderr}"
    );
    let (ok, _, stderr) = ilmodel(&[
        "solve",
        "--system",
        fixture,
        "--scene",
        "1,1",
        "--resident",
        "a@tpu",
    ]);
    assert!(!ok);
    assert!(stderr.contains("no processor named \"tpu\""), "{stderr}");
    let (ok, stdout, stderr) = ilmodel(&["solve", "--system", fixture, "--scene", "2,1"]);
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["status"], "optimal");
    assert!(v["t_ms"].as_f64().unwrap() > 0.0);
}

fn demo_with(system: &System, a_old: Vec<Vec<bool>>) -> Demo {
    Demo {
        index: 7,
        scene: vec![1; system.num_models()],
        rem_ms: vec![0.0; system.num_processors()],
        a_old,
        frames_per_epoch: 70.0,
        status: DemoStatus::Infeasible,
        t_ms: None,
        resident: None,
        batches: None,
    }
}

#[test]
fn a_demonstrations_input_flattens_a_old_and_names_it_when_misshapen() {
    let system = System::from_spec(&camdnn_policy::gen::board(1)).unwrap();
    let (nm, np) = (system.num_models(), system.num_processors());
    let rows: Vec<Vec<bool>> = (0..nm)
        .map(|i| (0..np).map(|j| (i + j) % 2 == 0).collect())
        .collect();
    let mut flat = vec![false; nm * np];
    let good = demo_with(&system, rows.clone());
    let input = good.input(&system, &mut flat).unwrap();
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(&input.residency[i * np..(i + 1) * np], &row[..]);
    }
    let mut short = rows;
    short[0].pop();
    let err = demo_with(&system, short)
        .input(&system, &mut flat)
        .unwrap_err();
    assert!(
        err.contains("demonstration 7") && err.contains("a_old"),
        "{err}"
    );
}
