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
//! looks at an open zombie are not paced: one every [`SAMPLE_EVERY`] while
//! one is open (for at most `SAMPLED_FOR` a container), whatever a look
//! cost. A node slow enough to make looks dear is the node whose stuck exit
//! they are for: paced by a look's cost, a 45 s stuck exit was sampled
//! twice on a loaded machine.
//!
//! What an event itself costs is constant and small: at most two looks are
//! ever due (see [`Due`]), and the exits noted are capped, so a daemon that
//! forges thousands of events a second (issue 36 measured 3,900 to 8,000)
//! calls for no more looks than one event does, and each is noted in
//! constant time.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::checks::registry::CHECKS;
use crate::commands::flight_recorder::{Recorder, SAMPLE_EVERY};
use crate::model::{Event, Finding, Kind};
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
    /// When the flight recorder's next look at an open zombie is due (not
    /// paced by [`LOOK_SHARE`]).
    sample_at: Option<Instant>,
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

    /// When the next look is due, if any: the earliest an event called
    /// for, once the last look's cost allows it, or the flight recorder's
    /// next sample, if sooner.
    pub fn next_look(&self) -> Option<Instant> {
        let called = self
            .due
            .first
            .map(|first| self.not_before.map_or(first, |paced| first.max(paced)));
        called.into_iter().chain(self.sample_at).min()
    }

    /// Whether a look is due at `now`; if so, every look due by then is
    /// taken by it (events heard together, or while the last look's cost
    /// was paid off, share one look).
    pub fn take_due(&mut self, now: Instant) -> bool {
        let due = self.next_look().is_some_and(|at| at <= now);
        if due {
            self.due.take_until(now);
            // The look samples whatever zombie is open; a failed one does
            // not call the next at once.
            self.sample_at = None;
        }
        due
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
    /// worth it, the next look is due within [`SAMPLE_EVERY`], paced or not.
    fn record(&mut self, report: &Report, now: Instant) {
        let wall = report.generated_at.clone();
        let mut sampling = false;
        for zombie in report.findings.iter().filter(|f| f.kind == Kind::Zombie) {
            if self.recorder.wants_samples(&zombie.id, now) {
                self.recorder
                    .sample(zombie, report.context.as_ref(), now, &wall);
                sampling = true;
            }
        }
        self.sample_at = sampling.then(|| now + SAMPLE_EVERY);
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
    use crate::model::{Gap, Severity, Source};

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
        assert!(!watched.take_due(now));
        assert!(watched.take_due(now + REPROVE_FIRST));
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

    #[test]
    fn a_zombie_is_looked_at_again_soon_and_its_late_exit_says_why() {
        let mut watched = heeding();
        let now = Instant::now();
        let mut zombie = finding(Kind::Zombie, "c1");
        zombie.evidence = serde_json::json!({"shim_pid": 7, "shim_in_umount2": true});
        // A look dear enough to put events' looks off by 50 s does not put
        // off the recorder's.
        watched.looked(Duration::from_secs(1), now);
        watched.update(&report(vec![zombie.clone()], vec![]), now);
        assert_eq!(watched.next_look(), Some(now + SAMPLE_EVERY));
        assert!(!watched.take_due(now + SAMPLE_EVERY - Duration::from_millis(1)));
        assert!(watched.take_due(now + SAMPLE_EVERY));
        assert_eq!(watched.next_look(), None, "taken");
        let later = now + Duration::from_secs(30);
        watched.update(&report(vec![zombie], vec![]), later);
        let mut late = finding(Kind::LateExit, "c1");
        late.evidence = serde_json::json!({"lag_seconds": 40.0});
        let changes = watched.update(&report(vec![late], vec![]), later);
        assert_eq!(watched.next_look(), None, "no zombie open: no sample due");
        let told = changes.iter().find_map(|c| match c {
            Change::Found(f) if f.kind == Kind::LateExit => Some(f),
            _ => None,
        });
        let why = told.unwrap().evidence["why"].as_str().unwrap_or_default();
        assert!(
            why.contains("shim 7 was in umount2 for at least 30 s"),
            "{why}"
        );
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
        assert!(!watched.take_due(heard + Duration::from_secs(10)));
        assert!(watched.take_due(heard + EXIT_HANDLED_WITHIN));
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
        assert!(!watched.take_due(paced - Duration::from_millis(1)));
        assert!(watched.take_due(paced), "every look due by then, as one");
        assert!(!watched.take_due(paced), "taken");
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
            assert!(watched.take_due(at));
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
        assert!(watched.take_due(heard + EXIT_HANDLED_WITHIN));
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
