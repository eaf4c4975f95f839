//! The report: what a command found, the gaps it hit and which containerd it
//! looked at. Every renderer and the exit code start from here.

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde::Serialize;

use crate::advisories::{self, Applied};
use crate::exit_codes;
use crate::inert::{cap_in_place, cap_value, STRING_CAP};
use crate::model::{
    Action, ApiCall, Cleanup, ContainerdVersion, Finding, Gap, Kind, NodeContext, Paths, Severity,
    ShimRow, Source,
};

/// Bumped when a field of the JSON output changes meaning or disappears;
/// new fields may appear without a bump.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub command: String,
    pub generated_at: String,
    pub namespace: String,
    pub paths: Paths,
    /// The containerd version and where it came from.
    pub containerd: ContainerdVersion,
    /// Known bugs of that version, whether or not a finding shows one.
    pub advisories: Vec<Applied>,
    pub findings: Vec<Finding>,
    /// Findings left out, by kind, past [`FINDINGS_PER_KIND`].
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub findings_omitted: BTreeMap<String, usize>,
    /// `shims`: rows left out past [`OTHER_SHIMS_LISTED`] of shims that are
    /// not this containerd's (anyone can start a process named like one).
    #[serde(skip_serializing_if = "is_zero")]
    pub shims_omitted: usize,
    /// The same, by severity (critical, warning), for Prometheus.
    #[serde(skip)]
    pub omitted_by_severity: [usize; 2],
    pub gaps: Vec<Gap>,
    /// `leaked-shims`: what was done (or, without --kill, would be done).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
    /// `leaked-mounts --unmount / --remove-bundles`: what was done (or,
    /// without --yes, would be done).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cleanups: Vec<Cleanup>,
    /// `check`: the node's I/O context and containerd's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<NodeContext>,
    /// `check`: the API calls made, with their latency (ContainerStatus
    /// probes only when slow or failed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_calls: Vec<ApiCall>,
    /// `shims`: the inventory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shims: Option<Vec<ShimRow>>,
    /// `check`, `leaked-ips`: how much of each CNI network's range
    /// host-local holds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pod_addresses: Vec<crate::model::AddressUse>,
    /// `check`, `leaked-ips`: whose word the networks judged are, CRI's
    /// own or the config files' (and why CRI's was not taken).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cni_networks_from: Option<crate::model::NetworksFrom>,
    /// `check`: the kubelet nodectl judged kubelet's kinds by (absent when
    /// none was found or its sources were not read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<crate::model::KubeletFacts>,
    /// `check`: what `watch`'s flight recorder re-reads of this look's
    /// zombies until its next look (not output).
    #[serde(skip)]
    pub sample_basis: crate::model::SampleBasis,
}

