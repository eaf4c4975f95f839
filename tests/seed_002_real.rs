//! Seed 002 (containerd#12344, the PR in `shared/seeds/002-…`) on a real
//! containerd. On 2.0.0 to 2.0.6 two deletes of a pod sandbox's task race:
//! the podsandbox controller's event monitor (subscribed to /tasks/exit) and
//! its exit waiter (`waitSandboxExit`). The shim serves the second first
//! (T3: the sandbox's process becomes "deleted"), the first fails "cannot
//! delete a deleted process: not found" (T4), and its caller sends Shutdown
//! (T6) while the shim still lists the sandbox, so the shim ignores it; then
//! it closes the connection (T7) and the other delete ends "ttrpc: closed"
//! (T9): the shim runs on with nothing to serve. 2.0.7 dropped the event
//! monitor's subscription (#12400): one delete, whose Shutdown ends the shim.
//!
//! The window, T3 to T8 (the shim forgetting the sandbox), is the few
//! microseconds between the shim's Delete releasing the process's mutex and
//! taking its own: unforced, 1 of 30 such removals leaked on v2.0.6 here (in
//! three runs on the loaded test machine). The recipe forces it: [`Stall`] holds the thread
//! that unmounted the sandbox's rootfs (the Delete that got there first) at
//! the end of its next futex (the wake of the other Delete) for a second.
//! Each try is a pod with a sandbox alone, so that no container shares its
//! shim (the leak of `sandbox_killed_real.rs` cannot pass for this one),
//! stopped and removed as kubelet does.
//!
//! Where the bug is not (2.0.7 and later; 1.6 and 1.7, whose CRI deletes a
//! sandbox's task once) the same hold only delays the one delete, and its
//! Shutdown ends the shim: asserted clean, in two tries that were held.

mod support;

use std::fmt;
use std::time::{Duration, Instant};

use support::{LeakedShim, Stall, TestBed};

/// Tries on a release with the bug: on v2.0.6, 24 of 27 tries leaked in two
/// runs on an idle machine, but with the CI's four lines at once only about
/// 1 in 4 did (in the others the held wake was not the one of the other
/// Delete: it was not waiting yet), and 5 tries once all missed. 20 tries
/// miss at about 0.75^20 = 0.3 %; each takes 1 to 4 s, and the test stops at
/// the first leak, each try saying what it saw.
const TRIES_WITH_THE_BUG: usize = 20;
/// Held tries where the bug is not: held as on 2.0.6, a clean try is the fix
/// at work, not a missed window; one whose thread parked instead of waking
/// the other Delete is not counted, and at most [`TRIES_WITHOUT_MAX`] run.
const HELD_TRIES_WITHOUT: usize = 2;
const TRIES_WITHOUT_MAX: usize = 4;
/// How long the first Delete is held: far more than the other Delete's
/// "not found", its Shutdown and the close take (under 100 ms here), far
/// less than containerd's 10 s deadline on the delete.
const HOLD: Duration = Duration::from_secs(1);
/// A shim whose sandbox is removed ends within milliseconds of its
/// Shutdown; one still running this long after is left for good.
const SETTLE: Duration = Duration::from_secs(3);

/// containerd#12344's releases: 2.0.0 to 2.0.6 and 2.1.0 to 2.1.4
/// (src/advisories.rs has the same ranges, from the fix's tags).
fn has_the_bug(release: (u32, u32, u32)) -> bool {
    ((2, 0, 0)..(2, 0, 7)).contains(&release) || ((2, 1, 0)..(2, 1, 5)).contains(&release)
}

/// What one try did and saw.
struct Try {
    number: usize,
    sandbox_id: String,
    shim: i32,
    /// The tracer held the first Delete after its unmount.
    held: bool,
    /// What the tracer saw of the unmount and did, in its words.
    tracer: String,
    /// containerd's log for the sandbox: the event monitor's handler ran
    /// (T1's caller, 2.0.0 to 2.0.6 only), a delete failed "cannot delete a
    /// deleted process" (T4), a delete ended "ttrpc: closed" (T9).
    event_monitor: bool,
    not_found: bool,
    closed: bool,
    /// The shim still ran [`SETTLE`] after the sandbox was removed.
    outlived: bool,
    took: Duration,
}

impl fmt::Display for Try {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let yes = |b: bool| if b { "yes" } else { "no" };
        write!(
            f,
            "try {} ({:.1} s): sandbox {} shim {}: tracer: {}; log: event monitor's TaskExit \
             handler {}, \"cannot delete a deleted process\" {}, \"ttrpc: closed\" {}; {}",
            self.number,
            self.took.as_secs_f64(),
            &self.sandbox_id[..13],
            self.shim,
            self.tracer,
            yes(self.event_monitor),
            yes(self.not_found),
            yes(self.closed),
            if self.outlived {
                "the shim outlived its sandbox"
            } else {
                "the shim ended with its sandbox"
            }
        )
    }
}

