//! `watch`'s flight recorder: what explains a stuck exit, kept while it is
//! there to see, for the late exit that CRI records minutes later.
//!
//! A zombie's looks see its shim's threads in `umount2` and the node's IO
//! pressure and dirty pages; by the time CRI records the exit (a
//! `late-exit`), all of that is gone, and a poll can say when, not why.
//! While a zombie is open `watch` looks again every [`SAMPLE_EVERY`], and
//! each look is one sample here; a late exit of the same container then
//! carries what was recorded (`evidence.recorded`, and `evidence.why`).
//!
//! Bounded: at most [`RING`] containers are kept (the oldest dropped
//! first), each a fixed handful of numbers (well under 1 KiB): 256 KiB at
//! most.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::model::{Finding, Kind, NodeContext};

/// How often a container that looks stuck is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// The most containers recorded at once.
pub const RING: usize = 256;
/// How long one container is sampled: a late exit seen so far came within
/// minutes; a zombie that stays (a lost exit) is not looked at every
/// [`SAMPLE_EVERY`] for ever.
pub const SAMPLED_FOR: Duration = Duration::from_secs(15 * 60);

/// What was seen of one stuck container.
#[derive(Debug, Clone, Serialize)]
pub struct Recording {
    pub container_id: String,
    /// The first and last look that saw it stuck (RFC 3339).
    pub first_seen: String,
    pub last_seen: String,
    pub samples: u32,
    pub shim_pid: Option<i64>,
    /// Looks that saw a shim thread in `umount2`, and the span between the
    /// first and the last of them: a lower bound on the time spent there.
    pub samples_in_umount2: u32,
    pub in_umount2_for_at_least_seconds: f64,
    /// The highest IO pressure (`/proc/pressure/io`, avg10, %) and dirty
    /// and write-back memory seen while it was stuck.
    pub io_pressure_full_avg10_max: Option<f32>,
    pub io_pressure_some_avg10_max: Option<f32>,
    pub dirty_bytes_max: Option<u64>,
    pub writeback_bytes_max: Option<u64>,
    #[serde(skip)]
    first: Option<Instant>,
    #[serde(skip)]
    umount2_first: Option<Instant>,
    #[serde(skip)]
    umount2_last: Option<Instant>,
}

#[derive(Debug, Default)]
pub struct Recorder {
    ring: VecDeque<Recording>,
}

fn max<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b > a { b } else { a }),
        (a, b) => a.or(b),
    }
}

impl Recorder {
    /// One look's sample of `zombie` (its evidence) and the node's
    /// `context`, taken at `now` (`wall`: the same instant, as text).
    pub fn sample(
        &mut self,
        zombie: &Finding,
        context: Option<&NodeContext>,
        now: Instant,
        wall: &str,
    ) {
        let position = self.ring.iter().position(|r| r.container_id == zombie.id);
        let mut recording = match position.and_then(|at| self.ring.remove(at)) {
            Some(recording) => recording,
            None => Recording {
                container_id: zombie.id.clone(),
                first_seen: wall.to_string(),
                last_seen: wall.to_string(),
                samples: 0,
                shim_pid: None,
                samples_in_umount2: 0,
                in_umount2_for_at_least_seconds: 0.0,
                io_pressure_full_avg10_max: None,
                io_pressure_some_avg10_max: None,
                dirty_bytes_max: None,
                writeback_bytes_max: None,
                first: Some(now),
                umount2_first: None,
                umount2_last: None,
            },
        };
        recording.samples += 1;
        recording.last_seen = wall.to_string();
        let evidence = &zombie.evidence;
        recording.shim_pid = evidence["shim_pid"].as_i64().or(recording.shim_pid);
        if evidence["shim_in_umount2"] == Value::Bool(true) {
            recording.samples_in_umount2 += 1;
            let first = *recording.umount2_first.get_or_insert(now);
            recording.umount2_last = Some(now);
            recording.in_umount2_for_at_least_seconds =
                (now.duration_since(first).as_secs_f64() * 10.0).round() / 10.0;
        }
        if let Some(node) = context {
            recording.io_pressure_full_avg10_max = max(
                recording.io_pressure_full_avg10_max,
                node.io_pressure_full_avg10,
            );
            recording.io_pressure_some_avg10_max = max(
                recording.io_pressure_some_avg10_max,
                node.io_pressure_some_avg10,
            );
            recording.dirty_bytes_max = max(recording.dirty_bytes_max, node.dirty_bytes);
            recording.writeback_bytes_max =
                max(recording.writeback_bytes_max, node.writeback_bytes);
        }
        self.ring.push_back(recording);
        while self.ring.len() > RING {
            self.ring.pop_front();
        }
    }

    /// Whether `container_id` is still worth a look every [`SAMPLE_EVERY`]:
    /// not recorded yet, or for less than [`SAMPLED_FOR`].
    pub fn wants_samples(&self, container_id: &str, now: Instant) -> bool {
        self.ring
            .iter()
            .find(|r| r.container_id == container_id)
            .and_then(|r| r.first)
            .is_none_or(|first| now.duration_since(first) < SAMPLED_FOR)
    }

