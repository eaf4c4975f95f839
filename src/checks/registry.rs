//! The check registry: every check once, with its kind, what it reads, the
//! function that runs it and, when it calls nothing on one look alone, what
//! a second look must read again. A command is a selection of kinds: what
//! it gathers is the join of their [`Reads`] ([`reads`]), and it runs them
//! here ([`run`]). The kind list ([`Kind::ALL`]), the Prometheus kinds, the
//! schema's kind enums, the man pages and docs/findings.md are held to this table
//! by the tests below.

use crate::checks::settings::Settings;
use crate::checks::{
    api_unreachable, cri_drift, cri_slow, duplicate_sandbox_name, failing_sandbox, late_exit,
    leaked_ip, leaked_mount, leaked_netns, leaked_pod_cgroup, leaked_sandbox, leaked_shim,
    leaked_snapshot, orphan_bundle, orphan_pod_dir, shim_blocked, zombie,
};
use crate::model::{Ask, Finding, Gap, Kind, Reads, Snapshot, Suspects};

/// What a check is given: the snapshot, a later look at the same node (the
/// first again when there was no reason for one), and the thresholds.
pub struct Looks<'a> {
    pub first: &'a Snapshot,
    pub second: &'a Snapshot,
    pub settings: &'a Settings,
}

/// One check.
pub struct Check {
    pub kind: Kind,
    /// What its looks must read beyond the files and procfs.
    pub reads: Reads,
    pub run: fn(&Looks) -> Vec<Finding>,
    /// `Some` for a check that must see its finding twice: what in a first
    /// snapshot the second look must read again.
    pub second_look: Option<fn(&Snapshot, &mut Suspects)>,
}

impl Check {
    /// Whether it could look at everything it reads: no source it depends
    /// on was unavailable. An item's gap (one unreadable file) leaves the
    /// rest of its source to look at.
    pub fn could_check(&self, gaps: &[Gap]) -> bool {
        gaps.iter()
            .filter(|gap| gap.source_unavailable)
            .all(|gap| !self.reads.depend_on(gap.source))
    }
}

