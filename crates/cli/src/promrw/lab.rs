//! The seconds of `loadlab lab`, `tune` and `knee`: a [`LabProgress`] that pushes each
//! step's seconds, labelled by its scenario and configuration, and passes everything on
//! to the live view.

use std::sync::{Arc, Mutex};

use loadlab_engine::SecondStats;
use loadlab_lab::{LabProgress, StepStart};

use super::{Feed, Feeds, Labels, Offered};

/// Pushes a lab's seconds, then hands them to `inner` (the live view, if shown).
pub struct LabPush {
    inner: Option<Arc<dyn LabProgress>>,
    feeds: Feeds,
    /// The running step's feed (its seconds restart at 0).
    step: Mutex<Option<Feed>>,
}

impl LabPush {
    /// Pushes through `feeds`, showing through `inner`.
    pub fn new(feeds: Feeds, inner: Option<Arc<dyn LabProgress>>) -> LabPush {
        LabPush {
            inner,
            feeds,
            step: Mutex::new(None),
        }
    }
}

impl LabProgress for LabPush {
    fn line(&self, msg: &str) {
        if let Some(p) = &self.inner {
            p.line(msg);
        }
    }

    fn step(&self, st: &StepStart) {
        let labels = Labels::from([
            ("scenario", st.seconds_of.clone()),
            ("config", st.config.clone()),
        ]);
        let offered = if st.unit == "req/s" {
            Offered::Rate(st.load)
        } else {
            Offered::Concurrency(st.load)
        };
        *self.step.lock().expect("promrw step") = Some(self.feeds.feed(labels, Some(offered)));
        if let Some(p) = &self.inner {
            p.step(st);
        }
    }

    fn second(&self, s: &SecondStats, latency: &str) {
        if let Some(f) = self.step.lock().expect("promrw step").as_mut() {
            f.second(s, latency);
        }
        if let Some(p) = &self.inner {
            p.second(s, latency);
        }
    }
}
