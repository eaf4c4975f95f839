//! What `watch` (and `serve`, event-driven) decide from what they hear and
//! see, without doing any of it: when to look at the node again after an
//! event, and which findings of a look are new, still open or cleared.
//!
//! An event is a hint of where and when to look, never evidence: every
//! finding comes from a full look ([`crate::commands::check`]) with its own
//! proof of the daemon. The delays follow what containerd does after each
//! event:
//! - an init process's exit: CRI's exit handler runs `task.Delete` and
//!   gives up after 10 s (`handleEventTimeout`); if it did, the container
//!   stays RUNNING with its process gone (a zombie). Looked at once that
//!   deadline passed; a zombie seen before it is the handler still at work,
//!   and is held back until then.
//! - a task's delete (a sandbox's ends with its shim's Shutdown), a
//!   container's or a snapshot's removal: looked at shortly after, and
//!   again once a slow delete would have given up.
//!
//! Looks are paced by what they cost: on a node whose pods churn, events
//! arrive faster than looks end, and each look reads the whole node. After
//! a look that took `c` of CPU, the next one an event calls for waits until
//! `c × LOOK_SHARE` has passed, so event-driven looks use at most
//! 1/[`LOOK_SHARE`] of one core however fast events come; looks due
//! meanwhile are taken together by the next one. The flight recorder's
//! samples of an open zombie are not paced: one every [`SAMPLE_EVERY`]
//! while one is open (for at most `SAMPLED_FOR` a container). A node slow
//! enough to make looks dear is the node whose stuck exit they are for:
//! paced by a look's cost, a 45 s stuck exit was sampled twice on a loaded
//! machine. A sample is no look: it re-reads only what the zombies of the
//! last look name (`gather::sample`), and when one's status file changed,
//! the look that tells what became of it is due at once, not paced.
//!
//! What an event itself costs is constant and small: at most two looks are
//! ever due (see [`Due`]), and the exits noted are capped, so a daemon that
//! forges thousands of events a second (issue 36 measured 3,900 to 8,000)
//! calls for no more looks than one event does, and each is noted in
//! constant time.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::checks::registry::CHECKS;
use crate::commands::flight_recorder::{Recorder, SAMPLE_EVERY};
use crate::model::{
    Event, ExitReading, ExitsToRead, Finding, Kind, Observation, Sample, SampleBasis,
};
use crate::report::Report;

/// CRI's exit handler's deadline for `task.Delete` (10 s from when CRI
/// heard the exit, which is before nodectl hears it), and half a second
/// more: a container still RUNNING with its process gone past this is a
/// zombie, not an exit being handled.
pub const EXIT_HANDLED_WITHIN: Duration = Duration::from_millis(10_500);
/// How soon after a delete or removal its leftovers are looked for.
pub const SHORTLY: Duration = Duration::from_secs(2);
/// Events heard while not heeded, kept until a look proves the daemon
/// (the oldest dropped past this).
pub const HELD_EVENTS: usize = 4096;
/// Event-driven looks use at most 1/`LOOK_SHARE` of one core (2 %).
pub const LOOK_SHARE: u32 = 50;
/// Exits heard within this of each other share one reading of their
/// status files.
pub const EXIT_READS_EVERY: Duration = Duration::from_secs(1);
/// Spans of exits not held one by one, kept at most (past this the last
/// grows: its reading comes later, never sooner than its exits allow).
pub const NOT_HELD_SPANS: usize = 64;

/// When to look after `event`, from when it was heard.
pub fn looks_after(event: &Event) -> Vec<Duration> {
    match event.topic.as_str() {
        "/tasks/exit" if event.is_init_exit() => vec![EXIT_HANDLED_WITHIN],
        // An exec's exit and an OOM are context: the OOM's exit follows.
        "/tasks/exit" | "/tasks/oom" => Vec::new(),
        _ => vec![SHORTLY, EXIT_HANDLED_WITHIN],
    }
}

/// The looks due: at most two, the earliest and the latest called for. A
/// look reads the whole node, so one later than an event asked for still
/// sees what the event left: each look called for between the two is taken
/// by the latest, and the earliest is never put off. However many events
/// arrive while a look is pending, they add at most one further look, and
/// each is noted in constant time (a set of every instant called for grew
/// by two entries an event under a flood, each a look of its own).
#[derive(Debug, Default)]
struct Due {
    first: Option<Instant>,
    /// Later than `first`, when set.
    last: Option<Instant>,
}

impl Due {
    fn insert(&mut self, at: Instant) {
        let Some(first) = self.first else {
            self.first = Some(at);
            return;
        };
        if at < first {
            // The old first is taken by the latest (itself, if alone).
            self.last = Some(self.last.unwrap_or(first));
            self.first = Some(at);
        } else if at > first && self.last.is_none_or(|last| at > last) {
            self.last = Some(at);
        }
    }

    /// A look at `now` takes every look due by then.
    fn take_until(&mut self, now: Instant) {
        if self.last.is_some_and(|last| last <= now) {
            self.last = None;
        }
        if self.first.is_some_and(|first| first <= now) {
            self.first = self.last.take();
        }
    }
}

