//! Progress of long work: instrumenting a library takes minutes per code
//! object, so a run says how far it is (code objects and points done, the
//! rate, the time left) as it goes: a bar on a terminal (indicatif), plain
//! lines every so often otherwise (a log, CI), nothing in a library caller
//! that did not ask (the runtime's dynamic mode, tests).
//!
//! The estimate: each code object's share of the work is its size (a
//! library's code objects differ a hundredfold, and the time goes with the
//! code: rocSPARSE's largest came last and a count of code objects said "36 s
//! left" for ten minutes); the share done of one in progress is its stage's,
//! with the payload stage (most of the time) split by the compile batches
//! (llc runs) done.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Display {
    /// A bar redrawn in place (on a terminal).
    Bar,
    /// A line to standard error every `every`, the first after `every`
    /// (short runs print none).
    Lines { every: Duration },
}

/// A handle to a run's progress; clones share it. The default shows
/// nothing and costs nothing.
#[derive(Clone, Default)]
pub struct Progress {
    inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.inner.is_some() { "Progress(shown)" } else { "Progress(silent)" })
    }
}

/// A code object under way: the share of its work done (0..=1), and the
/// stage it is in, which spans `stage_span` of the work.
struct Active {
    id: usize,
    /// Its size in bytes (its weight in the estimate).
    bytes: u64,
    share: f64,
    stage: &'static str,
    stage_span: (f64, f64),
}

struct Inner {
    started: Instant,
    code_objects: AtomicUsize,
    code_objects_done: AtomicUsize,
    /// The code objects' sizes, all and done (0 for all: not known, each
    /// code object counts the same).
    bytes: AtomicU64,
    bytes_done: AtomicU64,
    points_selected: AtomicUsize,
    points_done: AtomicUsize,
    /// Code objects under way.
    active: Mutex<Vec<Active>>,
    next_id: AtomicUsize,
    shown: Shown,
}

enum Shown {
    Bar(indicatif::ProgressBar),
    /// Dropping the sender stops the printing thread.
    Lines {
        stop: Mutex<Option<std::sync::mpsc::Sender<()>>>,
    },
}

/// Per mille: the bar's length.
const SCALE: u64 = 1000;

impl Progress {
    /// Progress shown as `display` says, for work over `code_objects` code
    /// objects (more can be added with [`Progress::add_code_objects`]).
    pub fn shown(display: Display, code_objects: usize) -> Progress {
        let shown = match display {
            Display::Bar => {
                let bar = indicatif::ProgressBar::new(SCALE);
                bar.set_style(
                    indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {msg}")
                        .expect("a valid template"),
                );
                bar.enable_steady_tick(Duration::from_millis(200));
                Shown::Bar(bar)
            }
            Display::Lines { .. } => Shown::Lines { stop: Mutex::new(None) },
        };
        let inner = Arc::new(Inner {
            started: Instant::now(),
            code_objects: AtomicUsize::new(code_objects),
            code_objects_done: AtomicUsize::new(0),
            bytes: AtomicU64::new(0),
            bytes_done: AtomicU64::new(0),
            points_selected: AtomicUsize::new(0),
            points_done: AtomicUsize::new(0),
            active: Mutex::new(Vec::new()),
            next_id: AtomicUsize::new(0),
            shown,
        });
        if let (Display::Lines { every }, Shown::Lines { stop }) = (display, &inner.shown) {
            let (sender, receiver) = std::sync::mpsc::channel::<()>();
            *stop.lock().expect("progress") = Some(sender);
            // The thread holds only a weak handle: the run's end drops the
            // sender, which ends it.
            let weak = Arc::downgrade(&inner);
            std::thread::spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = receiver.recv_timeout(every) {
                    let Some(inner) = weak.upgrade() else { break };
                    eprintln!("progress: {}", inner.line());
                }
            });
        }
        Progress { inner: Some(inner) }
    }

    /// What suits standard error: a bar on a terminal, else a line every
    /// 30 seconds.
    pub fn for_stderr(code_objects: usize) -> Progress {
        use std::io::IsTerminal;
        let display = if std::io::stderr().is_terminal() {
            Display::Bar
        } else {
            Display::Lines { every: Duration::from_secs(30) }
        };
        Progress::shown(display, code_objects)
    }

    pub fn is_shown(&self) -> bool {
        self.inner.is_some()
    }

    /// The code objects the run covers, once they are known: how many and
    /// their sizes in bytes, summed.
    pub fn set_code_objects(&self, count: usize, bytes: u64) {
        if let Some(inner) = &self.inner {
            inner.code_objects.store(count, Ordering::Relaxed);
            inner.bytes.store(bytes, Ordering::Relaxed);
            inner.redraw();
        }
    }

    /// The work on one code object of `bytes` bytes begins.
    pub fn code_object(&self, bytes: u64) -> CodeObjectProgress {
        let Some(inner) = &self.inner else { return CodeObjectProgress::default() };
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let active = Active { id, bytes, share: 0.0, stage: "", stage_span: (0.0, 0.0) };
        inner.active.lock().expect("progress").push(active);
        inner.redraw();
        let entry = Entry { inner: inner.clone(), id, bytes, points: AtomicUsize::new(0) };
        CodeObjectProgress { entry: Some(Arc::new(entry)) }
    }

    /// The run is over: the bar is cleared, the line printer stops.
    pub fn finish(&self) {
        if let Some(inner) = &self.inner {
            match &inner.shown {
                Shown::Bar(bar) => bar.finish_and_clear(),
                Shown::Lines { stop } => drop(stop.lock().expect("progress").take()),
            }
        }
    }

    /// The text a line or the bar shows now.
    pub fn line(&self) -> Option<String> {
        self.inner.as_ref().map(|inner| inner.line())
    }
}