impl Report {
    pub fn new(
        command: &str,
        namespace: &str,
        paths: Paths,
        findings: Vec<Finding>,
        gaps: Vec<Gap>,
    ) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            command: command.to_string(),
            generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            namespace: namespace.to_string(),
            paths,
            containerd: ContainerdVersion::default(),
            advisories: Vec::new(),
            findings,
            findings_omitted: BTreeMap::new(),
            shims_omitted: 0,
            omitted_by_severity: [0; 2],
            gaps,
            actions: Vec::new(),
            cleanups: Vec::new(),
            context: None,
            api_calls: Vec::new(),
            shims: None,
            pod_addresses: Vec::new(),
            cni_networks_from: None,
            kubelet: None,
            sample_basis: Default::default(),
        }
    }

    /// Names the containerd version, lists its known bugs and marks the
    /// findings they explain.
    pub fn identified(mut self, containerd: ContainerdVersion) -> Report {
        self.advisories = advisories::applying(containerd.version.as_deref());
        advisories::annotate(&mut self.findings, &self.advisories);
        self.containerd = containerd;
        self
    }

    /// Counts `count` findings of `kind` that a command left out unbuilt
    /// (past [`FINDINGS_PER_KIND`], which [`Report::within_limits`] would drop),
    /// as `within_limits` counts those it drops.
    pub fn omitting(mut self, kind: Kind, severity: Severity, count: usize) -> Report {
        if count > 0 {
            *self
                .findings_omitted
                .entry(kind.as_str().to_string())
                .or_default() += count;
            self.omitted_by_severity[usize::from(severity != Severity::Critical)] += count;
        }
        self
    }

    /// Caps what the node put in the report, so that no tenant (who chooses
    /// shim argv, annotations, status reasons) can make it unbounded: each
    /// string at [`STRING_CAP`] bytes (cut with a `…(+N bytes)` mark), and
    /// the findings of one kind at [`FINDINGS_PER_KIND`] (the first ones
    /// kept, the rest counted in `findings_omitted`). Every output renders
    /// the bounded report.
    pub fn within_limits(mut self) -> Report {
        let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut omitted = std::mem::take(&mut self.findings_omitted);
        let mut by_severity = self.omitted_by_severity;
        self.findings.retain(|f| {
            let n = seen.entry(f.kind.as_str()).or_default();
            *n += 1;
            if *n > FINDINGS_PER_KIND {
                *omitted.entry(f.kind.as_str().to_string()).or_default() += 1;
                by_severity[usize::from(f.severity != Severity::Critical)] += 1;
            }
            *n <= FINDINGS_PER_KIND
        });
        self.findings_omitted = omitted;
        self.omitted_by_severity = by_severity;
        let cap = |s: &mut String| cap_in_place(s, STRING_CAP);
        for finding in &mut self.findings {
            cap(&mut finding.id);
            cap(&mut finding.summary);
            cap_value(&mut finding.evidence, STRING_CAP);
        }
        if self.gaps.len() > GAPS_CAP {
            let rest = self.gaps.len() - GAPS_CAP;
            self.gaps.truncate(GAPS_CAP);
            self.gaps.push(Gap::item(
                Source::Nodectl,
                "",
                format!("{rest} more gaps left out (at most {GAPS_CAP} are listed)"),
            ));
        }
        for gap in &mut self.gaps {
            cap(&mut gap.error);
            cap_path(&mut gap.path);
        }
        for call in &mut self.api_calls {
            call.target.as_mut().map(cap);
            call.error.as_mut().map(cap);
        }
        for action in &mut self.actions {
            cap(&mut action.shim_id);
            cap(&mut action.detail);
            action.remains.iter_mut().for_each(cap);
        }
        for cleanup in &mut self.cleanups {
            cap(&mut cleanup.id);
            cap(&mut cleanup.detail);
            cap_path(&mut cleanup.path);
        }
        for shim in self.shims.iter_mut().flatten() {
            for field in [
                &mut shim.namespace,
                &mut shim.id,
                &mut shim.address,
                &mut shim.action,
                &mut shim.bundle_dir,
                &mut shim.socket,
                &mut shim.pod.pod_namespace,
                &mut shim.pod.pod_name,
                &mut shim.pod.container_name,
            ] {
                field.as_mut().map(cap);
            }
            cap(&mut shim.binary);
            shim.blocked_in.iter_mut().for_each(cap);
        }
        self.containerd.version.as_mut().map(cap);
        if let Some(context) = &mut self.context {
            context.containerd_version.as_mut().map(cap);
        }
        self
    }

    /// How many findings of `kind` there were, those left out included.
    pub fn count(&self, kind: &str) -> usize {
        self.findings
            .iter()
            .filter(|f| f.kind.as_str() == kind)
            .count()
            + self.findings_omitted.get(kind).copied().unwrap_or(0)
    }

    /// 1 when something was found; otherwise 2 when part of the node could not
    /// be checked; 0 when everything was checked and nothing found.
    pub fn exit_code(&self) -> ExitCode {
        exit_codes::exit(
            if !self.findings.is_empty() || !self.findings_omitted.is_empty() {
                exit_codes::FOUND
            } else if !self.gaps.is_empty() {
                exit_codes::COULD_NOT_CHECK
            } else {
                exit_codes::NOTHING_FOUND
            },
        )
    }
}

/// Findings of one kind a report lists: a node with more leaked shims than
/// this needs the count, not each one (a leak is usually one cause).
pub const FINDINGS_PER_KIND: usize = 200;

/// Gaps a report lists: one per unreadable item, so bounded like findings.
pub const GAPS_CAP: usize = 1000;