/// What is due next: a look at the whole node, or the flight recorder's
/// sample of the last look's zombies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Look,
    Sample,
    /// The status files of these containers, whose init exit was heard
    /// over [`EXIT_HANDLED_WITHIN`] ago, or of every one (see
    /// [`Watched::reading_exits`]).
    ReadExits(ExitsToRead),
}

/// A finding as `watch` tells it.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Found(Finding),
    Cleared(Finding),
}

/// What has been told so far, and the exits being handled.
#[derive(Debug, Default)]
pub struct Watched {
    open: BTreeMap<(Kind, String), Finding>,
    /// Containers whose init exit was heard, and when.
    exits: HashMap<String, Instant>,
    /// Looks due.
    due: Due,
    /// Whether events are heeded: only while the last look proved the
    /// daemon at the socket. After containerd went away, whoever serves
    /// the path next is not listened to until a look proves it.
    heeding: bool,
    /// Events heard meanwhile, and when: heeded once a look proves the
    /// daemon (the stream reconnects before the look that proves it, and
    /// what it tells in between, such as a pod's removal, must not be lost).
    held: VecDeque<(Event, Instant)>,
    /// No look an event called for starts before this (the last look's
    /// cost, paced: see [`LOOK_SHARE`]).
    not_before: Option<Instant>,
    /// What stuck exits looked like while they were stuck.
    recorder: Recorder,
    /// When the flight recorder's next sample of an open zombie is due
    /// (not paced by [`LOOK_SHARE`]).
    sample_at: Option<Instant>,
    /// The zombies of the last look still worth sampling, as it saw them.
    sampling: SampleBasis,
    /// A look a sample or an exit's reading called for (a zombie's status
    /// file changed, a zombie found): not paced, so a late exit is told
    /// within a sample of CRI recording it, and a zombie within a second
    /// of its exit handler's deadline.
    look_unpaced: Option<Instant>,
    /// Whether an init exit is answered by a reading of its status file
    /// (and a look only when that finds a zombie) rather than a look.
    reads_exits: bool,
    /// Init exits heard and not yet read, oldest first (at most
    /// [`HELD_EVENTS`]).
    to_read: VecDeque<(String, Instant)>,
    /// When init exits were heard that did not fit in `to_read`, as
    /// (first, last) of each [`EXIT_READS_EVERY`], oldest first (at most
    /// [`NOT_HELD_SPANS`]): a reading of the whole store is due once the
    /// last of one had its [`EXIT_HANDLED_WITHIN`], and covers every exit
    /// heard that long before it.
    not_held: VecDeque<(Instant, Instant)>,
    /// The containers the last reading of the whole store read as exited.
    exited: Arc<BTreeSet<String>>,
    /// When the last reading of exits was taken.
    exits_read_at: Option<Instant>,
    /// The wait before the last look that was called to prove the daemon
    /// again; `None` once one did.
    reprove_wait: Option<Duration>,
}

/// The first wait before a look that tries again to prove the daemon whose
/// events are held; it doubles up to [`REPROVE_MOST`]. A containerd just
/// restarted may not be provable for a moment (its socket up before its
/// state is), and everything heard meanwhile, a pod's removal among it,
/// waits on the proof: not on the next `--interval`, minutes away.
pub const REPROVE_FIRST: Duration = Duration::from_secs(1);
pub const REPROVE_MOST: Duration = Duration::from_secs(30);

impl Watched {
    /// `watch`'s: an init exit is answered by a reading of its container's
    /// status file and process once CRI's exit handler had its 10 s, and a
    /// look only when that finds CRI saying it runs with its process gone.
    /// Under a flood of forged exits (ids no store holds) no look is taken
    /// for them at all; an exit CRI recorded in time costs no look either.
    pub fn reading_exits() -> Watched {
        Watched {
            reads_exits: true,
            ..Watched::default()
        }
    }

    /// Whether the last look proved the daemon whose stream is heard; once
    /// it does, the events held meanwhile call for their looks, from when
    /// they were heard.
    pub fn heed(&mut self, proven: bool) {
        self.heeding = proven;
        if proven {
            self.reprove_wait = None;
            for (event, heard) in std::mem::take(&mut self.held) {
                self.heard(&event, heard);
            }
        }
    }

    pub fn heeding(&self) -> bool {
        self.heeding
    }

    /// A look ending at `now` did not prove the daemon while its stream is
    /// heard: the next look is due after [`REPROVE_FIRST`], doubling with
    /// each such look to [`REPROVE_MOST`]. Returns the wait.
    pub fn reprove_soon(&mut self, now: Instant) -> Duration {
        let wait = self
            .reprove_wait
            .map_or(REPROVE_FIRST, |last| (last * 2).min(REPROVE_MOST));
        self.reprove_wait = Some(wait);
        self.due.insert(now + wait);
        wait
    }