/// Every check, in the order of [`Kind::ALL`].
pub const CHECKS: &[Check] = &[
    Check {
        kind: Kind::Zombie,
        reads: Reads {
            // The names come from containerd's records once there is a zombie
            // (1.7 and later remove the bundle, whose annotations name the
            // pod, with the task); the shim's threads tell a stuck unmount.
            containerd_api: Ask::WhenFound,
            shim_threads: true,
            ..Reads::NOTHING
        },
        run: |l| zombie::confirmed(l.first, l.second),
        second_look: Some(zombie::suspects),
    },
    Check {
        kind: Kind::LateExit,
        reads: Reads {
            containerd_api: Ask::WhenFound,
            ..Reads::NOTHING
        },
        run: |l| late_exit::check(l.first, l.settings),
        second_look: None,
    },
    Check {
        kind: Kind::LeakedShim,
        reads: Reads {
            // Owned is what containerd's records say: without them nothing is
            // called leaked.
            containerd_api: Ask::Always,
            ..Reads::NOTHING
        },
        run: |l| leaked_shim::check(l.first),
        second_look: None,
    },
    Check {
        kind: Kind::LeakedMount,
        reads: Reads {
            containerd_api: Ask::Always,
            mounts: true,
            ..Reads::NOTHING
        },
        run: |l| leaked_mount::check(l.first),
        second_look: None,
    },
    Check {
        kind: Kind::OrphanBundle,
        reads: Reads {
            containerd_api: Ask::Always,
            ..Reads::NOTHING
        },
        run: |l| orphan_bundle::check(l.first),
        second_look: None,
    },
    Check {
        kind: Kind::LeakedSnapshot,
        reads: Reads {
            containerd_api: Ask::Always,
            snapshots: true,
            ..Reads::NOTHING
        },
        run: |l| leaked_snapshot::check(l.first, l.settings),
        second_look: None,
    },
    Check {
        kind: Kind::LeakedIp,
        reads: Reads {
            // A sandbox is gone when containerd's records and CRI's list
            // say so, never by the files alone.
            containerd_api: Ask::Always,
            cri_api: true,
            cni: true,
            ..Reads::NOTHING
        },
        run: |l| leaked_ip::check(l.first, l.settings),
        second_look: None,
    },
    Check {
        kind: Kind::LeakedSandbox,
        reads: Reads {
            // CRI's own lists judge (asked with containerd's, which prove
            // the daemon a removal acts for). The addresses it holds are
            // named when CNI is read (`check`, `leaked-sandboxes`), but
            // judge nothing: CNI unread leaves it checkable.
            containerd_api: Ask::Always,
            cri_api: true,
            ..Reads::NOTHING
        },
        run: |l| leaked_sandbox::check(l.first, l.settings),
        second_look: None,
    },
    Check {
        kind: Kind::DuplicateSandboxName,
        reads: Reads {
            // containerd's own records, as its start-up reads them; CRI's
            // list (read by `check`) only says which one it serves.
            containerd_api: Ask::Always,
            ..Reads::NOTHING
        },
        run: |l| duplicate_sandbox_name::check(l.first),
        second_look: None,
    },
    Check {
        kind: Kind::OrphanPodDir,
        reads: Reads {
            // A pod is gone when CRI lists no sandbox of its uid (asked
            // with containerd's API); kubelet's directories and the mounts
            // below them are the evidence.
            containerd_api: Ask::Always,
            cri_api: true,
            kubelet: true,
            ..Reads::NOTHING
        },
        run: |l| orphan_pod_dir::check(l.first, l.settings),
        second_look: None,
    },
    Check {
        kind: Kind::LeakedPodCgroup,
        reads: Reads {
            // A pod is gone when CRI lists no sandbox of its uid (asked
            // with containerd's API) and kubelet no longer has it (its pod
            // directory, kubelet's own rule).
            containerd_api: Ask::Always,
            cri_api: true,
            pod_cgroups: true,
            kubelet: true,
            ..Reads::NOTHING
        },
        run: |l| leaked_pod_cgroup::check(l.first, l.settings),
        second_look: None,
    },
    Check {
        kind: Kind::FailingSandbox,
        reads: Reads {
            // A pod kubelet has (its directory and log directory) that CRI
            // lists no sandbox of (asked with containerd's API).
            containerd_api: Ask::Always,
            cri_api: true,
            kubelet: true,
            ..Reads::NOTHING
        },
        run: |l| failing_sandbox::check(l.first, l.settings),
        second_look: None,
    },
    Check {
        kind: Kind::LeakedNetns,
        reads: Reads {
            // Named by containerd's sandbox records, never by the mount
            // alone; a thread or descriptor holding it is the kernel's say.
            // CNI, when read (`check`, `leaked-netns`), adds the namespaces
            // its cache of CRI's networks names to those CRI's
            // `cni-<uuid>` names make CRI's, says how many `eth<i>` are
            // the pod's own, and names the pod; without it only fewer are
            // judged.
            containerd_api: Ask::Always,
            netns: true,
            ..Reads::NOTHING
        },
        run: |l| leaked_netns::check(l.first, l.settings),
        second_look: None,
    },
    Check {
        kind: Kind::CriDrift,
        reads: Reads {
            containerd_api: Ask::Always,
            cri_api: true,
            ..Reads::NOTHING
        },
        run: |l| cri_drift::check(l.first),
        second_look: None,
    },
    Check {
        kind: Kind::CriSlow,
        reads: Reads {
            // A slow CRI call is explained by the shim thread it waits on.
            containerd_api: Ask::Always,
            cri_api: true,
            shim_threads: true,
            ..Reads::NOTHING
        },
        run: |l| cri_slow::check(l.first, l.settings.slow),
        second_look: None,
    },
    Check {
        kind: Kind::ShimBlocked,
        reads: Reads {
            shim_threads: true,
            ..Reads::NOTHING
        },
        run: |l| shim_blocked::check(l.first, l.second),
        second_look: Some(shim_blocked::suspects),
    },
    Check {
        kind: Kind::ApiUnreachable,
        reads: Reads {
            containerd_api: Ask::Always,
            ..Reads::NOTHING
        },
        run: |l| api_unreachable::check(l.first),
        second_look: None,
    },
];

