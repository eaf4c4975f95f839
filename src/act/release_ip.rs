//! Releasing leaked pod addresses, safely, as host-local itself does.
//!
//! Only an address of a network CRI loads is released (another CNI user's,
//! in the same `conf_dir`, is never CRI's), and that is asked again on the
//! fresh look: a config changed in between ends it.
//!
//! Between the scan and the release a sandbox of that id may show up again
//! in containerd's records or CRI's list, host-local may give the address
//! to a new pod (after the file was removed by someone else), or the file
//! may be gone. So, right before acting: re-gather, re-judge each address on
//! that fresh snapshot with the check's own judgement
//! ([`leaked_ip::leaked`]), and only then, holding the network's lock
//! (`<store>/lock`, the file host-local takes an exclusive `flock` on for
//! every ADD and DEL), read the reservation once more and remove it only if
//! it still names the same sandbox. The store is opened without following a
//! symlink and the file is removed relative to it (`unlinkat`): nothing
//! that was put in its place is followed.

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

use crate::act::walk::{walk, Act, PerLook};
use crate::act::Verdict;
use crate::checks::leaked_ip;
use crate::checks::Settings;
use crate::model::{Cleanup, CleanupAction, CleanupOutcome, NetworksFrom, Snapshot, CRI_NAMESPACE};
use crate::read::bounded::{open_at, read_regular_at, Links};

/// How long one run waits for host-local's locks, in all: host-local holds
/// one for one ADD or DEL, milliseconds; a lock held longer is someone
/// else's business, refused. In all, not per target: a held lock cost 2 s
/// for each of a store's addresses, a run's time unbounded by anything.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// One leaked address: its network's store, the address and the sandbox
/// it is held for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub network: String,
    pub store: PathBuf,
    pub ip: String,
    pub sandbox_id: String,
}

/// Every leaked address of `snapshot`.
pub fn targets(snapshot: &Snapshot, settings: &Settings) -> Vec<Target> {
    leaked_ip::leaked(snapshot, settings)
        .into_iter()
        .map(|(network, reservation)| Target {
            network: network.name.clone(),
            store: network.store.clone(),
            ip: reservation.ip.clone(),
            sandbox_id: reservation.container_id.clone(),
        })
        .collect()
}

/// Whether `target` may be released now, judged on `fresh`.
pub fn verify(fresh: &Snapshot, target: &Target, settings: &Settings) -> Verdict {
    verify_among(fresh, target, &still_leaked(fresh, settings))
}

/// Each address still leaked on `fresh` (network, address, the sandbox it
/// is held for): the check's pass.
fn still_leaked(fresh: &Snapshot, settings: &Settings) -> HashSet<(String, String, String)> {
    leaked_ip::leaked(fresh, settings)
        .into_iter()
        .map(|(n, r)| (n.name.clone(), r.ip.clone(), r.container_id.clone()))
        .collect()
}

/// [`verify`], with the check's pass over `fresh` made already.
fn verify_among(
    fresh: &Snapshot,
    target: &Target,
    leaked: &HashSet<(String, String, String)>,
) -> Verdict {
    let same = |network: &str, ip: &str| network == target.network && ip == target.ip;
    let key = (
        target.network.clone(),
        target.ip.clone(),
        target.sandbox_id.clone(),
    );
    // Only CRI's own word says which networks it uses: the files, read
    // when it did not answer, may be a config edited since or merged
    // otherwise, and an address released in a network CRI does not use
    // is another runtime's (or the next pod's) lost.
    match fresh.cni.as_ref().map(|cni| &cni.networks_from) {
        Some(NetworksFrom::Cri { .. }) => {}
        from => {
            let why = match from {
                Some(NetworksFrom::Files { why }) => format!(" ({why})"),
                _ => String::new(),
            };
            return Verdict::Refuse(format!(
                "CRI did not say which networks it loaded{why}: nothing is released on the \
                 files' word"
            ));
        }
    }
    if leaked.contains(&key) {
        return Verdict::Go;
    }
    let cri_s = fresh.cni.as_ref().is_some_and(|cni| {
        cni.cri_networks()
            .any(|n| n.name == target.network && n.store == target.store)
    });
    if !cri_s {
        return Verdict::Refuse(format!(
            "network {} is not one CRI loads now (its conf_dir changed, or go-cni fails \
             on it): its addresses are not CRI's to release",
            target.network
        ));
    }
    let held = fresh
        .cni
        .iter()
        .flat_map(|cni| cni.cri_networks())
        .find_map(|n| {
            n.reservations
                .iter()
                .find(|r| same(&n.name, &r.ip))
                .map(|r| &r.container_id)
        });
    match held {
        None => Verdict::Gone("host-local no longer holds it".to_string()),
        Some(other) if *other != target.sandbox_id => {
            Verdict::Refuse(format!("now held for another sandbox, {other}"))
        }
        Some(_)
            if fresh
                .containerd
                .as_ref()
                .and_then(|v| v.containers(CRI_NAMESPACE))
                .is_none() =>
        {
            Verdict::Refuse(
                "containerd's records did not answer, so nothing is confirmed".to_string(),
            )
        }
        Some(_) => Verdict::Refuse(
            "no longer leaked: a sandbox of that id is known again (containerd's records, \
             CRI's list, its directory or a shim)"
                .to_string(),
        ),
    }
}

