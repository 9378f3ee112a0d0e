//! The fleet launchers in `deploy/` run `ilmodel demos` as they claim: the
//! Kubernetes Indexed Job's command, run once per completion index, and the
//! Slurm array script, run once per task, followed by their merge steps,
//! give the single-machine `demos.jsonl` byte for byte.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const TRIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/trio.toml");

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(file)
}

/// The single-machine dataset of the small test run.
fn single_run(out: &Path) -> Vec<u8> {
    let status = Command::new(env!("CARGO_BIN_EXE_ilmodel"))
        .args(["demos", "--system", TRIO, "--out", out.to_str().unwrap()])
        .args(["--seed", "1", "--samples", "24", "--max-objects", "4"])
        .args(["--rem-max-ms", "100", "--frames-per-epoch", "70"])
        .args(["--chunk-size", "3", "--quiet"])
        .status()
        .unwrap();
    assert!(status.success());
    fs::read(out.join("demos.jsonl")).unwrap()
}

/// The container `args` of a Job manifest (one YAML flow list of strings,
/// which is JSON).
fn job_args(file: &str) -> (String, Vec<String>) {
    let text = fs::read_to_string(deploy(file)).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("args: "))
        .unwrap_or_else(|| panic!("no args in {file}"));
    (text.clone(), serde_json::from_str(line).unwrap())
}

/// `args` with the profile, folder, size and chunk size of the test run.
fn for_test(args: &[String], out: &Path) -> Vec<String> {
    let mut args = args.to_vec();
    for (flag, value) in [
        ("--system", TRIO),
        ("--out", out.to_str().unwrap()),
        ("--samples", "24"),
        ("--max-objects", "4"),
        ("--chunk-size", "3"),
    ] {
        let at = args
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("the Job does not pass {flag}"));
        args[at + 1] = value.to_owned();
    }
    args
}

#[test]
fn kubernetes_indexed_job_shards_and_its_merge_job_give_the_single_file() {
    let single = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let want = single_run(single.path());
    let (text, args) = job_args("kubernetes/demos-job.yaml");
    let spec = args
        .iter()
        .find_map(|a| a.strip_prefix("JOB_COMPLETION_INDEX/"))
        .expect("--shard JOB_COMPLETION_INDEX/N");
    let n: u32 = spec.parse().unwrap();
    assert!(text.contains("completionMode: Indexed"));
    assert!(
        text.contains(&format!("completions: {n}\n")),
        "completions = N"
    );
    assert!(
        text.contains(&format!("parallelism: {n}\n")),
        "parallelism = N"
    );
    let run = |args: &[String], index: Option<u32>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ilmodel"));
        cmd.args(args).env_remove("JOB_COMPLETION_INDEX");
        if let Some(i) = index {
            cmd.env("JOB_COMPLETION_INDEX", i.to_string());
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let shard_args = for_test(&args, shared.path());
    for i in 0..n {
        run(&shard_args, Some(i));
    }
    let (_, merge) = job_args("kubernetes/demos-merge-job.yaml");
    let same: Vec<&String> = merge.iter().filter(|a| *a != "--merge").collect();
    let shard_base: Vec<&String> = args
        .iter()
        .filter(|a| *a != "--shard" && !a.starts_with("JOB_COMPLETION_INDEX/"))
        .collect();
    assert_eq!(same, shard_base, "the merge Job runs the shards' arguments");
    run(&for_test(&merge, shared.path()), None);
    assert_eq!(fs::read(shared.path().join("demos.jsonl")).unwrap(), want);
}

#[test]
fn slurm_array_tasks_and_the_merge_give_the_single_file() {
    let single = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let want = single_run(single.path());
    let run = |mode: &str, task: Option<u32>| {
        let mut cmd = Command::new("bash");
        cmd.arg(deploy("slurm/demos-array.sh"))
            .arg(mode)
            .env("ILMODEL", env!("CARGO_BIN_EXE_ilmodel"))
            .env("SYSTEM", TRIO)
            .env("SEED", "1")
            .env("SAMPLES", "24")
            .env("MAX_OBJECTS", "4")
            .env("CHUNK_SIZE", "3")
            .env("SHARDS", "3")
            .env("OUT", shared.path())
            // The array as `--array=1-3`.
            .env("SLURM_ARRAY_TASK_MIN", "1")
            .env_remove("SLURM_ARRAY_TASK_ID");
        if let Some(t) = task {
            cmd.env("SLURM_ARRAY_TASK_ID", t.to_string());
        }
        let out = cmd.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    for task in [1, 3] {
        let (ok, text) = run("shard", Some(task));
        assert!(ok, "{text}");
    }
    let (ok, text) = run("merge", None);
    assert!(
        !ok && text.contains("3 of 8 chunks are not finished"),
        "{text}"
    );
    let (ok, text) = run("shard", Some(2));
    assert!(ok && text.contains("shard 1/3"), "{text}");
    let (ok, text) = run("merge", None);
    assert!(ok, "{text}");
    assert_eq!(fs::read(shared.path().join("demos.jsonl")).unwrap(), want);
}
