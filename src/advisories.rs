//! Known containerd bugs by version: which ones the node's containerd has,
//! and which findings they explain.
//!
//! Every range was checked against containerd's release tags (the fix
//! commit's first tag in each release line); see docs/advisories.md.
//! Distribution packages may carry a fix under an older number: the advice
//! names upstream's releases.

use serde::Serialize;

use crate::model::{Finding, Kind};

/// One known bug.
pub struct Advisory {
    /// `containerd#<issue>`: what the evidence and the report name it by.
    pub id: &'static str,
    /// Issues and pull requests upstream, the fixes among them.
    pub upstream: &'static [&'static str],
    /// Affected versions: `[first, first fixed)` per release line.
    pub affected: &'static [(&'static str, &'static str)],
    /// The first release of each line with the fix; empty when none has it.
    pub fixed_in: &'static [&'static str],
    pub symptom: &'static str,
    /// The findings it explains.
    pub kinds: &'static [Kind],
    /// How it brought such a finding about, added to the finding's cause
    /// when it applies (empty: the finding's own cause says enough).
    pub cause: &'static str,
    /// What to do about it beyond the finding's own remedy, added likewise.
    pub remedy: &'static str,
}

/// containerd#10589: the runc shim loses an init exit to an exec being
/// started; the zombie check tells its story when it applies.
pub const EXIT_LOST_TO_EXEC: &str = "containerd#10589";

/// The newest release the open bugs below were checked against.
const CHECKED_UP_TO: &str = "2.3.4";