/// Releases (or, without `act`, plans) the leaked addresses of `before`,
/// each re-verified on the snapshot `regather` takes.
pub fn run(
    before: &Snapshot,
    settings: &Settings,
    act: bool,
    regather: impl FnMut() -> Snapshot,
) -> Vec<Cleanup> {
    let targets = targets(before, settings);
    let mut release = Release {
        settings,
        lock_wait_left: LOCK_WAIT,
        leaked: PerLook::default(),
    };
    walk(before, targets, act, &mut release, regather)
}

struct Release<'a> {
    settings: &'a Settings,
    /// What is left of the run's [`LOCK_WAIT`].
    lock_wait_left: Duration,
    leaked: PerLook<HashSet<(String, String, String)>>,
}

impl Act for Release<'_> {
    type Target = Target;
    type Outcome = CleanupOutcome;
    type Row = Cleanup;

    fn verdict(&self, fresh: &Snapshot, target: &Target) -> Verdict {
        let leaked = self.leaked.of(fresh, || still_leaked(fresh, self.settings));
        verify_among(fresh, target, &leaked)
    }

    fn would(&self, target: &Target) -> (CleanupOutcome, String) {
        let how = format!(
            "run with --release --yes to remove it under {}",
            target.store.join("lock").display()
        );
        (CleanupOutcome::WouldRemove, how)
    }

    fn act(&mut self, target: &Target) -> (CleanupOutcome, String) {
        match release(target, &mut self.lock_wait_left) {
            Ok(()) => (CleanupOutcome::Removed, "released".to_string()),
            Err((outcome, why)) => (outcome, why),
        }
    }

    fn record(
        &self,
        target: Target,
        outcome: CleanupOutcome,
        detail: String,
        _: &Snapshot,
    ) -> Cleanup {
        Cleanup {
            action: CleanupAction::ReleaseIp,
            path: target.store.join(&target.ip),
            id: target.sandbox_id,
            outcome,
            detail,
        }
    }
}

/// Removes `target`'s reservation under host-local's lock, if it still
/// names the same sandbox.
fn release(target: &Target, wait_left: &mut Duration) -> Result<(), (CleanupOutcome, String)> {
    let failed = |what: &str, err: &dyn std::fmt::Display| {
        (CleanupOutcome::Failed, format!("{what}: {err}"))
    };
    let store = open_at(
        &nix::fcntl::AT_FDCWD,
        target.store.as_path(),
        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
    )
    .map_err(|e| failed(&format!("opening {}", target.store.display()), &e))?;
    let _lock = lock(&store, &target.store, wait_left)?;
    let file = target.store.join(&target.ip);
    let read = match read_regular_at(&store, Path::new(&target.ip), &file, 4096, Links::Refuse) {
        Ok(read) => read,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err((CleanupOutcome::AlreadyGone, "removed meanwhile".to_string()))
        }
        Err(err) => return Err(failed(&format!("reading {}", file.display()), &err)),
    };
    let text = String::from_utf8_lossy(&read.bytes);
    let holder = text.lines().next().unwrap_or_default().trim();
    if holder != target.sandbox_id {
        return Err((
            CleanupOutcome::Refused,
            format!("under the lock it names another sandbox, {holder}"),
        ));
    }
    unlinkat(&store, Path::new(&target.ip), UnlinkatFlags::NoRemoveDir)
        .map_err(|e| failed(&format!("removing {}", file.display()), &e))
}