    /// Notes `event`, heard at `now`, and the looks it calls for (held
    /// while events are not heeded).
    pub fn heard(&mut self, event: &Event, now: Instant) {
        if !self.heeding {
            if self.held.len() == HELD_EVENTS {
                self.held.pop_front();
            }
            self.held.push_back((event.clone(), now));
            return;
        }
        if event.is_init_exit() {
            if let Some(id) = &event.container_id {
                // Capped: a zombie whose exit was not noted is told at once
                // rather than held back, which only makes it sooner.
                if let Some(heard) = self.exits.get_mut(id) {
                    *heard = now;
                } else if self.exits.len() < HELD_EVENTS {
                    self.exits.insert(id.clone(), now);
                }
            }
        }
        if self.reads_exits && event.is_init_exit() {
            if let Some(id) = &event.container_id {
                if self.to_read.len() < HELD_EVENTS {
                    self.to_read.push_back((id.clone(), now));
                } else {
                    // A flood: read as part of the whole store, not looked
                    // at (issue 46 measured a look every few seconds under
                    // 5,000 forged exits a second, a quarter of the cost).
                    let full = self.not_held.len() == NOT_HELD_SPANS;
                    match self.not_held.back_mut() {
                        Some((first, last)) if full || now < *first + EXIT_READS_EVERY => {
                            *last = now
                        }
                        _ => self.not_held.push_back((now, now)),
                    }
                }
                return;
            }
        }
        for after in looks_after(event) {
            self.due.insert(now + after);
        }
    }

    /// A look at `now` (a (re)connect: what the stream missed).
    pub fn look_now(&mut self, now: Instant) {
        self.due.insert(now);
    }

    /// A look that ended at `now` took `cost` of CPU: the next one an
    /// event calls for waits `cost × LOOK_SHARE`.
    pub fn looked(&mut self, cost: Duration, now: Instant) {
        self.not_before = Some(now + cost * LOOK_SHARE);
    }

    /// When the next look is due: the earliest an event called for, once
    /// the last look's cost allows it, or one a sample called for.
    fn look_at(&self) -> Option<Instant> {
        let called = self
            .due
            .first
            .map(|first| self.not_before.map_or(first, |paced| first.max(paced)));
        called.into_iter().chain(self.look_unpaced).min()
    }

    /// When the oldest exit not yet read is due for its reading.
    fn exits_read_due(&self) -> Option<Instant> {
        let held = self.to_read.front().map(|(_, heard)| *heard);
        let not_held = self.not_held.front().map(|(_, last)| *last);
        let due = held.into_iter().chain(not_held).min()? + EXIT_HANDLED_WITHIN;
        Some(
            self.exits_read_at
                .map_or(due, |last| due.max(last + EXIT_READS_EVERY)),
        )
    }

    /// The exits heard long enough before `now` to be read, taken: every
    /// container's once one that was not held is due.
    fn take_exits(&mut self, now: Instant) -> ExitsToRead {
        let mut every = false;
        while let Some((_, last)) = self.not_held.front() {
            if *last + EXIT_HANDLED_WITHIN > now {
                break;
            }
            self.not_held.pop_front();
            every = true;
        }
        let ids = self.take_held(now);
        match every {
            true => ExitsToRead::All {
                exited: self.exited.clone(),
            },
            false => ExitsToRead::These(ids),
        }
    }

    /// The held exits heard long enough before `now` to be read, taken.
    fn take_held(&mut self, now: Instant) -> Vec<String> {
        let mut ids = BTreeSet::new();
        while let Some((id, heard)) = self.to_read.front() {
            if *heard + EXIT_HANDLED_WITHIN > now {
                break;
            }
            ids.insert(id.clone());
            self.to_read.pop_front();
        }
        ids.into_iter().collect()
    }

    /// When the next look, sample or reading is due, if any.
    pub fn next_look(&self) -> Option<Instant> {
        [self.look_at(), self.sample_at, self.exits_read_due()]
            .into_iter()
            .flatten()
            .min()
    }

    /// What is due at `now`, if anything. A look takes every look due by
    /// then (events heard together, or while the last look's cost was paid
    /// off, share one look) and the sample due too (a look samples the
    /// zombies it sees); a sample takes only itself.
    pub fn take_due(&mut self, now: Instant) -> Option<Next> {
        if self.look_at().is_some_and(|at| at <= now) {
            self.due.take_until(now);
            self.look_unpaced = None;
            // The look samples whatever zombie is open; a failed one does
            // not call the next at once.
            self.sample_at = None;
            // It sees what reading the exits due would.
            self.take_exits(now);
            return Some(Next::Look);
        }
        if self.exits_read_due().is_some_and(|at| at <= now) {
            self.exits_read_at = Some(now);
            return Some(Next::ReadExits(self.take_exits(now)));
        }
        if self.sample_at.is_some_and(|at| at <= now) {
            // Called again when the sample is in (see [`Watched::sampled`]).
            self.sample_at = None;
            return Some(Next::Sample);
        }
        None
    }

    /// What the next sample reads: the last look's zombies still sampled.
    pub fn sample_basis(&self) -> &SampleBasis {
        &self.sampling
    }