pub const ADVISORIES: &[Advisory] = &[
    Advisory {
        id: "containerd#7496",
        upstream: &[
            "containerd#7496",
            "containerd#8931",
            "containerd#8954",
            "containerd#9003",
            "containerd#9004",
        ],
        affected: &[("0.0.0", "1.6.24"), ("1.7.0", "1.7.4")],
        fixed_in: &["1.6.24", "1.7.4", "2.0.0"],
        symptom: "task.Delete gives up after 10 s while the shim's umount2 is slow; the shim \
                  completes the delete, forgets the task and is never shut down: leaked shims",
        kinds: &[Kind::LeakedShim],
        cause: "a task delete gave up at its 10 s deadline while the shim's umount2 was slow \
                (disk I/O pressure); the shim finished the delete afterwards, and containerd's \
                retry, finding no task, sent no Shutdown.",
        remedy: "Relieve the node's disk I/O pressure, or these keep piling up.",
    },
    Advisory {
        id: "containerd#9309",
        upstream: &["containerd#9309", "containerd#9344", "containerd#9345"],
        affected: &[("1.6.24", "1.6.25"), ("1.7.4", "1.7.9")],
        fixed_in: &["1.6.25", "1.7.9"],
        symptom: "the #7496 fix broke the v1 shim (io.containerd.runtime.v1.linux): a retried \
                  Delete fails and the shim is never shut down: leaked shims",
        kinds: &[Kind::LeakedShim],
        cause: "with the v1 shim (io.containerd.runtime.v1.linux), a retried delete fails \
                and no Shutdown is sent.",
        remedy: "",
    },
    Advisory {
        id: EXIT_LOST_TO_EXEC,
        upstream: &[
            "containerd#10589",
            "containerd#10651",
            "containerd#10675",
            "containerd#10676",
        ],
        affected: &[("1.6.29", "1.6.36"), ("1.7.14", "1.7.22")],
        fixed_in: &["1.6.36", "1.7.22", "2.0.0"],
        symptom: "the runc shim drops the init process's exit while an exec is starting: the \
                  container stays RUNNING with its process gone, every StopContainer times out \
                  and its pod stays Terminating",
        kinds: &[Kind::Zombie],
        cause: "",
        remedy: "",
    },
    Advisory {
        id: "containerd#9770",
        upstream: &[
            "containerd#9770",
            "containerd#10583",
            "containerd#9771 (not merged)",
            "containerd#11300 (not merged)",
        ],
        affected: &[("0.0.0", "2.3.5")],
        fixed_in: &[],
        symptom: "UpdateContainerResources holds the container's status lock while task.Update \
                  waits on a shim stuck in umount2; ListContainers waits on that lock and \
                  kubelet's PLEG goes NotReady",
        kinds: &[Kind::CriSlow],
        cause: "",
        remedy: "",
    },
    Advisory {
        id: "containerd#12344",
        upstream: &[
            "containerd#12344",
            "containerd#12400",
            "containerd#12406",
            "containerd#12410",
        ],
        affected: &[("2.0.0", "2.0.7"), ("2.1.0", "2.1.5")],
        fixed_in: &["2.0.7", "2.1.5", "2.2.0"],
        symptom: "the podsandbox controller's event monitor and its exit waiter both call \
                  task.Delete on a sandbox; the loser's Shutdown goes nowhere: leaked shims",
        kinds: &[Kind::LeakedShim],
        cause: "two deletes of a pod sandbox's task raced (the podsandbox controller's \
                event monitor and its exit waiter); the one that failed \"not found\" sent \
                Shutdown before the other had made the shim forget the sandbox, and closed \
                the shim's connection.",
        remedy: "Every pod removal can leak one: upgrade.",
    },
    // Read in the source of 2.0.0, 2.0.6, 2.0.11, 2.1.0, 2.2.0 and 2.3.4:
    // CRI creates a pod's containers `WithSandbox`, so their tasks join the
    // sandbox's shim and their deletes are `sandboxed` (shimTask.delete
    // sends no Shutdown); only the sandbox's delete sends one, and the runc
    // shim ignores it while `len(s.containers) > 0`. 1.7's default CRI
    // (pkg/cri/server) sets no sandbox, so each delete sends Shutdown.
    Advisory {
        id: "containerd#10421",
        upstream: &[
            "containerd#10421",
            "containerd#11029",
            "containerd#11077 (not merged)",
        ],
        affected: &[("2.0.0", "2.3.5")],
        fixed_in: &[],
        symptom: "when a pod's sandbox process dies before the pod's containers' tasks are \
                  deleted (an OOM kill or kill -9 of the pause process, every process of the \
                  pod killed at once), the sandbox's delete sends the pod's shim a Shutdown it \
                  ignores while it holds a container, and a container's delete sends none: \
                  leaked shims",
        kinds: &[Kind::LeakedShim],
        cause: "a pod's containers run in its sandbox's shim, and only the sandbox's task \
                delete sends that shim Shutdown (a container's sends none): when the sandbox's \
                process died while a container of the pod still ran, or in the same instant \
                (the OOM killer, kill -9), the Shutdown came while the shim still held the \
                container, and none followed.",
        remedy: "Each death of a pod's sandbox (pause) process leaks one: find what kills \
                 them (the kernel log names the OOM killer's victims).",
    },
    Advisory {
        id: "containerd#13609",
        upstream: &[
            "containerd#13609",
            "containerd#13399",
            "containerd#13644",
            "containerd#13645",
        ],
        affected: &[("2.0.0", "2.2.6"), ("2.3.0", "2.3.3")],
        fixed_in: &["2.2.6", "2.3.3"],
        symptom: "a RunPodSandbox that fails after its sandbox started (an NRI plugin rejects \
                  it) leaves the sandbox container; kubelet's retry makes a second with the \
                  same CRI name, and containerd's next start-up exits on it",
        kinds: &[Kind::DuplicateSandboxName],
        cause: "this release does not shut a sandbox down when RunPodSandbox fails after \
                StartSandbox (an NRI plugin's RunPodSandbox rejecting the pod is the known \
                trigger).",
        remedy: "Until the upgrade, a failing NRI plugin makes more of these: find why it \
                 rejects pods.",
    },
    Advisory {
        id: "containerd#13848",
        upstream: &[
            "containerd#13848",
            "containerd#13954 (merged after 2.3.4, unreleased)",
        ],
        affected: &[("1.7.0", "2.3.5")],
        fixed_in: &[],
        symptom: "on start, containerd deletes a leftover shim without a deadline; a shim that \
                  never answers hangs containerd's start-up and its API stays unreachable",
        kinds: &[Kind::ApiUnreachable],
        cause: "",
        remedy: "",
    },
];

