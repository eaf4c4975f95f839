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
//! first), each a [`Recording`] of bounded strings and lists: a full ring
//! serialises to at most [`RING_FILE_BYTES_MAX`] bytes (385 KiB), the
//! file `watch` writes it to (see `recorder_file`) included.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::model::recording::{bounded_name, ID_CAP, RING};
pub use crate::model::recording::{Recording, RING_FILE_BYTES_MAX};
use crate::model::{Finding, Kind, NodeContext, Observation};

/// How often a container that looks stuck is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// How long one container is sampled: a late exit seen so far came within
/// minutes; a zombie that stays (a lost exit) is not looked at every
/// [`SAMPLE_EVERY`] for ever.
pub const SAMPLED_FOR: Duration = Duration::from_secs(15 * 60);

/// A recording and the instants its spans are measured from.
#[derive(Debug, Clone)]
struct Entry {
    recording: Recording,
    first: Instant,
    umount2_first: Option<Instant>,
    d_first: Option<Instant>,
}

#[derive(Debug, Default)]
pub struct Recorder {
    ring: VecDeque<Entry>,
    /// Bumped on every sample: whether the ring changed since it was last
    /// written out.
    generation: u64,
}

fn max<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b > a { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// Seconds from `first` to `now`, to a tenth.
fn span(first: Instant, now: Instant) -> f64 {
    (now.duration_since(first).as_secs_f64() * 10.0).round() / 10.0
}

impl Recorder {
    /// One look's or sample's observation of a stuck container (`seen`)
    /// and the node's `context`, taken at `now` (`wall`: the same instant,
    /// as text).
    pub fn sample(
        &mut self,
        seen: &Observation,
        context: Option<&NodeContext>,
        now: Instant,
        wall: &str,
    ) {
        self.generation += 1;
        let id = bounded_name(&seen.container_id, ID_CAP);
        let position = self
            .ring
            .iter()
            .position(|e| e.recording.container_id == id);
        let mut entry = match position.and_then(|at| self.ring.remove(at)) {
            Some(entry) => entry,
            None => Entry {
                recording: Recording {
                    container_id: id,
                    first_seen: wall.to_string(),
                    ..Recording::default()
                }
                .bounded(),
                first: now,
                umount2_first: None,
                d_first: None,
            },
        };
        let recording = &mut entry.recording;
        recording.samples = recording.samples.saturating_add(1);
        recording.last_seen = wall.to_string();
        recording.shim_pid = seen.shim_pid.or(recording.shim_pid);
        if seen.in_umount2 {
            recording.samples_in_umount2 = recording.samples_in_umount2.saturating_add(1);
            let first = *entry.umount2_first.get_or_insert(now);
            recording.in_umount2_for_at_least_seconds = span(first, now);
        }
        let mut in_d = false;
        for thread in &seen.blocked {
            if let Some(letter) = thread.state.filter(char::is_ascii_alphabetic) {
                in_d |= letter == 'D';
                if !recording.states_seen.contains(letter) {
                    recording.states_seen.push(letter);
                }
            }
            if let Some(name) = &thread.syscall {
                Recording::note_name(&mut recording.syscalls_seen, name);
            }
            if let Some(name) = &thread.wchan {
                Recording::note_name(&mut recording.wchans_seen, name);
            }
        }
        if in_d {
            recording.samples_in_d = recording.samples_in_d.saturating_add(1);
            let first = *entry.d_first.get_or_insert(now);
            recording.in_d_for_at_least_seconds = span(first, now);
        }
        match seen.rootfs_mounted {
            Some(true) => {
                recording.samples_rootfs_mounted =
                    recording.samples_rootfs_mounted.saturating_add(1)
            }
            Some(false) => {
                recording.samples_rootfs_unmounted =
                    recording.samples_rootfs_unmounted.saturating_add(1)
            }
            None => {}
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
        entry.recording = entry.recording.bounded();
        self.ring.push_back(entry);
        while self.ring.len() > RING {
            self.ring.pop_front();
        }
    }

    /// Whether `container_id` is still worth a look every [`SAMPLE_EVERY`]:
    /// not recorded yet, or for less than [`SAMPLED_FOR`].
    pub fn wants_samples(&self, container_id: &str, now: Instant) -> bool {
        self.find(container_id)
            .is_none_or(|e| now.duration_since(e.first) < SAMPLED_FOR)
    }

    fn find(&self, container_id: &str) -> Option<&Entry> {
        let id = bounded_name(container_id, ID_CAP);
        self.ring.iter().find(|e| e.recording.container_id == id)
    }

    /// `finding` with what was recorded of its container, when it is a late
    /// exit something was recorded for.
    pub fn annotated(&self, finding: &Finding) -> Finding {
        let mut finding = finding.clone();
        if finding.kind != Kind::LateExit {
            return finding;
        }
        let Some(entry) = self.find(&finding.id) else {
            return finding;
        };
        if let Value::Object(evidence) = &mut finding.evidence {
            evidence.insert("why".into(), Value::from(why(&entry.recording)));
            evidence.insert(
                "recorded".into(),
                serde_json::to_value(&entry.recording).unwrap_or(Value::Null),
            );
        }
        finding
    }

    /// What is recorded, oldest first.
    pub fn recordings(&self) -> Vec<Recording> {
        self.ring.iter().map(|e| e.recording.clone()).collect()
    }

    /// Changes with every sample: what was written out is stale once this
    /// differs from its generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }
}

/// "shim 4123 was in umount2 for at least 38 s, in D for at least 38 s
/// (wchan …), its rootfs mounted in 8 of 8 samples, IO pressure full up to
/// 41 %": every part bounded, as the recording is.
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
    if recording.samples_in_d > 0 {
        let mut place = Vec::new();
        let others: Vec<&str> = recording
            .syscalls_seen
            .iter()
            .map(String::as_str)
            .filter(|name| *name != "umount2")
            .collect();
        if !others.is_empty() {
            place.push(format!("in {}", others.join(", ")));
        }
        if !recording.wchans_seen.is_empty() {
            place.push(format!("wchan {}", recording.wchans_seen.join(", ")));
        }
        let place = if place.is_empty() {
            String::new()
        } else {
            format!(" ({})", place.join("; "))
        };
        text.push_str(&format!(
            ", a thread of it in D for at least {:.0} s{place}",
            recording.in_d_for_at_least_seconds
        ));
    }
    let (mounted, unmounted) = (
        recording.samples_rootfs_mounted,
        recording.samples_rootfs_unmounted,
    );
    if mounted > 0 || unmounted > 0 {
        text.push_str(&format!(
            ", its rootfs mounted in {mounted} of {} samples",
            mounted.saturating_add(unmounted)
        ));
    }
    if let Some(full) = recording.io_pressure_full_avg10_max {
        text.push_str(&format!(", IO pressure full up to {full:.0} %"));
    }
    if let Some(dirty) = recording.dirty_bytes_max {
        text.push_str(&format!(", dirty pages up to {} MiB", dirty >> 20));
    }
    text.push_str(&format!(
        " ({} samples from {} to {})",
        recording.samples, recording.first_seen, recording.last_seen
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::recording::RECORDING_BYTES_MAX;
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

    /// What a look's zombie finding tells the recorder.
    fn seen(zombie: &Finding) -> Observation {
        Observation::of_zombie(&zombie.id, &zombie.evidence)
    }

    #[test]
    fn a_late_exit_carries_what_was_recorded_while_it_was_stuck() {
        let mut recorder = Recorder::default();
        let blocked = json!([
            {"tid": 4130, "state": "D", "syscall": "umount2", "wchan": "rwsem_down_write_slowpath"},
            {"tid": 4131, "state": "D", "syscall": "syncfs", "wchan": "wb_wait_for_completion"},
        ]);
        let zombie = finding(
            Kind::Zombie,
            "c1",
            json!({"shim_pid": 4123, "shim_in_umount2": true,
                   "shim_threads_blocked": blocked, "rootfs_mounted": true}),
        );
        let start = Instant::now();
        let context = |full: f32| NodeContext {
            io_pressure_full_avg10: Some(full),
            dirty_bytes: Some(64 << 20),
            ..NodeContext::default()
        };
        recorder.sample(&seen(&zombie), Some(&context(12.0)), start, "t0");
        recorder.sample(
            &seen(&zombie),
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
        assert_eq!(recorded["samples_in_d"], 2);
        assert_eq!(recorded["in_d_for_at_least_seconds"], 38.0);
        assert_eq!(recorded["states_seen"], "D");
        assert_eq!(recorded["syscalls_seen"], json!(["umount2", "syncfs"]));
        assert_eq!(
            recorded["wchans_seen"],
            json!(["rwsem_down_write_slowpath", "wb_wait_for_completion"])
        );
        assert_eq!(recorded["samples_rootfs_mounted"], 2);
        assert_eq!(recorded["samples_rootfs_unmounted"], 0);
        assert_eq!(
            told.evidence["lag_seconds"], 45.0,
            "the check's own evidence kept"
        );
        let why = told.evidence["why"].as_str().unwrap();
        assert!(
            why.contains(
                "shim 4123 was in umount2 for at least 38 s, a thread of it in D for at least \
                 38 s (in syncfs; wchan rwsem_down_write_slowpath, wb_wait_for_completion), its \
                 rootfs mounted in 2 of 2 samples"
            ) && why.contains("IO pressure full up to 41 %")
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
            recorder.sample(&seen(&zombie), None, now, "t");
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
        recorder.sample(
            &seen(&finding(Kind::Zombie, "c1", json!({}))),
            None,
            now,
            "t",
        );
        assert!(recorder.wants_samples("c1", now + SAMPLE_EVERY));
        assert!(!recorder.wants_samples("c1", now + SAMPLED_FOR));
    }

    #[test]
    fn what_is_kept_stays_bounded_whatever_the_node_says() {
        let mut recorder = Recorder::default();
        let now = Instant::now();
        let huge = "\u{1b}[2J".repeat(10_000);
        for n in 0..RING + 5 {
            let threads: Vec<Value> = (0..50)
                .map(|t| json!({"tid": t, "state": ((b'A' + t) as char).to_string(), "syscall": format!("{huge}{t}"), "wchan": format!("{t}{huge}")}))
                .collect();
            let evidence = json!({"shim_pid": n, "shim_threads_blocked": threads});
            let zombie = finding(Kind::Zombie, &format!("{n}{huge}"), evidence);
            for look in 0..3 {
                recorder.sample(&seen(&zombie), None, now, &format!("{look}{huge}"));
            }
        }
        assert_eq!(recorder.len(), RING);
        // The ring itself, as held, not only the file it is written to.
        let recordings = recorder.recordings();
        for recording in &recordings {
            let bytes = serde_json::to_vec(recording).unwrap().len();
            assert!(bytes <= RECORDING_BYTES_MAX, "{bytes} bytes");
        }
        let file = crate::model::RecorderFile::new("v", "t", recordings.clone());
        let bytes = serde_json::to_vec(&file).unwrap();
        assert!(bytes.len() <= RING_FILE_BYTES_MAX, "{} bytes", bytes.len());
        let newest = &recordings[RING - 1];
        assert_eq!(newest.wchans_seen.len(), 4);
        assert!(newest
            .wchans_seen
            .iter()
            .all(|w| w.len() <= 64 && !w.contains('\u{1b}')));
        assert_eq!(newest.states_seen, "ABCDEFGH");
        // Its late exit is still found by its (cut) id.
        let late = finding(Kind::LateExit, &format!("{}{huge}", RING + 4), json!({}));
        assert!(recorder.annotated(&late).evidence.get("why").is_some());
    }
}