    /// A sample taken at `now`: each zombie still as the look saw it is
    /// recorded, and the next sample is due [`SAMPLE_EVERY`] later; one
    /// whose status file changed (its exit recorded, its container
    /// removed) calls for a look at once, which tells the late exit or
    /// clears the zombie.
    pub fn sampled(&mut self, sample: &Sample, now: Instant) {
        for seen in &sample.observations {
            if self.recorder.wants_samples(&seen.container_id, now) {
                self.recorder
                    .sample(seen, sample.context.as_ref(), now, &sample.taken_at);
            }
        }
        if !sample.changed.is_empty() {
            self.look_unpaced = Some(now);
        }
        self.schedule_samples(now);
    }

    /// A reading of exits taken at `now`: a zombie among them, not yet
    /// told nor sampled, calls for a look at once; a reading that could
    /// not tell calls for one as an exit did before (paced).
    pub fn exits_read(&mut self, reading: &ExitReading, now: Instant) {
        // Told, sampled, or an exit CRI's handler is still at work on (a
        // reading of the whole store sees those too).
        let known = |id: &String| {
            self.open.contains_key(&(Kind::Zombie, id.clone()))
                || self.sampling.zombies.iter().any(|z| &z.container.id == id)
                || self
                    .exits
                    .get(id)
                    .is_some_and(|heard| now.duration_since(*heard) < EXIT_HANDLED_WITHIN)
        };
        if reading.dead.iter().any(|id| !known(id)) {
            self.look_unpaced = Some(now);
        }
        if reading.unsure.is_some() {
            self.due.insert(now);
        }
        if let Some(exited) = &reading.exited {
            self.exited = Arc::new(exited.clone());
        }
    }

    /// The next sample, [`SAMPLE_EVERY`] from `now`, while a zombie of the
    /// last look is still worth one.
    fn schedule_samples(&mut self, now: Instant) {
        let recorder = &self.recorder;
        self.sampling
            .zombies
            .retain(|z| recorder.wants_samples(&z.container.id, now));
        self.sample_at = (!self.sampling.zombies.is_empty()).then(|| now + SAMPLE_EVERY);
    }

    /// The findings of a look at `now`, as changes to what was told: new
    /// ones found, told ones gone cleared, but only where the kind could be
    /// checked (a blind look clears nothing). A zombie whose exit is still
    /// being handled is held back.
    pub fn update(&mut self, report: &Report, now: Instant) -> Vec<Change> {
        self.record(report, now);
        self.exits
            .retain(|_, heard| now.duration_since(*heard) < EXIT_HANDLED_WITHIN * 6);
        let blind: BTreeSet<Kind> = CHECKS
            .iter()
            .filter(|check| !check.could_check(&report.gaps))
            .map(|check| check.kind)
            .collect();
        let seen: BTreeMap<(Kind, String), Finding> = report
            .findings
            .iter()
            .filter(|f| !self.being_handled(f, now))
            .map(|f| ((f.kind, f.id.clone()), self.recorder.annotated(f)))
            .collect();
        let mut changes = Vec::new();
        let gone: Vec<(Kind, String)> = self
            .open
            .keys()
            .filter(|key| !seen.contains_key(*key) && !blind.contains(&key.0))
            .cloned()
            .collect();
        for key in gone {
            if let Some(finding) = self.open.remove(&key) {
                // A zombie cleared by a look that saw its task deleted and
                // then, in its second look, CRI's record of the exit tells
                // no late exit (it judged the first): the next look does,
                // unless this one told it.
                // Due shortly, not paced and not left to an event: on 2.3.4
                // the clearing look took every look the task's delete had
                // called for, and the late exit waited for `--interval`.
                if key.0 == Kind::Zombie && !seen.contains_key(&(Kind::LateExit, key.1.clone())) {
                    let soon = now + SHORTLY;
                    self.look_unpaced = Some(self.look_unpaced.map_or(soon, |at| at.min(soon)));
                }
                changes.push(Change::Cleared(finding));
            }
        }
        for (key, finding) in seen {
            if !self.open.contains_key(&key) {
                changes.push(Change::Found(finding.clone()));
            }
            self.open.insert(key, finding);
        }
        changes
    }

    /// Each zombie of the look (the ones held back too: their exit looks
    /// stuck already) is sampled for the flight recorder, and while one is
    /// worth it, the next sample is due within [`SAMPLE_EVERY`], paced or
    /// not.
    fn record(&mut self, report: &Report, now: Instant) {
        let wall = report.generated_at.clone();
        for zombie in report.findings.iter().filter(|f| f.kind == Kind::Zombie) {
            if self.recorder.wants_samples(&zombie.id, now) {
                let seen = Observation::of_zombie(&zombie.id, &zombie.evidence);
                self.recorder
                    .sample(&seen, report.context.as_ref(), now, &wall);
            }
        }
        self.sampling = report.sample_basis.clone();
        self.schedule_samples(now);
    }

    fn being_handled(&self, finding: &Finding, now: Instant) -> bool {
        finding.kind == Kind::Zombie
            && self
                .exits
                .get(&finding.id)
                .is_some_and(|heard| now.duration_since(*heard) < EXIT_HANDLED_WITHIN)
    }

