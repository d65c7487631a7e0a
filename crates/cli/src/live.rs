//! The live view of long runs. When stderr is a terminal, one status area redrawn in place
//! (an `indicatif` bar: configuration, step, offered, achieved, p99, errors, time left), with
//! log lines printed above it; otherwise plain lines, as a CI log or a pipe wants them.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use loadlab_engine::SecondStats;
use loadlab_lab::{LabProgress, StepStart};

/// A bar on stderr, or `None` when stderr is not a terminal.
fn terminal_bar() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(4));
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:20.cyan/blue}] {pos:>3}/{len}s {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    Some(bar)
}

/// What a second achieved, for the bar or a plain line.
fn second_text(s: &SecondStats, rate: &str) -> String {
    let p99 = s.latency_p99_ms.map_or("-".into(), |v| {
        if v >= 100.0 {
            format!("{v:.0} ms")
        } else {
            format!("{v:.2} ms")
        }
    });
    format!(
        "achieved {} {rate} · {} errors · p99 {p99}",
        s.successful, s.errors
    )
}

/// Without a terminal, a plain progress line every this many measured seconds (a CI log
/// shows the run going, as k6 does).
const PLAIN_EVERY_S: u64 = 5;

/// One finished second of a window of `window_s` seconds (`None`: unknown, a run bounded by
/// a request count): on the bar (its position, at most the bar's length: a closed-loop run's
/// last, partial second does not read "4/3s"), or every [`PLAIN_EVERY_S`] seconds a plain
/// line on stderr when `plain` and there is no terminal. A second past the window holds
/// only the drain of what was still in flight (a few responses): shown, it would read as the
/// rate falling off at the end, so neither the bar nor a line shows it.
fn show_second(
    bar: Option<&ProgressBar>,
    plain: bool,
    window_s: Option<f64>,
    s: &SecondStats,
    rate: &str,
) {
    if window_s.is_some_and(|w| s.second as f64 >= w) {
        return;
    }
    match bar {
        Some(b) => {
            let len = b.length().filter(|&l| l > 0).unwrap_or(u64::MAX);
            b.set_position((s.second + 1).min(len));
            b.set_message(second_text(s, rate));
        }
        None => {
            if let Some(line) = plain_line(plain, s, rate) {
                eprintln!("{line}");
            }
        }
    }
}

/// The plain progress line for second `s`, if one is due (`plain`, every
/// [`PLAIN_EVERY_S`] seconds).
fn plain_line(plain: bool, s: &SecondStats, rate: &str) -> Option<String> {
    (plain && (s.second + 1).is_multiple_of(PLAIN_EVERY_S))
        .then(|| format!("loadlab: {}s · {}", s.second + 1, second_text(s, rate)))
}

fn short(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `loadlab run` and `loadlab grpc`: one bar over the measured seconds.
pub struct RunView {
    bar: Option<ProgressBar>,
    plain: bool,
    /// The measured window, seconds (`None`: bounded by a request count).
    window_s: Option<f64>,
    /// The rate's unit: `req/s`, `msg/s`, `events/s`.
    rate: &'static str,
}

impl RunView {
    /// A view of a run of `duration` (`None`: bounded by a request count) at `offered`
    /// (`None`: closed loop) of `rate` (`req/s`, `msg/s`); hidden when `quiet`.
    pub fn new(
        quiet: bool,
        duration: Option<Duration>,
        offered: Option<f64>,
        rate: &'static str,
    ) -> RunView {
        let bar = if quiet { None } else { terminal_bar() };
        if let Some(b) = &bar {
            b.set_length(duration.map_or(0, |d| d.as_secs().max(1)));
            b.set_prefix(match offered {
                Some(r) => format!("offered {r:.0} {rate}"),
                None => "closed loop".into(),
            });
            b.set_message("starting");
        }
        RunView {
            bar,
            plain: !quiet,
            window_s: duration.map(|d| d.as_secs_f64()),
            rate,
        }
    }

    /// One finished second.
    pub fn second(&self, s: &SecondStats) {
        show_second(self.bar.as_ref(), self.plain, self.window_s, s, self.rate);
    }
}

impl Drop for RunView {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// `loadlab lab` and `loadlab demo`: the step running, redrawn each second, with the lab's
/// log lines above it.
pub struct LabView {
    bar: Option<ProgressBar>,
    /// The running step's measured window, seconds.
    window_s: std::sync::Mutex<Option<f64>>,
    /// The running step's rate unit (`req/s`, `msg/s`, `events/s`).
    rate: std::sync::Mutex<&'static str>,
}

impl LabView {
    /// A view for a lab run; plain lines when stderr is not a terminal.
    pub fn new() -> Arc<LabView> {
        Arc::new(LabView {
            bar: terminal_bar(),
            window_s: std::sync::Mutex::new(None),
            rate: std::sync::Mutex::new("req/s"),
        })
    }

    /// Clears the status area (the run is over).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl LabProgress for LabView {
    fn line(&self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    fn step(&self, st: &StepStart) {
        *self.window_s.lock().unwrap_or_else(|e| e.into_inner()) = Some(st.duration_s);
        *self.rate.lock().unwrap_or_else(|e| e.into_inner()) = st.rate;
        if let Some(b) = &self.bar {
            b.set_length(st.duration_s.ceil().max(1.0) as u64);
            b.set_position(0);
            b.set_prefix(format!(
                "config {}/{} {} · {} at {:.0} {} · step {} of {}{}{}",
                st.config_number,
                st.configs,
                st.config,
                st.scenario,
                st.load,
                st.unit,
                st.number,
                if st.estimated { "~" } else { "" },
                st.planned,
                st.left_s
                    .map(|l| format!(" · ~{} left", short(l)))
                    .unwrap_or_default(),
            ));
            b.set_message("starting");
        }
    }

    fn second(&self, s: &SecondStats, _latency: &str) {
        // The lab prints a line per step already; its steps are short.
        let window = *self.window_s.lock().unwrap_or_else(|e| e.into_inner());
        let rate = *self.rate.lock().unwrap_or_else(|e| e.into_inner());
        show_second(self.bar.as_ref(), false, window, s, rate);
    }
}