/// One code object's progress (clones share it); when the last clone is
/// dropped (done or failed) the code object counts as done.
#[derive(Clone, Default)]
pub struct CodeObjectProgress {
    entry: Option<Arc<Entry>>,
}

impl std::fmt::Debug for CodeObjectProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CodeObjectProgress")
    }
}

struct Entry {
    inner: Arc<Inner>,
    id: usize,
    bytes: u64,
    points: AtomicUsize,
}

impl CodeObjectProgress {
    /// The points selected in it.
    pub fn selected(&self, points: usize) {
        if let Some(entry) = &self.entry {
            entry.inner.points_selected.fetch_add(points, Ordering::Relaxed);
            entry.points.fetch_add(points, Ordering::Relaxed);
        }
    }

    /// It entered a stage, which spans `span` (from, to) of its work.
    pub fn stage(&self, name: &'static str, span: (f64, f64)) {
        self.update(|active| {
            active.share = span.0;
            active.stage = name;
            active.stage_span = span;
        });
    }

    /// Within the stage, a part spanning `part` (from, to, as shares of the
    /// stage) has `done` of its `total` batches done.
    pub fn batches(&self, part: (f64, f64), done: usize, total: usize) {
        let fraction = if total == 0 { 1.0 } else { done as f64 / total as f64 };
        self.update(|active| {
            let (from, to) = active.stage_span;
            let within = part.0 + (part.1 - part.0) * fraction;
            active.share = active.share.max(from + (to - from) * within);
        });
    }

    fn update(&self, change: impl FnOnce(&mut Active)) {
        let Some(entry) = &self.entry else { return };
        if let Some(active) = entry.inner.active.lock().expect("progress").iter_mut().find(|a| a.id == entry.id) {
            change(active);
        }
        entry.inner.redraw();
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.inner.active.lock().expect("progress").retain(|a| a.id != self.id);
        self.inner.code_objects_done.fetch_add(1, Ordering::Relaxed);
        self.inner.bytes_done.fetch_add(self.bytes, Ordering::Relaxed);
        self.inner.points_done.fetch_add(self.points.load(Ordering::Relaxed), Ordering::Relaxed);
        self.inner.redraw();
    }
}