    /// What stuck exits looked like while they were stuck.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// What is open now, in kind order.
    pub fn open(&self) -> impl Iterator<Item = &Finding> {
        self.open.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ExitReading, Gap, ProcessKey, Severity, Source, ZombieTarget};

    fn finding(kind: Kind, id: &str) -> Finding {
        Finding {
            kind,
            severity: Severity::Critical,
            id: id.to_string(),
            summary: format!("{id} is broken"),
            evidence: serde_json::Value::Null,
            cause: "c".into(),
            remedy: "r".into(),
        }
    }

    fn report(findings: Vec<Finding>, gaps: Vec<Gap>) -> Report {
        let paths = crate::model::fixtures::snapshot().paths;
        Report::new("check", "k8s.io", paths, findings, gaps)
    }

    /// Following a proven daemon's stream.
    fn heeding() -> Watched {
        let mut watched = Watched::default();
        watched.heed(true);
        watched
    }

    fn init_exit(id: &str) -> Event {
        Event {
            topic: "/tasks/exit".into(),
            container_id: Some(id.into()),
            exec_id: Some(id.into()),
            ..Event::default()
        }
    }

    #[test]
    fn a_look_that_did_not_prove_the_daemon_is_followed_soon_by_one_that_tries_again() {
        let mut watched = heeding();
        let now = Instant::now();
        watched.heed(false);
        assert_eq!(watched.reprove_soon(now), REPROVE_FIRST);
        assert_eq!(watched.take_due(now), None);
        assert_eq!(watched.take_due(now + REPROVE_FIRST), Some(Next::Look));
        // Each failed proof waits twice as long, up to the most.
        let waits: Vec<Duration> = (0..8).map(|_| watched.reprove_soon(now)).collect();
        assert_eq!(waits[0], REPROVE_FIRST * 2);
        assert_eq!(waits[1], REPROVE_FIRST * 4);
        assert_eq!(waits.last(), Some(&REPROVE_MOST));
        // A proof starts over, and releases what was held.
        watched.heed(true);
        watched.heed(false);
        assert_eq!(watched.reprove_soon(now), REPROVE_FIRST);
    }

    #[test]
    fn a_finding_is_told_once_when_found_and_once_when_cleared() {
        let mut watched = heeding();
        let now = Instant::now();
        let shim = finding(Kind::LeakedShim, "s1");
        let changes = watched.update(&report(vec![shim.clone()], vec![]), now);
        assert_eq!(changes, [Change::Found(shim.clone())]);
        assert!(watched
            .update(&report(vec![shim.clone()], vec![]), now)
            .is_empty());
        let changes = watched.update(&report(vec![], vec![]), now);
        assert_eq!(changes, [Change::Cleared(shim)]);
        assert_eq!(watched.open().count(), 0);
    }

    /// A look's report of zombie `id` (its shim 7 in `umount2`), with
    /// what its samples re-read.
    fn zombie_look(id: &str) -> Report {
        let mut zombie = finding(Kind::Zombie, id);
        zombie.evidence = serde_json::json!({"shim_pid": 7, "shim_in_umount2": true});
        let mut report = report(vec![zombie], vec![]);
        report.sample_basis.zombies.push(ZombieTarget {
            container: crate::model::fixtures::running(id, 42, 1),
            rootfs: format!("/run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/rootfs")
                .into(),
            shim: Some(ProcessKey {
                pid: 7,
                started_at: 1,
            }),
        });
        report
    }

    /// A sample that saw `id` still stuck, its shim in `umount2`.
    fn still_stuck(id: &str) -> Sample {
        Sample {
            taken_at: "t".into(),
            observations: vec![Observation {
                container_id: id.into(),
                shim_pid: Some(7),
                in_umount2: true,
                ..Observation::default()
            }],
            ..Sample::default()
        }
    }

    #[test]
    fn a_zombie_is_sampled_between_looks_and_its_late_exit_says_why() {
        let mut watched = heeding();
        let now = Instant::now();
        // A look dear enough to put events' looks off by 50 s does not put
        // off the recorder's samples.
        watched.looked(Duration::from_secs(1), now);
        watched.update(&zombie_look("c1"), now);
        assert_eq!(watched.next_look(), Some(now + SAMPLE_EVERY));
        assert_eq!(
            watched.take_due(now + SAMPLE_EVERY - Duration::from_millis(1)),
            None
        );
        // A sample, not a look: it reads what the look's zombie names.
        assert_eq!(watched.take_due(now + SAMPLE_EVERY), Some(Next::Sample));
        assert_eq!(watched.sample_basis().zombies.len(), 1);
        assert_eq!(watched.next_look(), None, "taken, until the sample is in");
        let mut at = now;
        for _ in 0..6 {
            at += SAMPLE_EVERY;
            watched.sampled(&still_stuck("c1"), at);
            assert_eq!(watched.next_look(), Some(at + SAMPLE_EVERY));
            assert_eq!(watched.take_due(at + SAMPLE_EVERY), Some(Next::Sample));
        }
        // CRI recorded the exit: the sample sees the status file changed,
        // and a look is due at once, however dear the last one was.
        at += SAMPLE_EVERY;
        let recorded = Sample {
            changed: vec!["c1".into()],
            ..Sample::default()
        };
        watched.sampled(&recorded, at);
        assert_eq!(watched.take_due(at), Some(Next::Look));
        let mut late = finding(Kind::LateExit, "c1");
        late.evidence = serde_json::json!({"lag_seconds": 40.0});
        let changes = watched.update(&report(vec![late], vec![]), at);
        assert_eq!(watched.next_look(), None, "no zombie open: no sample due");
        let told = changes.iter().find_map(|c| match c {
            Change::Found(f) if f.kind == Kind::LateExit => Some(f),
            _ => None,
        });
        let why = told.unwrap().evidence["why"].as_str().unwrap_or_default();
        assert!(
            why.contains("shim 7 was in umount2 for at least 30 s") && why.contains("(7 samples"),
            "{why}"
        );
    }