/// Every check. `second` is a later snapshot of the same node: zombies must
/// show in both, and shim threads must be blocked in both.
pub fn run_all(first: &Snapshot, second: &Snapshot, settings: &Settings) -> Vec<Finding> {
    run(Kind::ALL, first, second, settings)
}

/// The checks of `kinds`, most severe finding first.
pub fn run(
    kinds: &[Kind],
    first: &Snapshot,
    second: &Snapshot,
    settings: &Settings,
) -> Vec<Finding> {
    let looks = Looks {
        first,
        second,
        settings,
    };
    let selected: Vec<&Check> = selected(kinds).collect();
    let mut findings = on_two_threads(&selected, &looks);
    sort(&mut findings);
    findings
}

/// What a look must read for the checks of `kinds`.
pub fn reads(kinds: &[Kind]) -> Reads {
    Reads::all(selected(kinds).map(|check| check.reads))
}

/// The registered checks of `kinds`, in the order of [`CHECKS`].
fn selected(kinds: &[Kind]) -> impl Iterator<Item = &'static Check> + '_ {
    CHECKS
        .iter()
        .filter(move |check| kinds.contains(&check.kind))
}

/// Runs the checks, two at a time: they are pure and independent, and on a
/// node of a thousand containers they are a millisecond and a half at the
/// very end of `check`, where the other core has nothing left to do. The
/// findings come back in the order of [`CHECKS`], as if run one after
/// another.
fn on_two_threads(checks: &[&Check], looks: &Looks) -> Vec<Finding> {
    let each = |checks: &[&Check]| -> Vec<Finding> {
        checks.iter().flat_map(|check| (check.run)(looks)).collect()
    };
    crate::read::parallel::on_two_threads(checks, 2, || (), each)
        .into_iter()
        .flatten()
        .collect()
}

/// What in a first snapshot a second look must confirm: a container that
/// looks dead while CRI says running (it may be exiting normally right now),
/// or a shim of ours with a thread that may be stuck. When there is nothing,
/// there is no reason to wait for a second look.
pub fn suspects(first: &Snapshot) -> Suspects {
    let mut suspects = Suspects::default();
    for choose in CHECKS.iter().filter_map(|c| c.second_look) {
        choose(first, &mut suspects);
    }
    suspects
}