/// An advisory as a report lists it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Applied {
    pub id: String,
    pub symptom: String,
    pub upstream: Vec<String>,
    pub kinds: Vec<Kind>,
    pub fixed_in: Vec<String>,
    /// What to do, e.g. "fixed in 2.0.7, upgrade".
    pub advice: String,
    /// The release to upgrade to: the first with the fix after the node's
    /// version; none when no release fixes it. Said in `advice`.
    #[serde(skip)]
    pub fix: Option<Version>,
    /// [`Advisory::cause`] and [`Advisory::remedy`], for [`annotate`]: the
    /// findings carry them, the list of advisories does not.
    #[serde(skip)]
    cause: &'static str,
    #[serde(skip)]
    remedy: &'static str,
}

/// A containerd version, from `1.7.34`, `v2.3.4`, `1.6.20~ds1-1` (Debian),
/// `1.7.27-0ubuntu1`, `1.7.34+unknown`. What follows the third number
/// (distribution revision, pre-release) is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(u32, u32, u32);

impl Version {
    pub fn parse(text: &str) -> Option<Version> {
        let text = text.trim();
        let mut rest = text.strip_prefix('v').unwrap_or(text);
        let mut numbers = [0u32; 3];
        for (i, number) in numbers.iter_mut().enumerate() {
            if i > 0 {
                rest = rest.strip_prefix('.')?;
            }
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            *number = rest[..end].parse().ok()?;
            rest = &rest[end..];
        }
        Some(Version(numbers[0], numbers[1], numbers[2]))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

fn version(text: &str) -> Version {
    Version::parse(text).expect("the advisory table holds valid versions")
}

impl Advisory {
    pub fn affects(&self, node: Version) -> bool {
        self.affected
            .iter()
            .any(|(first, fixed)| version(first) <= node && node < version(fixed))
    }

    /// The release to move to: the first fixed one after the node's, which
    /// is the fix in its own release line when that line has one.
    fn first_fix(&self, node: Version) -> Option<Version> {
        self.fixed_in
            .iter()
            .map(|v| version(v))
            .filter(|v| *v > node)
            .min()
    }

    fn advice(&self, node: Version) -> String {
        match self.first_fix(node) {
            Some(fix) => format!("fixed in {fix}, upgrade"),
            None => format!("no release fixes it (checked up to {CHECKED_UP_TO})"),
        }
    }

    fn applied(&self, node: Version) -> Applied {
        Applied {
            id: self.id.to_string(),
            symptom: self
                .symptom
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            upstream: self.upstream.iter().map(|s| s.to_string()).collect(),
            kinds: self.kinds.to_vec(),
            fixed_in: self.fixed_in.iter().map(|s| s.to_string()).collect(),
            advice: self.advice(node),
            fix: self.first_fix(node),
            cause: self.cause,
            remedy: self.remedy,
        }
    }
}

/// The advisories that apply to `version`; none when it is unknown or
/// cannot be parsed (guessing would blame the wrong bug).
pub fn applying(version: Option<&str>) -> Vec<Applied> {
    let Some(node) = version.and_then(Version::parse) else {
        return Vec::new();
    };
    ADVISORIES
        .iter()
        .filter(|a| a.affects(node))
        .map(|a| a.applied(node))
        .collect()
}

/// The advisory `id` if it applies to `version` (see [`applying`]).
pub fn applied(id: &str, version: Option<&str>) -> Option<Applied> {
    applying(version).into_iter().find(|a| a.id == id)
}

/// Adds `advisory` ("containerd#12344: fixed in 2.0.7, upgrade") to the
/// evidence of each finding an applying advisory explains, and what that
/// advisory says of how it came about and what to do to the finding's cause
/// and remedy: a cause follows the evidence, and on a containerd with two
/// bugs that explain it, both are named.
pub fn annotate(findings: &mut [Finding], applied: &[Applied]) {
    for finding in findings {
        let explaining: Vec<&Applied> = applied
            .iter()
            .filter(|a| a.kinds.contains(&finding.kind))
            .collect();
        if explaining.is_empty() {
            continue;
        }
        let notes: Vec<String> = explaining
            .iter()
            .map(|a| format!("{}: {}", a.id, a.advice))
            .collect();
        if let Some(evidence) = finding.evidence.as_object_mut() {
            evidence.insert("advisory".to_string(), notes.join("; ").into());
        }
        for advisory in &explaining {
            if !advisory.cause.is_empty() {
                let cause = format!(" {} can do it here: {}", advisory.id, advisory.cause);
                finding.cause.push_str(&cause);
            }
            if !advisory.remedy.is_empty() {
                finding.remedy.push(' ');
                finding.remedy.push_str(advisory.remedy);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Severity;

    fn ids(version: &str) -> Vec<String> {
        applying(Some(version)).into_iter().map(|a| a.id).collect()
    }

    #[test]
    fn versions_of_every_shape_are_parsed() {
        for (text, expected) in [
            ("1.7.34", Version(1, 7, 34)),
            ("v2.3.4", Version(2, 3, 4)),
            ("1.6.20~ds1-1", Version(1, 6, 20)),
            ("1.6.20~ds1", Version(1, 6, 20)),
            ("1.7.27-0ubuntu1", Version(1, 7, 27)),
            ("1.7.34+unknown", Version(1, 7, 34)),
            (" v1.7.0 ", Version(1, 7, 0)),
        ] {
            assert_eq!(Version::parse(text), Some(expected), "{text}");
        }
        for junk in [
            "",
            "unknown",
            "v",
            "1.7",
            "1..2",
            "x1.2.3",
            "1.7.x",
            "99999999999.1.1",
        ] {
            assert_eq!(Version::parse(junk), None, "{junk}");
        }
        assert!(Version::parse("1.6.9").unwrap() < Version::parse("1.6.10").unwrap());
    }

    #[test]
    fn ranges_start_at_the_first_affected_and_stop_at_the_first_fixed_release() {
        assert_eq!(ids("1.6.23"), ["containerd#7496", "containerd#9770"]);
        assert_eq!(ids("1.6.24"), ["containerd#9309", "containerd#9770"]);
        assert_eq!(ids("1.6.25"), ["containerd#9770"]);
        assert_eq!(ids("1.6.28"), ["containerd#9770"]);
        assert_eq!(ids("1.6.29"), ["containerd#10589", "containerd#9770"]);
        assert_eq!(ids("1.6.35"), ["containerd#10589", "containerd#9770"]);
        assert_eq!(ids("1.6.36"), ["containerd#9770"]);
        assert_eq!(
            ids("v1.7.3"),
            ["containerd#7496", "containerd#9770", "containerd#13848"]
        );
        assert_eq!(
            ids("1.7.8"),
            ["containerd#9309", "containerd#9770", "containerd#13848"]
        );
        assert_eq!(ids("1.7.13"), ["containerd#9770", "containerd#13848"]);
        assert_eq!(
            ids("1.7.21"),
            ["containerd#10589", "containerd#9770", "containerd#13848"]
        );
        assert_eq!(ids("1.7.22"), ["containerd#9770", "containerd#13848"]);
        assert_eq!(ids("1.7.34"), ["containerd#9770", "containerd#13848"]);
        assert_eq!(
            ids("2.0.0"),
            [
                "containerd#9770",
                "containerd#12344",
                "containerd#10421",
                "containerd#13609",
                "containerd#13848"
            ]
        );
        assert_eq!(
            ids("2.0.6"),
            [
                "containerd#9770",
                "containerd#12344",
                "containerd#10421",
                "containerd#13609",
                "containerd#13848"
            ]
        );
        assert_eq!(
            ids("2.0.7"),
            [
                "containerd#9770",
                "containerd#10421",
                "containerd#13609",
                "containerd#13848"
            ]
        );
        assert_eq!(
            ids("2.1.4"),
            [
                "containerd#9770",
                "containerd#12344",
                "containerd#10421",
                "containerd#13609",
                "containerd#13848"
            ]
        );
        assert_eq!(
            ids("2.2.5"),
            [
                "containerd#9770",
                "containerd#10421",
                "containerd#13609",
                "containerd#13848"
            ]
        );
        assert_eq!(
            ids("2.2.6"),
            ["containerd#9770", "containerd#10421", "containerd#13848"]
        );
        assert_eq!(
            ids("2.3.2"),
            [
                "containerd#9770",
                "containerd#10421",
                "containerd#13609",
                "containerd#13848"
            ]
        );
        assert_eq!(
            ids("v2.3.4"),
            ["containerd#9770", "containerd#10421", "containerd#13848"]
        );
        // Past what was checked: nothing is claimed.
        assert!(ids("2.3.5").is_empty());
        assert!(ids("2.4.0").is_empty());
        assert!(applying(None).is_empty());
        assert!(applying(Some("abc")).is_empty());
    }

    #[test]
    fn the_advice_names_the_fix_of_the_nodes_own_release_line() {
        let advice = |v: &str, id: &str| {
            applying(Some(v))
                .into_iter()
                .find(|a| a.id == id)
                .unwrap()
                .advice
        };
        assert_eq!(
            advice("2.0.3", "containerd#12344"),
            "fixed in 2.0.7, upgrade"
        );
        assert_eq!(
            advice("2.1.0", "containerd#12344"),
            "fixed in 2.1.5, upgrade"
        );
        assert_eq!(
            advice("1.7.2", "containerd#7496"),
            "fixed in 1.7.4, upgrade"
        );
        // An older line than any fix: the first fixed release after it.
        assert_eq!(
            advice("1.5.9", "containerd#7496"),
            "fixed in 1.6.24, upgrade"
        );
        assert_eq!(
            advice("1.7.20", "containerd#9770"),
            "no release fixes it (checked up to 2.3.4)"
        );
    }

    #[test]
    fn one_advisory_is_looked_up_with_the_release_to_upgrade_to() {
        let fix = |v: &str| applied(EXIT_LOST_TO_EXEC, Some(v)).map(|a| a.fix);
        assert_eq!(fix("v1.7.21"), Some(Some(Version(1, 7, 22))));
        assert_eq!(fix("1.6.30~ds1-1"), Some(Some(Version(1, 6, 36))));
        assert_eq!(fix("1.7.22"), None, "fixed: it does not apply");
        assert_eq!(applied(EXIT_LOST_TO_EXEC, None), None);
        let open = applied("containerd#9770", Some("2.3.4")).unwrap();
        assert_eq!(open.fix, None);
    }

    fn finding(kind: Kind) -> Finding {
        Finding {
            kind,
            severity: Severity::Critical,
            id: "x".repeat(64),
            summary: "s".to_string(),
            evidence: serde_json::json!({"shim_pid": 7}),
            cause: "c".to_string(),
            remedy: "r".to_string(),
        }
    }

    #[test]
    fn only_findings_an_applying_advisory_explains_get_the_evidence() {
        let mut findings = vec![finding(Kind::LeakedShim), finding(Kind::LeakedMount)];
        annotate(&mut findings, &applying(Some("2.0.3")));
        assert_eq!(
            findings[0].evidence["advisory"],
            "containerd#12344: fixed in 2.0.7, upgrade; \
             containerd#10421: no release fixes it (checked up to 2.3.4)"
        );
        assert_eq!(findings[0].evidence["shim_pid"], 7);
        assert!(findings[1].evidence.get("advisory").is_none());
        assert_eq!(findings[1].cause, "c");
        assert_eq!(findings[1].remedy, "r");

        let mut findings = vec![finding(Kind::LeakedShim)];
        annotate(&mut findings, &applying(Some("1.7.34")));
        assert!(findings[0].evidence.get("advisory").is_none());
        assert_eq!(findings[0].cause, "c");
    }

    #[test]
    fn each_explaining_advisory_adds_how_it_did_it_and_what_to_do_in_table_order() {
        let mut findings = vec![finding(Kind::LeakedShim)];
        annotate(&mut findings, &applying(Some("2.0.3")));
        let f = &findings[0];
        let racing = f
            .cause
            .find(" containerd#12344 can do it here: two deletes");
        let dying = f
            .cause
            .find(" containerd#10421 can do it here: a pod's containers");
        assert!(f.cause.starts_with("c containerd#12344"), "{}", f.cause);
        assert!(racing.is_some() && racing < dying, "{}", f.cause);
        assert_eq!(
            f.remedy,
            "r Every pod removal can leak one: upgrade. Each death of a pod's sandbox \
             (pause) process leaks one: find what kills them (the kernel log names the OOM \
             killer's victims)."
        );

        // An advisory with nothing of its own to add (#10589 for a zombie)
        // names itself in the evidence and leaves the words as they were.
        let mut findings = vec![finding(Kind::Zombie)];
        annotate(&mut findings, &applying(Some("1.7.21")));
        assert_eq!(
            findings[0].evidence["advisory"],
            "containerd#10589: fixed in 1.7.22, upgrade"
        );
        assert_eq!((&*findings[0].cause, &*findings[0].remedy), ("c", "r"));
    }
}
