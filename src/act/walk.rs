//! The one way every action acts: the targets of the scan, one fresh gather
//! right before acting, the proof that it is still the daemon the scan found
//! ([`daemon_proven`]), each target judged again on the fresh snapshot by the
//! action's own judgement, then act (or, in a dry run, say it would) or refuse
//! with the reason, and record a row. An action supplies only what is its
//! own: its judgement, how it acts, and its row.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use crate::act::{daemon_proven, shim_of_unknown_service, Verdict};
use crate::model::{CleanupOutcome, Outcome, Snapshot};

/// How long [`walk`] waits to gather once more when its fresh snapshot
/// holds a shim whose service cannot be told (see
/// [`shim_of_unknown_service`]): such a process ends within milliseconds
/// (`containerd-shim-runc-v2 -info` takes 10 ms here), and every target
/// would be refused because of it. One wait, one more gather, at most.
pub const SETTLE: Duration = Duration::from_millis(500);

/// What one kind of action supplies to [`walk`].
pub trait Act {
    /// One thing it may act on, found by the scan.
    type Target;
    /// How a row tells what became of a target.
    type Outcome: Told;
    /// The row that records it.
    type Row;
    /// Whether `target` may be acted on now, judged on `fresh` (the daemon
    /// already proven the scan's). Pure.
    fn verdict(&self, fresh: &Snapshot, target: &Self::Target) -> Verdict;
    /// What a dry run says of a target it would act on.
    fn would(&self, target: &Self::Target) -> (Self::Outcome, String);
    /// Acts on a target its verdict let go; what became of it.
    fn act(&mut self, target: &Self::Target) -> (Self::Outcome, String);
    /// The row of a target; `fresh` is the snapshot it was judged on.
    fn record(
        &self,
        target: Self::Target,
        outcome: Self::Outcome,
        detail: String,
        fresh: &Snapshot,
    ) -> Self::Row;
}

/// What an action's judgement takes from the whole fresh snapshot (its
/// check's own pass: every item still leaked), made once per look rather
/// than once per target: a walk judges all its targets on the one snapshot
/// it gathered, and the check's pass for each target made acting on N
/// targets quadratic in N (issue 46). A look is told by its `taken_at`.
pub struct PerLook<T> {
    made: RefCell<Option<(i64, Rc<T>)>>,
}

impl<T> Default for PerLook<T> {
    fn default() -> Self {
        PerLook {
            made: RefCell::new(None),
        }
    }
}

impl<T> PerLook<T> {
    /// `make`'s value for `fresh`, made once for each look.
    pub fn of(&self, fresh: &Snapshot, make: impl FnOnce() -> T) -> Rc<T> {
        let mut made = self.made.borrow_mut();
        match &*made {
            Some((taken_at, value)) if *taken_at == fresh.taken_at => Rc::clone(value),
            _ => {
                let value = Rc::new(make());
                *made = Some((fresh.taken_at, Rc::clone(&value)));
                value
            }
        }
    }
}

/// The outcomes the walk itself gives a target.
pub trait Told {
    /// Not touched, and why.
    const REFUSED: Self;
    /// Gone before it was acted on.
    const ALREADY_GONE: Self;
}

impl Told for CleanupOutcome {
    const REFUSED: Self = CleanupOutcome::Refused;
    const ALREADY_GONE: Self = CleanupOutcome::AlreadyGone;
}

impl Told for Outcome {
    const REFUSED: Self = Outcome::Refused;
    const ALREADY_GONE: Self = Outcome::AlreadyGone;
}

/// Acts on `targets` (or, without `acting`, plans) with `action`, in their
/// order: with none, nothing is gathered; otherwise the node is gathered
/// again (`regather`), right before acting (a second time, after [`SETTLE`],
/// when a shim whose service cannot be told was there), and every target is
/// refused (the plan too) unless that is still the proven daemon `before`
/// found, then each is judged again on that fresh snapshot and acted on only
/// if its verdict lets it go.
pub fn walk<A: Act>(
    before: &Snapshot,
    targets: Vec<A::Target>,
    acting: bool,
    action: &mut A,
    regather: impl FnMut() -> Snapshot,
) -> Vec<A::Row> {
    walk_settling(before, targets, acting, action, regather, SETTLE)
}

