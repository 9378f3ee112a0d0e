//! Repeated log lines are written a few times per window with a count, so an
//! outage (every batch failing the same way, a flood of identical refusals)
//! cannot flood the journal. A line is identical to another when everything
//! but its timestamp is (level, message and fields). The first
//! [`WRITTEN_PER_WINDOW`] of a window are written (so a warning an operator
//! causes twice, say by two reloads, is seen twice); the rest are counted, and
//! the count is written as one line once the window is over (`... [repeated
//! N more times in the last 10 s]`).
//!
//! It sits under `tracing`'s formatter as its writer (`MakeWriter`): each
//! formatted event arrives as one line. The formatter writes no time; this
//! writer puts it in front, unless journald stamps the lines itself.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::MakeWriter;

/// How long identical lines are counted instead of written.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Identical lines written in one window before the rest are counted.
pub const WRITTEN_PER_WINDOW: u32 = 3;
/// Most distinct lines counted at once; past it a line is written without
/// being counted (memory stays bounded under any mix of lines).
const MAX_TRACKED: usize = 4096;

/// What happened to identical lines since the first of the window.
struct Seen {
    since: Instant,
    /// Written in this window (at most [`WRITTEN_PER_WINDOW`]).
    written: u32,
    /// Counted, not written, in this window.
    repeats: u64,
}

/// The writer `tracing`'s formatter writes through (see the module docs).
#[derive(Clone)]
pub struct Dedup {
    state: Arc<Mutex<HashMap<String, Seen>>>,
    window: Duration,
    timestamps: bool,
    out: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Dedup {
    /// Lines to `out`, identical ones counted for `window`; `timestamps`
    /// puts the time in front of each line.
    pub fn new(out: Box<dyn Write + Send>, window: Duration, timestamps: bool) -> Self {
        Self {
            state: Arc::new(Mutex::new(HashMap::new())),
            window,
            timestamps,
            out: Arc::new(Mutex::new(out)),
        }
    }

    /// Writes `line` (no newline) as given, or counts it, as of `now`.
    fn line(&self, line: &str, now: Instant) {
        let mut seen = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match seen.get_mut(line) {
            Some(s) if now.saturating_duration_since(s.since) < self.window => {
                if s.written >= WRITTEN_PER_WINDOW {
                    s.repeats += 1;
                    return;
                }
                s.written += 1;
                drop(seen);
            }
            Some(s) => {
                let repeats = std::mem::take(&mut s.repeats);
                s.since = now;
                s.written = 1;
                drop(seen);
                if repeats > 0 {
                    self.write(&self.summary(line, repeats));
                }
            }
            None => {
                if seen.len() < MAX_TRACKED {
                    seen.insert(
                        line.to_owned(),
                        Seen {
                            since: now,
                            written: 1,
                            repeats: 0,
                        },
                    );
                }
                drop(seen);
            }
        }
        self.write(line);
    }

    /// Writes the counts of windows that are over as of `now` and forgets
    /// lines not seen for a window (call about once per window).
    pub fn flush_counts(&self, now: Instant) {
        let mut due = Vec::new();
        {
            let mut seen = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            seen.retain(|line, s| {
                if now.saturating_duration_since(s.since) < self.window {
                    return true;
                }
                if s.repeats > 0 {
                    due.push(self.summary(line, s.repeats));
                }
                false
            });
        }
        for line in due {
            self.write(&line);
        }
    }

    fn summary(&self, line: &str, repeats: u64) -> String {
        format!(
            "{line} [repeated {repeats} more times in the last {} s]",
            self.window.as_secs()
        )
    }

    fn write(&self, line: &str) {
        let mut text = String::with_capacity(line.len() + 32);
        if self.timestamps {
            let _ = SystemTime.format_time(&mut Writer::new(&mut text));
            text.push(' ');
        }
        text.push_str(line);
        text.push('\n');
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// Flushes due counts every `window` on a thread of its own, for the
    /// life of the process.
    pub fn start_flusher(&self) {
        let this = self.clone();
        let _ = std::thread::Builder::new()
            .name("camdnn-log".into())
            .spawn(move || loop {
                std::thread::sleep(this.window);
                this.flush_counts(Instant::now());
            });
    }
}

/// One formatted event, handed to [`Dedup`] when the formatter is done.
pub struct Event<'a> {
    dedup: &'a Dedup,
    buf: Vec<u8>,
}

impl Write for Event<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Event<'_> {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.buf);
        let now = Instant::now();
        for line in text.lines().filter(|l| !l.is_empty()) {
            self.dedup.line(line.trim_start(), now);
        }
    }
}

impl<'a> MakeWriter<'a> for Dedup {
    type Writer = Event<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        Event {
            dedup: self,
            buf: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Dedup` writing into a shared buffer, without timestamps.
    fn dedup() -> (Dedup, Arc<Mutex<Vec<u8>>>) {
        #[derive(Clone)]
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Arc::new(Mutex::new(Vec::new()));
        let d = Dedup::new(Box::new(Shared(Arc::clone(&buf))), WINDOW, false);
        (d, buf)
    }

    fn text(buf: &Arc<Mutex<Vec<u8>>>) -> Vec<String> {
        String::from_utf8(buf.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn identical_lines_are_written_three_times_per_window_and_counted() {
        let (d, buf) = dedup();
        let t0 = Instant::now();
        for n in 0..244 {
            d.line(
                "ERROR batch failed model=m",
                t0 + Duration::from_millis(n * 50),
            );
            if n % 200 == 0 {
                d.line("INFO other", t0 + Duration::from_millis(n * 50));
            }
        }
        // 244 lines over 12.2 s: the first three, then at 10 s the next
        // one comes with the count of the 197 after the first three.
        let m = "ERROR batch failed model=m";
        assert_eq!(
            text(&buf),
            [
                m,
                "INFO other",
                m,
                m,
                "ERROR batch failed model=m [repeated 197 more times in the last 10 s]",
                m,
                "INFO other",
                m,
                m,
            ]
        );
        // The rest of that window is counted and written when it is over.
        d.flush_counts(t0 + Duration::from_secs(30));
        assert_eq!(
            text(&buf).last().unwrap(),
            "ERROR batch failed model=m [repeated 41 more times in the last 10 s]"
        );
        d.flush_counts(t0 + Duration::from_secs(60));
        assert_eq!(text(&buf).len(), 10, "nothing more to say");
    }

    #[test]
    fn distinct_lines_are_all_written() {
        let (d, buf) = dedup();
        let t0 = Instant::now();
        for n in 0..5 {
            d.line(&format!("INFO closing connection conn={n}"), t0);
        }
        assert_eq!(text(&buf).len(), 5);
    }
}