    /// `finding` with what was recorded of its container, when it is a late
    /// exit something was recorded for.
    pub fn annotated(&self, finding: &Finding) -> Finding {
        let mut finding = finding.clone();
        if finding.kind != Kind::LateExit {
            return finding;
        }
        let Some(recording) = self.ring.iter().find(|r| r.container_id == finding.id) else {
            return finding;
        };
        if let Value::Object(evidence) = &mut finding.evidence {
            evidence.insert("why".into(), Value::from(why(recording)));
            evidence.insert(
                "recorded".into(),
                serde_json::to_value(recording).unwrap_or(Value::Null),
            );
        }
        finding
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }
}

/// "shim 4123 was in umount2 for at least 38 s while IO full was 41 %".
fn why(recording: &Recording) -> String {
    let shim = recording
        .shim_pid
        .map_or_else(|| "its shim".to_string(), |pid| format!("shim {pid}"));
    let mut text = if recording.samples_in_umount2 > 0 {
        format!(
            "while the exit was stuck, {shim} was in umount2 for at least {:.0} s",
            recording.in_umount2_for_at_least_seconds
        )
    } else {
        format!("while the exit was stuck, no thread of {shim} was seen in umount2")
    };
    if let Some(full) = recording.io_pressure_full_avg10_max {
        text.push_str(&format!(", IO pressure full up to {full:.0} %"));
    }
    if let Some(dirty) = recording.dirty_bytes_max {
        text.push_str(&format!(", dirty pages up to {} MiB", dirty >> 20));
    }
    text.push_str(&format!(
        " ({} looks from {} to {})",
        recording.samples, recording.first_seen, recording.last_seen
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Severity;
    use serde_json::json;

    fn finding(kind: Kind, id: &str, evidence: Value) -> Finding {
        Finding {
            kind,
            severity: Severity::Critical,
            id: id.to_string(),
            summary: String::new(),
            evidence,
            cause: String::new(),
            remedy: String::new(),
        }
    }

    #[test]
    fn a_late_exit_carries_what_was_recorded_while_it_was_stuck() {
        let mut recorder = Recorder::default();
        let zombie = finding(
            Kind::Zombie,
            "c1",
            json!({"shim_pid": 4123, "shim_in_umount2": true}),
        );
        let start = Instant::now();
        let context = |full: f32| NodeContext {
            io_pressure_full_avg10: Some(full),
            dirty_bytes: Some(64 << 20),
            ..NodeContext::default()
        };
        recorder.sample(&zombie, Some(&context(12.0)), start, "t0");
        recorder.sample(
            &zombie,
            Some(&context(41.0)),
            start + Duration::from_secs(38),
            "t1",
        );
        let late = finding(Kind::LateExit, "c1", json!({"lag_seconds": 45.0}));
        let told = recorder.annotated(&late);
        let recorded = &told.evidence["recorded"];
        assert_eq!(recorded["samples_in_umount2"], 2);
        assert_eq!(recorded["in_umount2_for_at_least_seconds"], 38.0);
        assert_eq!(recorded["io_pressure_full_avg10_max"], 41.0);
        assert_eq!(
            told.evidence["lag_seconds"], 45.0,
            "the check's own evidence kept"
        );
        let why = told.evidence["why"].as_str().unwrap();
        assert!(
            why.contains("shim 4123 was in umount2 for at least 38 s")
                && why.contains("IO pressure full up to 41 %")
                && why.contains("dirty pages up to 64 MiB"),
            "{why}"
        );
        // Another container's late exit, or another kind: as it was.
        let other = finding(Kind::LateExit, "c2", json!({}));
        assert_eq!(recorder.annotated(&other), other);
    }

    #[test]
    fn the_ring_keeps_the_newest_containers() {
        let mut recorder = Recorder::default();
        let now = Instant::now();
        for n in 0..RING + 10 {
            let zombie = finding(Kind::Zombie, &format!("c{n}"), json!({}));
            recorder.sample(&zombie, None, now, "t");
        }
        assert_eq!(recorder.len(), RING);
        let oldest = finding(Kind::LateExit, "c0", json!({}));
        assert!(recorder
            .annotated(&oldest)
            .evidence
            .get("recorded")
            .is_none());
        let newest = finding(Kind::LateExit, &format!("c{}", RING + 9), json!({}));
        assert!(recorder
            .annotated(&newest)
            .evidence
            .get("recorded")
            .is_some());
    }

    #[test]
    fn a_container_is_sampled_for_a_while_not_for_ever() {
        let mut recorder = Recorder::default();
        let now = Instant::now();
        assert!(recorder.wants_samples("c1", now));
        recorder.sample(&finding(Kind::Zombie, "c1", json!({})), None, now, "t");
        assert!(recorder.wants_samples("c1", now + SAMPLE_EVERY));
        assert!(!recorder.wants_samples("c1", now + SAMPLED_FOR));
    }
}