/// host-local's lock of a store, taken within what is left of the run's
/// wait (`wait_left`, spent by the waiting) or refused.
fn lock(
    store: &File,
    shown: &Path,
    wait_left: &mut Duration,
) -> Result<Flock<File>, (CleanupOutcome, String)> {
    let lock = shown.join("lock");
    let mut file = open_at(store, Path::new("lock"), OFlag::O_NOFOLLOW).map_err(|e| {
        (
            CleanupOutcome::Refused,
            format!("host-local's lock {}: {e}", lock.display()),
        )
    })?;
    let started = Instant::now();
    let until = started + *wait_left;
    let taken = loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => break Ok(locked),
            Err((back, nix::errno::Errno::EWOULDBLOCK)) if Instant::now() < until => {
                file = back;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err((_, err)) => {
                break Err((
                    CleanupOutcome::Refused,
                    format!(
                        "host-local's lock {} not taken within the run's {} s: {err}",
                        lock.display(),
                        LOCK_WAIT.as_secs()
                    ),
                ))
            }
        }
    };
    *wait_left = wait_left.saturating_sub(started.elapsed());
    taken
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{CniNetwork, CniView, IpReservation};
    use std::fs;

    fn node(store: &Path, held_for: &str, live: &[String]) -> Snapshot {
        let mut s = of_proven_daemon(snapshot());
        with_records(&mut s, live);
        s.cni = Some(CniView {
            conf_dir: PathBuf::from("/etc/cni/net.d"),
            attachments: Vec::new(),
            pending: Vec::new(),
            networks_from: NetworksFrom::Cri {
                conf_dir: PathBuf::from("/etc/cni/net.d"),
            },
            cri_networks: vec!["pods".to_string()],
            networks: vec![CniNetwork {
                name: "pods".to_string(),
                conf_file: PathBuf::from("/etc/cni/net.d/10-pods.conflist"),
                store: store.to_path_buf(),
                capacity: Some(5),
                reservations: vec![IpReservation {
                    ip: "10.251.0.2".to_string(),
                    container_id: held_for.to_string(),
                    ifname: Some("eth0".to_string()),
                    reserved_at: NOW - 3600 * SEC,
                    ..IpReservation::default()
                }],
                loaded_by_cri: true,
            }],
        });
        s
    }

    fn store() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("pods");
        fs::create_dir(&store).unwrap();
        fs::write(store.join("lock"), "").unwrap();
        (dir, store)
    }

    #[test]
    fn a_leaked_address_is_planned_then_released_under_the_lock() {
        let (_dir, store) = store();
        fs::write(store.join("10.251.0.2"), format!("{}\neth0", id('a'))).unwrap();
        let before = node(&store, &id('a'), &[]);
        let settings = Settings::default();
        let planned = run(&before, &settings, false, || before.clone());
        assert_eq!(planned.len(), 1);
        assert_eq!(planned[0].outcome, CleanupOutcome::WouldRemove);
        assert!(store.join("10.251.0.2").exists(), "a plan touches nothing");
        let done = run(&before, &settings, true, || before.clone());
        assert_eq!(
            (done[0].outcome, done[0].detail.as_str()),
            (CleanupOutcome::Removed, "released")
        );
        assert_eq!(done[0].path, store.join("10.251.0.2"));
        assert!(!store.join("10.251.0.2").exists());
        assert!(store.join("lock").exists(), "the lock stays host-local's");
    }

    #[test]
    fn an_address_live_again_or_given_to_another_pod_is_refused() {
        let (_dir, store) = store();
        let file = store.join("10.251.0.2");
        fs::write(&file, id('a')).unwrap();
        let before = node(&store, &id('a'), &[]);
        let settings = Settings::default();
        // Its sandbox is known again at the fresh look.
        let live = node(&store, &id('a'), &[id('a')]);
        let done = run(&before, &settings, true, || live.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{:?}", done[0]);
        // host-local gave the address to another pod in between.
        let reassigned = node(&store, &id('b'), &[id('b')]);
        let done = run(&before, &settings, true, || reassigned.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Refused);
        assert!(done[0].detail.contains(&id('b')), "{}", done[0].detail);
        // Reassigned after the fresh look, before the lock: read under it.
        fs::write(&file, id('c')).unwrap();
        let done = run(&before, &settings, true, || before.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Refused);
        assert!(
            done[0].detail.contains("under the lock"),
            "{}",
            done[0].detail
        );
        assert!(file.exists(), "nothing was removed");
        // Released by someone else in between.
        let gone = node(&store, &id('a'), &[]);
        let gone = Snapshot {
            cni: gone.cni.map(|mut cni| {
                cni.networks[0].reservations.clear();
                cni
            }),
            ..gone
        };
        let done = run(&before, &settings, true, || gone.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::AlreadyGone);
    }

    #[test]
    fn an_address_of_a_network_cri_does_not_load_is_never_released() {
        let (_dir, store) = store();
        let file = store.join("10.251.0.2");
        fs::write(&file, id('a')).unwrap();
        let settings = Settings::default();
        let not_cri_s = |mut s: Snapshot| {
            let cni = s.cni.as_mut().unwrap();
            cni.cri_networks.clear();
            cni.networks[0].loaded_by_cri = false;
            s
        };
        // Never a target: nothing planned.
        let other = not_cri_s(node(&store, &id('a'), &[]));
        assert!(run(&other, &settings, true, || other.clone()).is_empty());
        // CRI's at the scan, another's (say a config sorted before it) at
        // the fresh look: refused, the file kept.
        let before = node(&store, &id('a'), &[]);
        let done = run(&before, &settings, true, || other.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{:?}", done[0]);
        assert!(
            done[0].detail.contains("not one CRI loads"),
            "{:?}",
            done[0]
        );
        assert!(file.exists());
    }

    #[test]
    fn nothing_is_released_without_cris_word_on_its_networks() {
        let (_dir, store) = store();
        let file = store.join("10.251.0.2");
        fs::write(&file, id('a')).unwrap();
        let settings = Settings::default();
        let before = node(&store, &id('a'), &[]);
        for (from, says) in [
            (
                NetworksFrom::Files {
                    why: "CRI did not answer".to_string(),
                },
                "(CRI did not answer)",
            ),
            (NetworksFrom::Unrecorded, "did not say"),
        ] {
            let mut fresh = before.clone();
            fresh.cni.as_mut().unwrap().networks_from = from;
            let done = run(&before, &settings, true, || fresh.clone());
            assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{:?}", done[0]);
            assert!(done[0].detail.contains(says), "{:?}", done[0]);
            assert!(file.exists());
        }
        // With it, the same address is released.
        let done = run(&before, &settings, true, || before.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Removed, "{:?}", done[0]);
        assert!(!file.exists());
    }

    #[test]
    fn a_symlink_in_place_of_the_reservation_or_the_lock_is_never_followed() {
        let (dir, store) = store();
        let victim = dir.path().join("victim");
        fs::write(&victim, id('a')).unwrap();
        std::os::unix::fs::symlink(&victim, store.join("10.251.0.2")).unwrap();
        let before = node(&store, &id('a'), &[]);
        let done = run(&before, &Settings::default(), true, || before.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Failed, "{:?}", done[0]);
        assert!(victim.exists());
        // A lock that is a symlink is not host-local's: refused.
        fs::remove_file(store.join("10.251.0.2")).unwrap();
        fs::write(store.join("10.251.0.2"), id('a')).unwrap();
        fs::remove_file(store.join("lock")).unwrap();
        std::os::unix::fs::symlink(&victim, store.join("lock")).unwrap();
        let done = run(&before, &Settings::default(), true, || before.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Refused, "{:?}", done[0]);
        assert!(store.join("10.251.0.2").exists());
    }

    #[test]
    fn a_lock_held_by_host_local_is_waited_for_then_refused() {
        let (_dir, store) = store();
        fs::write(store.join("10.251.0.2"), id('a')).unwrap();
        let held = Flock::lock(
            File::open(store.join("lock")).unwrap(),
            FlockArg::LockExclusive,
        )
        .unwrap();
        let mut before = node(&store, &id('a'), &[]);
        // Three leaked addresses behind the one held lock: the run waits
        // LOCK_WAIT in all, not for each.
        let network = &mut before.cni.as_mut().unwrap().networks[0];
        for (ip, sandbox) in [("10.251.0.3", id('b')), ("10.251.0.4", id('c'))] {
            fs::write(store.join(ip), &sandbox).unwrap();
            let mut reservation = network.reservations[0].clone();
            reservation.ip = ip.to_string();
            reservation.container_id = sandbox;
            network.reservations.push(reservation);
        }
        let started = Instant::now();
        let done = run(&before, &Settings::default(), true, || before.clone());
        let waited = started.elapsed();
        assert_eq!(done.len(), 3, "{done:?}");
        for row in &done {
            assert_eq!(row.outcome, CleanupOutcome::Refused, "{row:?}");
            assert!(row.detail.contains("not taken within"), "{row:?}");
        }
        assert!(waited >= LOCK_WAIT, "{waited:?}");
        assert!(waited < LOCK_WAIT * 2, "{waited:?} for three targets");
        drop(held);
        let done = run(&before, &Settings::default(), true, || before.clone());
        assert_eq!(done[0].outcome, CleanupOutcome::Removed);
    }
}