/// The tracer's lines about the rootfs unmount and the hold, or that it
/// saw no unmount.
fn tracer_summary(events: &[String]) -> String {
    let said: Vec<&str> = events
        .iter()
        .map(String::as_str)
        .filter(|e| e.contains("unmounted") || e.contains("holding") || e.contains("parked"))
        .collect();
    if said.is_empty() {
        "saw no unmount of the rootfs".to_string()
    } else {
        said.join(", ")
    }
}

/// One sandbox-only pod stopped and removed with its first Delete held.
async fn one_try(bed: &TestBed, number: usize) -> Try {
    let started = Instant::now();
    let sandbox_id = bed.run_sandbox(&format!("racer-{number}")).await;
    let shim = bed.shim_pid(&sandbox_id);
    let rootfs = bed
        .state()
        .join("io.containerd.runtime.v2.task")
        .join(support::NAMESPACE)
        .join(&sandbox_id)
        .join("rootfs");
    let stall = bed.must(Stall::after_unmount(shim, &rootfs, HOLD));
    let removed = bed
        .stop_and_remove_pod(&sandbox_id, Duration::from_secs(60))
        .await;
    // The hold is over by now on every line (the removal waits for it where
    // the held Delete is the only one); ending the tracer lets the shim run
    // untraced for the verdict.
    tokio::time::sleep(HOLD.saturating_sub(started.elapsed())).await;
    let events = stall.finish();
    assert!(removed, "the sandbox {sandbox_id} is removed from CRI");
    let outlived = !support::wait_until(SETTLE, || !support::is_running(shim));
    let log = std::fs::read_to_string(bed.log_path()).unwrap_or_default();
    let said = |what: &str| {
        log.lines()
            .any(|l| l.contains(sandbox_id.as_str()) && l.contains(what))
    };
    Try {
        number,
        shim,
        held: events.iter().any(|e| e.contains("holding thread")),
        tracer: tracer_summary(&events),
        event_monitor: said("TaskExit event in podsandbox handler"),
        not_found: said("cannot delete a deleted process"),
        closed: said("ttrpc: closed"),
        outlived,
        took: started.elapsed(),
        sandbox_id,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_002_racing_sandbox_deletes_leak_the_shim_on_2_0_6_only() {
    let test = "seed_002_racing_sandbox_deletes_leak_the_shim_on_2_0_6_only";
    let Some(bed) = TestBed::start(test).await else {
        return;
    };
    let started = Instant::now();
    let healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let with_the_bug = has_the_bug(bed.containerd_release());
    let tries = if with_the_bug {
        TRIES_WITH_THE_BUG
    } else {
        TRIES_WITHOUT_MAX
    };
    let mut seen: Vec<Try> = Vec::new();
    for number in 1..=tries {
        let attempt = one_try(&bed, number).await;
        eprintln!("{} {attempt}", bed.containerd_version());
        seen.push(attempt);
        let done = if with_the_bug {
            seen.iter().any(|t| t.outlived)
        } else {
            seen.iter().filter(|t| t.held).count() >= HELD_TRIES_WITHOUT
        };
        if done {
            break;
        }
    }
    let record = seen
        .iter()
        .map(Try::to_string)
        .collect::<Vec<_>>()
        .join("\n  ");
    eprintln!(
        "{}: {} tries in {:.1} s",
        bed.containerd_version(),
        seen.len(),
        started.elapsed().as_secs_f64()
    );

    if !with_the_bug {
        assert!(
            seen.iter().filter(|t| t.held).count() >= HELD_TRIES_WITHOUT,
            "{}: {HELD_TRIES_WITHOUT} tries held the Delete, or their being clean proves \
             nothing:\n  {record}",
            bed.containerd_version()
        );
        assert!(
            seen.iter().all(|t| !t.outlived && !t.not_found),
            "{}: one delete of the sandbox's task, whose Shutdown ends the shim:\n  {record}",
            bed.containerd_version()
        );
        let output = bed.nodectl(&["leaked-shims", "-o", "json"]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "nothing leaked: {}",
            support::report(&output)
        );
        return;
    }

    let Some(leak) = seen.iter().find(|t| t.outlived) else {
        bed.fail(&format!(
            "containerd {} has containerd#12344, but no shim outlived its sandbox in {} \
             tries, the first Delete held {HOLD:?} after the rootfs unmount where the tracer \
             saw it:\n  \
             {record}",
            bed.containerd_version(),
            seen.len()
        ));
    };
    // The leak is #12344's, step by step: both deletes ran (the event
    // monitor's among them), one failed "not found" and sent the Shutdown,
    // the other ended on the closed connection.
    assert!(
        leak.event_monitor && leak.not_found && leak.closed,
        "the T1 to T11 timeline in containerd's log:\n  {record}"
    );
    let leaked = [LeakedShim {
        sandbox_id: leak.sandbox_id.clone(),
        pid: leak.shim,
    }];
    bed.leaked_shims_found_and_ended(&leaked, &["containerd#12344"], &healthy)
        .await;
    eprintln!(
        "{}: reproduced in {} tries, found and ended; {:.1} s in all",
        bed.containerd_version(),
        seen.len(),
        started.elapsed().as_secs_f64()
    );
}
