//! The run's files: chunk paths, atomic writes, the ordered merge and the
//! checks that name what is wrong with a file.

use super::*;

/// Concatenates the chunks in order, checking every line; returns the
/// counts of infeasible and time-limited demonstrations.
pub(super) fn merge(
    config: &DemoConfig,
    dir: &Path,
    chunks: usize,
) -> Result<(u64, u64), DemoError> {
    let mut demos = Vec::new();
    let mut times = Vec::new();
    let (mut infeasible, mut time_limited) = (0, 0);
    for c in 0..chunks {
        let expected: Vec<u64> = chunk_range(config, c).collect();
        let path = chunk_path(dir, c);
        let lines = read_lines(&path)?;
        check_count(&path, lines.len(), expected.len())?;
        for (line, &want) in lines.iter().zip(&expected) {
            let d: Demo = serde_json::from_str(line).map_err(|e| corrupt(&path, e.to_string()))?;
            if d.index != want {
                return Err(corrupt(
                    &path,
                    format!("index {} where {want} was expected", d.index),
                ));
            }
            match d.status {
                DemoStatus::Infeasible => infeasible += 1,
                DemoStatus::TimeLimit => time_limited += 1,
                DemoStatus::Optimal => {}
            }
            demos.extend_from_slice(line.as_bytes());
            demos.push(b'\n');
        }
        let path = times_path(dir, c);
        let lines = read_lines(&path)?;
        check_count(&path, lines.len(), expected.len())?;
        for line in lines {
            let _: SolveTime =
                serde_json::from_str(&line).map_err(|e| corrupt(&path, e.to_string()))?;
            times.extend_from_slice(line.as_bytes());
            times.push(b'\n');
        }
    }
    write_atomic(&config.out.join("demos.jsonl"), &demos)?;
    write_atomic(&config.out.join("solve_times.jsonl"), &times)?;
    Ok((infeasible, time_limited))
}

pub(super) fn check_count(path: &Path, got: usize, want: usize) -> Result<(), DemoError> {
    if got == want {
        Ok(())
    } else {
        Err(corrupt(
            path,
            format!("{got} lines where {want} were expected; delete it to solve the chunk again"),
        ))
    }
}

pub(super) fn read_lines(path: &Path) -> Result<Vec<String>, DemoError> {
    let file = fs::File::open(path).map_err(|e| io(path, e))?;
    BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(|e| io(path, e))
}

pub(super) fn chunk_range(config: &DemoConfig, c: usize) -> std::ops::Range<u64> {
    let start = c as u64 * config.chunk_size;
    start..(start + config.chunk_size).min(config.samples)
}

/// The file of chunk `c`'s demonstrations.
pub fn chunk_path(dir: &Path, c: usize) -> PathBuf {
    dir.join(format!("chunk-{c:06}.jsonl"))
}

pub(super) fn times_path(dir: &Path, c: usize) -> PathBuf {
    dir.join(format!("chunk-{c:06}.times.jsonl"))
}

/// Writes `bytes` to a temporary file beside `path` and renames it. The
/// temporary name is this writer's own (clock, process id and a counter:
/// pods on different machines may share a process id), so shards writing
/// the same manifest into a shared folder never clash.
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DemoError> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tmp = path.with_extension(format!("tmp-{nanos}-{}-{n}", std::process::id()));
    let mut f = fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| io(&tmp, e))?;
    f.sync_all().map_err(|e| io(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io(path, e))
}

pub(super) fn io(path: &Path, source: std::io::Error) -> DemoError {
    DemoError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(super) fn corrupt(path: &Path, reason: String) -> DemoError {
    DemoError::Corrupt {
        path: path.to_path_buf(),
        reason,
    }
}

/// FNV-1a, 64 bits: a stable fingerprint of the system file.
pub(super) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