impl Inner {
    /// The share of the run done, in 0..=1.
    fn fraction(&self) -> f64 {
        let bytes = self.bytes.load(Ordering::Relaxed);
        let active = self.active.lock().expect("progress");
        if bytes == 0 {
            let total = self.code_objects.load(Ordering::Relaxed).max(1) as f64;
            let active: f64 = active.iter().map(|a| a.share).sum();
            return ((self.code_objects_done.load(Ordering::Relaxed) as f64 + active) / total).min(1.0);
        }
        let active: f64 = active.iter().map(|a| a.share * a.bytes as f64).sum();
        ((self.bytes_done.load(Ordering::Relaxed) as f64 + active) / bytes as f64).min(1.0)
    }

    fn line(&self) -> String {
        let elapsed = self.started.elapsed().as_secs_f64();
        let fraction = self.fraction();
        let done = self.code_objects_done.load(Ordering::Relaxed);
        let total = self.code_objects.load(Ordering::Relaxed);
        let points_done = self.points_done.load(Ordering::Relaxed);
        let selected = self.points_selected.load(Ordering::Relaxed);
        let stages: Vec<&str> = self.active.lock().expect("progress").iter().map(|a| a.stage).collect();
        // Points are counted as code objects begin (selected) and end (done).
        let mut text = format!("{done}/{total} code objects, {points_done}/{selected} points");
        if elapsed > 0.0 && points_done > 0 {
            text.push_str(&format!(", {:.0} points/s", points_done as f64 / elapsed));
        }
        if !stages.is_empty() {
            text.push_str(&format!(", now: {}", stages.join(", ")));
        }
        // After a few seconds the share done says something about the rest.
        if fraction > 0.0 && elapsed > 5.0 {
            let left = elapsed * (1.0 - fraction) / fraction;
            text.push_str(&format!(", about {} left", human_duration(left)));
        }
        text
    }

    fn redraw(&self) {
        if let Shown::Bar(bar) = &self.shown {
            bar.set_position((self.fraction() * SCALE as f64) as u64);
            bar.set_message(self.line());
        }
    }
}

/// `42 s`, `3 min 5 s`, `1 h 12 min`.
pub fn human_duration(seconds: f64) -> String {
    let seconds = seconds.max(0.0).round() as u64;
    match seconds {
        0..=59 => format!("{seconds} s"),
        60..=3599 => format!("{} min {} s", seconds / 60, seconds % 60),
        _ => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_progress_reports_nothing() {
        let progress = Progress::default();
        let one = progress.code_object(1000);
        one.selected(10);
        one.stage("payloads", (0.1, 0.9));
        assert!(progress.line().is_none());
    }

    #[test]
    fn the_line_counts_code_objects_points_and_the_stage_under_way() {
        let progress = Progress::shown(Display::Lines { every: Duration::from_secs(3600) }, 3);
        let first = progress.code_object(100);
        first.selected(100);
        drop(first);
        let second = progress.code_object(100);
        second.selected(50);
        second.stage("payloads", (0.0, 1.0));
        second.batches((0.0, 1.0), 1, 2);
        let line = progress.line().unwrap();
        assert!(line.starts_with("1/3 code objects, 100/150 points"), "{line}");
        assert!(line.contains("now: payloads"), "{line}");
        // Sizes unknown: one done and half of the second, half of the run.
        let fraction = progress.inner.as_ref().unwrap().fraction();
        assert!((fraction - 1.5 / 3.0).abs() < 1e-9, "{fraction}");
        progress.finish();
    }

    #[test]
    fn the_estimate_weighs_code_objects_by_their_size() {
        let progress = Progress::shown(Display::Lines { every: Duration::from_secs(3600) }, 0);
        // Two small code objects and a large one: the small ones done are
        // a tenth of the work, not two thirds.
        progress.set_code_objects(3, 1000);
        drop(progress.code_object(50));
        drop(progress.code_object(50));
        let large = progress.code_object(900);
        large.stage("payloads", (0.0, 1.0));
        large.batches((0.0, 1.0), 1, 2);
        let fraction = progress.inner.as_ref().unwrap().fraction();
        assert!((fraction - (100.0 + 450.0) / 1000.0).abs() < 1e-9, "{fraction}");
        assert!(progress.line().unwrap().starts_with("2/3 code objects"));
        progress.finish();
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human_duration(42.4), "42 s");
        assert_eq!(human_duration(185.0), "3 min 5 s");
        assert_eq!(human_duration(4320.0), "1 h 12 min");
    }
}