    #[test]
    fn a_zombie_is_sampled_for_a_while_not_for_ever() {
        let mut watched = heeding();
        let now = Instant::now();
        watched.update(&zombie_look("c1"), now);
        let past = now + crate::commands::flight_recorder::SAMPLED_FOR;
        watched.sampled(&still_stuck("c1"), past);
        assert_eq!(watched.next_look(), None, "sampled long enough");
        assert!(watched.sample_basis().zombies.is_empty());
    }

    #[test]
    fn an_event_look_due_with_a_sample_takes_it() {
        let mut watched = heeding();
        let now = Instant::now();
        watched.update(&zombie_look("c1"), now);
        let delete = Event {
            topic: "/tasks/delete".into(),
            ..init_exit("c2")
        };
        watched.heard(&delete, now + SAMPLE_EVERY - SHORTLY);
        // Both due: the look, which samples the zombie it sees too.
        assert_eq!(watched.take_due(now + SAMPLE_EVERY), Some(Next::Look));
        assert_eq!(watched.take_due(now + SAMPLE_EVERY), None);
    }

    /// `watch`'s, following a proven daemon's stream.
    fn reading() -> Watched {
        let mut watched = Watched::reading_exits();
        watched.heed(true);
        watched
    }

    #[test]
    fn an_exit_is_read_once_its_handler_had_its_time_and_a_zombie_found_calls_a_look_at_once() {
        let mut watched = reading();
        let heard = Instant::now();
        // A look dear enough to put events' looks off by 50 s.
        watched.looked(Duration::from_secs(1), heard);
        watched.heard(&init_exit("c1"), heard);
        watched.heard(&init_exit("c2"), heard + Duration::from_millis(300));
        watched.heard(&init_exit("c1"), heard + Duration::from_millis(600));
        // An exec's exit is context only.
        let exec = Event {
            exec_id: Some("exec-1".into()),
            ..init_exit("c3")
        };
        watched.heard(&exec, heard);
        assert_eq!(watched.next_look(), Some(heard + EXIT_HANDLED_WITHIN));
        assert_eq!(watched.take_due(heard + Duration::from_secs(10)), None);
        // Exits heard within a second share one reading, each id once.
        let at = heard + EXIT_HANDLED_WITHIN + Duration::from_millis(600);
        assert_eq!(
            watched.take_due(at),
            Some(Next::ReadExits(ExitsToRead::These(vec![
                "c1".into(),
                "c2".into()
            ])))
        );
        assert_eq!(watched.next_look(), None, "no look: nothing found yet");
        // CRI recorded both exits: no look at all.
        watched.exits_read(&ExitReading::default(), at);
        assert_eq!(watched.next_look(), None);
        // One that CRI still says runs, its process gone: a look at once,
        // however dear the last one was.
        watched.heard(&init_exit("c4"), at);
        let read_at = at + EXIT_HANDLED_WITHIN;
        assert_eq!(
            watched.take_due(read_at),
            Some(Next::ReadExits(ExitsToRead::These(vec!["c4".into()])))
        );
        let zombie = ExitReading {
            dead: vec!["c4".into()],
            ..ExitReading::default()
        };
        watched.exits_read(&zombie, read_at);
        assert_eq!(watched.take_due(read_at), Some(Next::Look));
        // Told: another exit of it (forged, say) calls for no look.
        watched.update(&report(vec![finding(Kind::Zombie, "c4")], vec![]), read_at);
        watched.exits_read(&zombie, read_at);
        assert_eq!(watched.next_look(), None);
        // A reading that could not tell calls for a look, paced as an
        // event's.
        let unsure = ExitReading {
            unsure: Some("a status file could not be read".into()),
            ..ExitReading::default()
        };
        watched.looked(Duration::from_secs(1), read_at);
        watched.exits_read(&unsure, read_at);
        assert_eq!(watched.next_look(), Some(read_at + Duration::from_secs(50)));
    }