/// [`walk`], waiting `settle` before gathering a second time.
fn walk_settling<A: Act>(
    before: &Snapshot,
    targets: Vec<A::Target>,
    acting: bool,
    action: &mut A,
    mut regather: impl FnMut() -> Snapshot,
    settle: Duration,
) -> Vec<A::Row> {
    if targets.is_empty() {
        return Vec::new();
    }
    let mut fresh = regather();
    if shim_of_unknown_service(&fresh).is_some() {
        std::thread::sleep(settle);
        fresh = regather();
    }
    let proven = daemon_proven(before, &fresh);
    targets
        .into_iter()
        .map(|target| {
            let verdict = match &proven {
                Err(why) => Verdict::Refuse(why.clone()),
                Ok(()) => action.verdict(&fresh, &target),
            };
            let (outcome, detail) = match verdict {
                Verdict::Gone(why) => (A::Outcome::ALREADY_GONE, why),
                Verdict::Refuse(why) => (A::Outcome::REFUSED, why),
                Verdict::Go if !acting => action.would(&target),
                Verdict::Go => action.act(&target),
            };
            action.record(target, outcome, detail, &fresh)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use std::cell::Cell;

    /// Targets are numbers; odd ones are refused, 4 is gone, the rest go.
    #[derive(Default)]
    struct Count {
        acted: Vec<u8>,
    }

    impl Act for Count {
        type Target = u8;
        type Outcome = CleanupOutcome;
        type Row = Row;
        fn verdict(&self, _: &Snapshot, n: &u8) -> Verdict {
            match n {
                4 => Verdict::Gone("gone".to_string()),
                n if n % 2 == 1 => Verdict::Refuse(format!("{n} is odd")),
                _ => Verdict::Go,
            }
        }
        fn would(&self, _: &u8) -> (CleanupOutcome, String) {
            (CleanupOutcome::WouldRemove, "would".to_string())
        }
        fn act(&mut self, n: &u8) -> (CleanupOutcome, String) {
            self.acted.push(*n);
            (CleanupOutcome::Removed, "removed".to_string())
        }
        fn record(&self, n: u8, o: CleanupOutcome, d: String, _: &Snapshot) -> Row {
            (n, o, d)
        }
    }

    type Row = (u8, CleanupOutcome, String);

    /// The rows, the targets acted on, and how many times it gathered.
    fn run(
        before: &Snapshot,
        fresh: &Snapshot,
        targets: &[u8],
        acting: bool,
    ) -> (Vec<Row>, Vec<u8>, usize) {
        let gathered = Cell::new(0);
        let mut count = Count::default();
        let rows = walk(before, targets.to_vec(), acting, &mut count, || {
            gathered.set(gathered.get() + 1);
            fresh.clone()
        });
        (rows, count.acted, gathered.get())
    }

    #[test]
    fn a_judgement_of_the_whole_look_is_made_once_per_look() {
        let made = Cell::new(0);
        let per_look = PerLook::default();
        let look = snapshot();
        let make = || {
            made.set(made.get() + 1);
            made.get()
        };
        for _ in 0..3 {
            assert_eq!(*per_look.of(&look, make), 1);
        }
        let mut later = look.clone();
        later.taken_at += 1;
        assert_eq!(*per_look.of(&later, make), 2);
        assert_eq!(made.get(), 2);
    }

    #[test]
    fn each_target_is_judged_on_one_fresh_gather_and_acted_on_only_if_it_goes() {
        let s = of_proven_daemon(snapshot());
        let (rows, acted, gathered) = run(&s, &s, &[2, 3, 4, 6], true);
        assert_eq!((acted, gathered), (vec![2, 6], 1));
        use CleanupOutcome::*;
        let told: Vec<_> = rows.iter().map(|r| (r.0, r.1)).collect();
        let expected = [(2, Removed), (3, Refused), (4, AlreadyGone), (6, Removed)];
        assert_eq!(told, expected, "in the targets' order");
        assert_eq!(rows[1].2, "3 is odd");
        // The dry run says it would, and acts on nothing.
        let (rows, acted, _) = run(&s, &s, &[2, 3], false);
        assert!(acted.is_empty());
        assert_eq!((rows[0].1, rows[1].1), (WouldRemove, Refused));
        // Nothing to act on: nothing is gathered.
        let (rows, _, gathered) = run(&s, &s, &[], true);
        assert_eq!((rows.len(), gathered), (0, 0));
    }

    /// Refuses every target while a shim whose service is unknown is
    /// there, as `still_dead` does.
    struct WhileUnknownShim;

    impl Act for WhileUnknownShim {
        type Target = u8;
        type Outcome = CleanupOutcome;
        type Row = (u8, CleanupOutcome);
        fn verdict(&self, fresh: &Snapshot, _: &u8) -> Verdict {
            match shim_of_unknown_service(fresh) {
                Some(pid) => Verdict::Refuse(format!("shim pid {pid} has no -id")),
                None => Verdict::Go,
            }
        }
        fn would(&self, _: &u8) -> (CleanupOutcome, String) {
            (CleanupOutcome::WouldRemove, String::new())
        }
        fn act(&mut self, _: &u8) -> (CleanupOutcome, String) {
            (CleanupOutcome::Removed, String::new())
        }
        fn record(
            &self,
            n: u8,
            o: CleanupOutcome,
            _: String,
            _: &Snapshot,
        ) -> (u8, CleanupOutcome) {
            (n, o)
        }
    }

    #[test]
    fn a_shim_whose_service_is_unknown_is_looked_at_once_more_before_judging() {
        let before = of_proven_daemon(snapshot());
        let mut passing = before.clone();
        let mut info = shim(82, "t", "/run/containerd/containerd.sock", &[]);
        info.id = None;
        with_live_shim(&mut passing, info);
        // Each call of `regather` takes the next look; the number taken.
        let judged = |looks: Vec<Snapshot>| {
            let mut looks = looks.into_iter();
            let taken = Cell::new(0);
            let rows = walk_settling(
                &before,
                vec![1],
                true,
                &mut WhileUnknownShim,
                || {
                    taken.set(taken.get() + 1);
                    looks.next().expect("no more looks than given")
                },
                Duration::ZERO,
            );
            (rows, taken.get())
        };
        // Gone by the second look: the target is judged on that one.
        let (rows, taken) = judged(vec![passing.clone(), before.clone()]);
        assert_eq!((rows, taken), (vec![(1, CleanupOutcome::Removed)], 2));
        // Still there: refused, and no third look.
        let (rows, taken) = judged(vec![passing.clone(), passing, before.clone()]);
        assert_eq!((rows, taken), (vec![(1, CleanupOutcome::Refused)], 2));
        // None there: one look.
        let (rows, taken) = judged(vec![before.clone()]);
        assert_eq!((rows, taken), (vec![(1, CleanupOutcome::Removed)], 1));
    }

    #[test]
    fn without_the_proven_daemon_of_the_scan_every_target_is_refused_even_in_the_plan() {
        let before = of_proven_daemon(snapshot());
        let unproven = snapshot();
        for acting in [false, true] {
            let (rows, acted, _) = run(&before, &unproven, &[2, 4], acting);
            assert!(acted.is_empty());
            for (_, outcome, detail) in rows {
                assert_eq!(outcome, CleanupOutcome::Refused);
                assert!(detail.contains("none was proven to serve"), "{detail}");
            }
        }
    }
}