/// Most severe first, then by kind and id, so output is stable.
pub fn sort(findings: &mut [Finding]) {
    findings.sort_by(|a, b| (a.severity, a.kind, &a.id).cmp(&(b.severity, b.kind, &b.id)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fixtures::*;
    use crate::model::{Kind, Severity};
    use serde_json::Value;

    fn needs_second_look(s: &Snapshot) -> bool {
        !suspects(s).is_empty()
    }

    #[test]
    fn healthy_node_needs_no_second_look() {
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.processes
            .insert(100, process(100, 'S', NOW - 60 * SEC + SEC / 100));
        s.shims
            .push(shim(40, &id('a'), ADDRESS, &["futex", "epoll_pwait"]));
        // Another containerd's stuck shim is not ours to confirm.
        s.shims
            .push(shim(50, &id('b'), "/run/other.sock", &["umount2"]));
        assert!(!needs_second_look(&s));
    }

    #[test]
    fn dead_running_container_or_stuck_shim_needs_a_second_look() {
        let mut zombie = snapshot();
        zombie
            .cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        assert!(needs_second_look(&zombie));

        // Its status file is read again; its gone process is not.
        assert_eq!(suspects(&zombie).containers, [id('a')].into());
        assert_eq!(suspects(&zombie).pids, [].into());

        let mut stuck = snapshot();
        stuck.shims.push(shim(40, &id('a'), ADDRESS, &["umount2"]));
        assert_eq!(suspects(&stuck).pids, [40].into());
    }

    #[test]
    fn a_selection_runs_its_kinds_and_no_other() {
        // A zombie (running, its pid gone) and an exit recorded 5 min late.
        let mut s = snapshot();
        s.cri_containers
            .push(running(&id('a'), 100, NOW - 60 * SEC));
        s.cri_containers
            .push(exited(&id('b'), NOW - 600 * SEC, NOW - 300 * SEC));
        let settings = Settings::default();
        let kinds = |kinds: &[Kind]| -> Vec<Kind> {
            run(kinds, &s, &s, &settings)
                .into_iter()
                .map(|f| f.kind)
                .collect()
        };
        assert_eq!(kinds(Kind::ALL), [Kind::Zombie, Kind::LateExit]);
        assert_eq!(kinds(&[Kind::LateExit]), [Kind::LateExit]);
        assert_eq!(kinds(&[Kind::Zombie, Kind::LeakedShim]), [Kind::Zombie]);
        assert_eq!(kinds(&[]), []);
    }

    #[test]
    fn findings_are_sorted_most_severe_first_then_by_kind_and_id() {
        let finding = |kind, severity, c| Finding {
            kind,
            severity,
            id: id(c),
            summary: String::new(),
            evidence: Value::Null,
            cause: String::new(),
            remedy: String::new(),
        };
        let mut findings = vec![
            finding(Kind::LateExit, Severity::Warning, 'a'),
            finding(Kind::Zombie, Severity::Critical, 'b'),
            finding(Kind::Zombie, Severity::Critical, 'a'),
        ];
        sort(&mut findings);
        let order: Vec<(Kind, String)> = findings.into_iter().map(|f| (f.kind, f.id)).collect();
        assert_eq!(
            order,
            [
                (Kind::Zombie, id('a')),
                (Kind::Zombie, id('b')),
                (Kind::LateExit, id('a'))
            ]
        );
    }

    #[test]
    fn times_and_pids_at_the_edges_of_what_a_status_file_holds_neither_panic_nor_wrap() {
        // Found by tests/hostile_input.rs: each of these overflowed a
        // subtraction in late_exit, zombie, shim_blocked or seconds_since.
        let mut s = snapshot();
        s.taken_at = i64::MIN;
        s.cri_containers.push(exited(&id('a'), i64::MIN, i64::MAX));
        s.cri_containers.push(exited(&id('b'), i64::MAX, i64::MIN));
        s.cri_containers.push(running(&id('c'), 100, i64::MIN));
        s.cri_containers.push(running(&id('d'), 100, i64::MAX));
        s.processes.insert(100, process(100, 'S', i64::MAX));
        // 2^32 + 100: no process, not pid 100 truncated.
        s.cri_containers
            .push(running(&id('e'), (1 << 32) + 100, NOW - 60 * SEC));
        let mut second = s.clone();
        second.taken_at = i64::MAX;
        let findings = run_all(&s, &second, &Settings::default());
        let late: Vec<&str> = findings
            .iter()
            .filter(|f| f.kind == Kind::LateExit)
            .map(|f| f.id.as_str())
            .collect();
        // Recorded i64::MAX after an exit at i64::MIN: late, not wrapped to early.
        assert_eq!(late, [id('a')]);
        let e = findings
            .iter()
            .find(|f| f.kind == Kind::Zombie && f.id == id('e'))
            .expect("a pid no process can have is a zombie");
        assert!(!e.summary.contains("another process"), "{}", e.summary);
        let _ = suspects(&s);
    }

    #[test]
    fn every_kind_is_registered_once_in_the_order_of_the_kind_list() {
        let registered: Vec<Kind> = CHECKS.iter().map(|c| c.kind).collect();
        assert_eq!(registered, Kind::ALL);
    }

    #[test]
    fn the_schema_names_exactly_the_registered_kinds() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schema/report-v1.schema.json")).unwrap();
        let names = |enumeration: &serde_json::Value| -> Vec<String> {
            enumeration
                .as_array()
                .expect("an enum")
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect()
        };
        let ours: Vec<String> = CHECKS.iter().map(|c| c.kind.as_str().to_string()).collect();
        let defs = &schema["$defs"];
        assert_eq!(names(&defs["finding"]["properties"]["kind"]["enum"]), ours);
        assert_eq!(
            names(&defs["advisory"]["properties"]["kinds"]["items"]["enum"]),
            ours
        );
        // Each kind's evidence is described by one `if kind == ...` branch.
        let described: Vec<String> = defs["finding"]["allOf"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|b| b["if"]["properties"]["kind"]["const"].as_str())
            .map(str::to_string)
            .collect();
        for kind in &ours {
            assert!(
                described.contains(kind),
                "the schema has no evidence for {kind}"
            );
        }
    }

    #[test]
    fn readme_describes_every_registered_kind_in_order() {
        let findings = include_str!("../../docs/findings.md");
        let headings: Vec<&str> = findings
            .lines()
            .filter_map(|l| l.strip_prefix("## `"))
            .filter_map(|l| l.split_once('`'))
            .map(|(kind, _)| kind)
            .collect();
        let ours: Vec<&str> = CHECKS.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(headings, ours);
        let listed = include_str!("../../docs/json.md")
            .split_once("- `kind`: ")
            .and_then(|(_, rest)| rest.split_once(".\n"))
            .expect("docs/json.md lists the kinds of the JSON output")
            .0
            .replace("\n  ", " ");
        for kind in ours {
            assert!(listed.contains(&format!("`{kind}`")), "{listed}");
        }
    }

    #[test]
    fn only_the_checks_that_confirm_ask_for_a_second_look() {
        let confirming: Vec<Kind> = CHECKS
            .iter()
            .filter(|c| c.second_look.is_some())
            .map(|c| c.kind)
            .collect();
        assert_eq!(confirming, [Kind::Zombie, Kind::ShimBlocked]);
    }

    #[test]
    fn a_check_could_not_check_only_when_a_source_it_reads_was_unavailable() {
        use crate::model::Source;
        let blind = |gap: Gap| -> Vec<Kind> {
            CHECKS
                .iter()
                .filter(|c| !c.could_check(std::slice::from_ref(&gap)))
                .map(|c| c.kind)
                .collect()
        };
        assert_eq!(
            blind(Gap::source(Source::CriStore, "/x", "gone")),
            Kind::ALL
        );
        assert_eq!(
            blind(Gap::item(Source::CriStore, "/x/status", "corrupt")),
            []
        );
        // Zombies and late exits are found in the files and procfs (the
        // API only names them); blocked shims never ask it.
        assert_eq!(
            blind(Gap::source(Source::ContainerdApi, "/sock", "down")),
            [
                Kind::LeakedShim,
                Kind::LeakedMount,
                Kind::OrphanBundle,
                Kind::LeakedSnapshot,
                Kind::LeakedIp,
                Kind::LeakedSandbox,
                Kind::DuplicateSandboxName,
                Kind::OrphanPodDir,
                Kind::LeakedPodCgroup,
                Kind::FailingSandbox,
                Kind::LeakedNetns,
                Kind::CriDrift,
                Kind::CriSlow,
                Kind::ApiUnreachable,
            ]
        );
        assert_eq!(
            blind(Gap::source(Source::Mountinfo, "/m", "gone")),
            [Kind::LeakedMount, Kind::LeakedNetns]
        );
        assert_eq!(
            blind(Gap::source(Source::Cni, "/c", "gone")),
            [Kind::LeakedIp]
        );
        // kubelet's pods and its pod cgroups (a DaemonSet that mounts
        // neither): every kind that judges kubelet's objects.
        assert_eq!(
            blind(Gap::source(
                Source::Kubelet,
                "/var/lib/kubelet/pods",
                "hidden"
            )),
            [
                Kind::OrphanPodDir,
                Kind::LeakedPodCgroup,
                Kind::FailingSandbox
            ]
        );
    }
}