    #[test]
    fn a_flood_of_forged_exits_is_read_not_looked_at_and_past_the_cap_read_with_the_whole_store() {
        let mut watched = reading();
        let start = Instant::now();
        // 1,000 forged exits a second for 3 s: each second's share one
        // reading, and no look is due.
        for i in 0..3_000u32 {
            let heard = start + Duration::from_millis(u64::from(i));
            watched.heard(&init_exit(&format!("forged-{i}")), heard);
        }
        assert_eq!(watched.to_read.len(), 3_000);
        let mut now = start;
        let mut readings = Vec::new();
        while let Some(at) = watched.next_look() {
            now = at;
            match watched.take_due(now) {
                Some(Next::ReadExits(ExitsToRead::These(ids))) => readings.push(ids.len()),
                other => panic!("{other:?} at {:?}", now - start),
            }
            watched.exits_read(&ExitReading::default(), now);
        }
        assert_eq!(readings.iter().sum::<usize>(), 3_000);
        assert!(readings.len() <= 4, "{readings:?}");
        assert!(now - start < EXIT_HANDLED_WITHIN + Duration::from_secs(4));
        // Past the cap (a flood of 2 s), the exits not held are read with
        // the whole store once the last of each second's had its handler's
        // time: no look, and the held ones are read with them.
        for i in 0..2 * HELD_EVENTS {
            let heard = now + Duration::from_micros(500) * i as u32;
            watched.heard(&init_exit(&format!("more-{i}")), heard);
        }
        let last = now + Duration::from_micros(500) * (2 * HELD_EVENTS - 1) as u32;
        assert_eq!(watched.to_read.len(), HELD_EVENTS);
        // Some 2.05 s of exits not held: three spans of at most a second.
        let spans = watched.not_held.len();
        assert_eq!(spans, 3, "{:?}", watched.not_held);
        assert_eq!(watched.look_at(), None);
        let first_span_read = watched.not_held[0].1 + EXIT_HANDLED_WITHIN;
        match watched.take_due(first_span_read - Duration::from_millis(1)) {
            Some(Next::ReadExits(ExitsToRead::These(ids))) => assert_eq!(ids.len(), HELD_EVENTS),
            other => panic!(
                "not the held exits' reading: {:?}",
                other.map(|_| "another")
            ),
        }
        watched.exits_read(&ExitReading::default(), first_span_read);
        let mut whole = Vec::new();
        while let Some(at) = watched.next_look() {
            assert!(watched.look_at().is_none(), "a look was called");
            match watched.take_due(at) {
                Some(Next::ReadExits(ExitsToRead::All { .. })) => whole.push(at),
                other => panic!("{other:?}"),
            }
            watched.exits_read(&ExitReading::default(), at);
        }
        // At most one reading of the store a second of flood, the last
        // once the last exit had its time, never before.
        assert!(!whole.is_empty() && whole.len() <= spans, "{whole:?}");
        assert!(*whole.last().unwrap() >= last + EXIT_HANDLED_WITHIN);
        assert!(*whole.last().unwrap() < last + EXIT_HANDLED_WITHIN + EXIT_READS_EVERY);
        assert!(watched.not_held.is_empty() && watched.to_read.is_empty());
    }

    #[test]
    fn a_cleared_zombie_calls_for_a_look_shortly_however_dear_the_last_one() {
        let mut watched = heeding();
        let now = Instant::now();
        watched.update(&report(vec![finding(Kind::Zombie, "c1")], vec![]), now);
        assert_eq!(watched.next_look(), None);
        // A dear look (paced 50 s) clears it: the next is due shortly.
        watched.looked(Duration::from_secs(1), now);
        let cleared = watched.update(&report(vec![], vec![]), now);
        assert!(
            matches!(cleared.as_slice(), [Change::Cleared(_)]),
            "{cleared:?}"
        );
        assert_eq!(watched.next_look(), Some(now + SHORTLY));
        assert_eq!(watched.take_due(now + SHORTLY), Some(Next::Look));
        // Another kind cleared calls for none.
        watched.update(&report(vec![finding(Kind::LeakedShim, "s1")], vec![]), now);
        watched.update(&report(vec![], vec![]), now);
        assert_eq!(watched.next_look(), None);
    }

    #[test]
    fn a_look_blind_to_a_kind_clears_none_of_it() {
        let mut watched = heeding();
        let now = Instant::now();
        let zombie = finding(Kind::Zombie, "c1");
        watched.update(&report(vec![zombie], vec![]), now);
        let blind = Gap::source(Source::CriStore, "/var/lib/containerd", "unmounted");
        assert!(watched.update(&report(vec![], vec![blind]), now).is_empty());
        assert_eq!(watched.open().count(), 1);
    }

    #[test]
    fn a_zombie_is_held_back_while_its_exit_is_being_handled() {
        let mut watched = heeding();
        let heard = Instant::now();
        watched.heard(&init_exit("c1"), heard);
        let zombie = finding(Kind::Zombie, "c1");
        let soon = heard + Duration::from_secs(3);
        assert!(watched
            .update(&report(vec![zombie.clone()], vec![]), soon)
            .is_empty());
        let past = heard + EXIT_HANDLED_WITHIN;
        assert_eq!(
            watched.update(&report(vec![zombie.clone()], vec![]), past),
            [Change::Found(zombie)]
        );
    }