fn cap_path(path: &mut std::path::PathBuf) {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() > STRING_CAP {
        let mut cut = bytes[..STRING_CAP].to_vec();
        cut.extend_from_slice(format!("…(+{} bytes)", bytes.len() - STRING_CAP).as_bytes());
        *path = std::ffi::OsString::from_vec(cut).into();
    }
}

/// How many inventory rows of shims that are not this containerd's a report
/// lists; this containerd's own are all listed.
pub const OTHER_SHIMS_LISTED: usize = 200;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::leaked_shim;
    use crate::model::fixtures::*;
    use crate::model::VersionSource;

    /// The leaked-shim finding `leaked-shims` shows for one shim with no
    /// record, on a containerd of `version`.
    fn leaked_shim_on(version: Option<&str>) -> Finding {
        let mut s = snapshot();
        s.shims.push(shim(500, &id('s'), ADDRESS, &["futex"]));
        s.processes.insert(500, process(500, 'S', NOW - 60 * SEC));
        with_records(&mut s, &[]);
        let report = Report::new(
            "leaked-shims",
            "k8s.io",
            s.paths.clone(),
            leaked_shim::check(&s),
            vec![],
        )
        .identified(ContainerdVersion {
            version: version.map(str::to_string),
            source: VersionSource::Api,
        });
        assert_eq!(report.findings.len(), 1);
        report.findings[0].clone()
    }

    #[test]
    fn a_leaked_shims_cause_and_remedy_are_those_of_the_bugs_its_containerd_has() {
        // 2.1 and later: only the sandbox's death ordering (no fix yet).
        let f = leaked_shim_on(Some("v2.3.4"));
        assert_eq!(
            f.evidence["advisory"],
            "containerd#10421: no release fixes it (checked up to 2.3.4)"
        );
        assert!(
            f.cause
                .contains("containerd#10421 can do it here: a pod's containers run in"),
            "{}",
            f.cause
        );
        for other in ["#12344", "#7496", "disk I/O", "umount2"] {
            assert!(!f.cause.contains(other), "{other}: {}", f.cause);
            assert!(!f.remedy.contains(other), "{other}: {}", f.remedy);
        }
        assert!(f.remedy.contains("sandbox (pause) process"), "{}", f.remedy);

        // 2.0.0 to 2.0.6: the racing deletes as well, named first.
        let f = leaked_shim_on(Some("2.0.6"));
        assert_eq!(
            f.evidence["advisory"],
            "containerd#12344: fixed in 2.0.7, upgrade; \
             containerd#10421: no release fixes it (checked up to 2.3.4)"
        );
        let racing = f.cause.find("containerd#12344 can do it here: two deletes");
        let dying = f.cause.find("containerd#10421 can do it here:");
        assert!(racing.is_some() && racing < dying, "{}", f.cause);
        assert!(f.remedy.contains("upgrade"), "{}", f.remedy);
        assert!(!f.cause.contains("disk I/O"), "{}", f.cause);

        // 1.6.20: the slow unmount, and the disk I/O pressure behind it.
        let f = leaked_shim_on(Some("1.6.20~ds1"));
        assert!(
            f.cause.contains("containerd#7496 can do it here:")
                && f.cause.contains("disk I/O pressure"),
            "{}",
            f.cause
        );
        assert!(
            f.remedy
                .ends_with("Relieve the node's disk I/O pressure, or these keep piling up."),
            "{}",
            f.remedy
        );
        assert!(!f.cause.contains("#10421"), "{}", f.cause);

        // No known bug (1.7.34, or a version nodectl could not read): how a
        // shim is left behind, and how to end it, blaming no bug.
        for version in [Some("1.7.34"), None] {
            let f = leaked_shim_on(version);
            assert!(f.evidence.get("advisory").is_none(), "{:?}", f.evidence);
            assert!(!f.cause.contains("can do it here"), "{}", f.cause);
            assert!(f.cause.contains("Shutdown"), "{}", f.cause);
            assert_eq!(
                f.remedy,
                "Safe to end: run `nodectl leaked-shims --kill`, which re-checks each shim \
                 and signals it through a pidfd."
            );
        }
    }
}