    #[test]
    fn events_heard_together_share_a_look_once_the_handler_gave_up() {
        let mut watched = heeding();
        let heard = Instant::now();
        watched.heard(&init_exit("c1"), heard);
        watched.heard(&init_exit("c2"), heard);
        let exec = Event {
            exec_id: Some("exec-1".into()),
            ..init_exit("c1")
        };
        watched.heard(&exec, heard);
        assert_eq!(watched.next_look(), Some(heard + EXIT_HANDLED_WITHIN));
        assert_eq!(watched.take_due(heard + Duration::from_secs(10)), None);
        assert_eq!(
            watched.take_due(heard + EXIT_HANDLED_WITHIN),
            Some(Next::Look)
        );
        assert_eq!(watched.next_look(), None, "one look for both");
        let delete = Event {
            topic: "/tasks/delete".into(),
            ..init_exit("sb")
        };
        watched.heard(&delete, heard);
        assert_eq!(watched.next_look(), Some(heard + SHORTLY));
    }

    #[test]
    fn looks_an_event_calls_for_are_paced_by_what_the_last_one_cost() {
        let mut watched = heeding();
        let ended = Instant::now();
        // A look that took 50 ms of CPU: events may not bring the next
        // one before 50 × 50 ms, whatever their rate.
        watched.looked(Duration::from_millis(50), ended);
        let paced = ended + Duration::from_millis(50) * LOOK_SHARE;
        let mut heard = ended;
        for i in 0..100 {
            let delete = Event {
                topic: "/tasks/delete".into(),
                ..init_exit(&format!("c{i}"))
            };
            watched.heard(&delete, heard);
            heard += Duration::from_millis(20);
        }
        assert_eq!(watched.next_look(), Some(paced));
        assert_eq!(watched.take_due(paced - Duration::from_millis(1)), None);
        assert_eq!(
            watched.take_due(paced),
            Some(Next::Look),
            "every look due by then, as one"
        );
        assert_eq!(watched.take_due(paced), None, "taken");
        // What was due later (the deletes' looks after a slow delete)
        // still is.
        let next = watched.next_look().expect("the later looks are still due");
        assert!(next > paced, "{:?}", next - paced);
    }

    #[test]
    fn a_flood_of_events_during_a_look_calls_for_at_most_one_further_look() {
        let mut watched = heeding();
        let start = Instant::now();
        // A look is pending: the one a first delete called for.
        let first = Event {
            topic: "/tasks/delete".into(),
            ..init_exit("c0")
        };
        watched.heard(&first, start);
        // 20,000 forged exits and deletes of distinct containers, 8,000 a
        // second, all heard before it starts.
        let mut heard = start;
        for i in 0..20_000u32 {
            heard = start + Duration::from_micros(125) * i;
            let topic = if i % 2 == 0 {
                "/tasks/exit"
            } else {
                "/tasks/delete"
            };
            let event = Event {
                topic: topic.into(),
                ..init_exit(&format!("c{i}"))
            };
            watched.heard(&event, heard);
        }
        let mut looks = Vec::new();
        while let Some(at) = watched.next_look() {
            assert_eq!(watched.take_due(at), Some(Next::Look));
            looks.push(at);
            if looks.len() > 10 {
                break;
            }
        }
        // The pending one (the first delete's, 2 s after it) and one more,
        // late enough for every event of the flood.
        assert_eq!(
            looks.len(),
            2,
            "{:?}",
            looks.iter().map(|at| *at - start).collect::<Vec<_>>()
        );
        assert_eq!(looks[0], start + SHORTLY);
        assert_eq!(looks[1], heard + EXIT_HANDLED_WITHIN);
        assert!(watched.exits.len() <= HELD_EVENTS);
    }

    #[test]
    fn events_call_for_looks_only_once_a_look_proved_the_daemon() {
        let mut watched = Watched::default();
        let heard = Instant::now();
        watched.heard(&init_exit("c1"), heard);
        assert_eq!(watched.next_look(), None, "nothing proven yet");
        watched.heed(true);
        watched.heard(&init_exit("c1"), heard);
        assert_eq!(watched.next_look(), Some(heard + EXIT_HANDLED_WITHIN));
        // containerd went away; whoever serves its socket now is not
        // listened to (the look after the reconnect did not prove it)...
        assert_eq!(
            watched.take_due(heard + EXIT_HANDLED_WITHIN),
            Some(Next::Look)
        );
        watched.heed(false);
        let later = heard + Duration::from_secs(20);
        let removal = Event {
            topic: "/containers/delete".into(),
            ..init_exit("c2")
        };
        watched.heard(&removal, later);
        assert_eq!(watched.next_look(), None);
        // ...until a look proves it: what it told meanwhile is heeded then,
        // from when it was heard.
        watched.heed(true);
        assert_eq!(watched.next_look(), Some(later + SHORTLY));
    }
}
