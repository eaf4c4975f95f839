//! The report: what a command found, the gaps it hit and which containerd it
//! looked at. Every renderer and the exit code start from here.

use std::process::ExitCode;

use serde::Serialize;

use crate::act::kill::Action;
use crate::advisories::{self, Applied};
use crate::checks::Finding;
use crate::commands::shims::ShimRow;
use crate::paths::Paths;
use crate::snapshot::{ContainerdVersion, Gap};
use crate::sources::api::ApiCall;
use crate::sources::node::NodeContext;

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
    pub gaps: Vec<Gap>,
    /// `leaked-shims`: what was done (or, without --kill, would be done).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
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
            gaps,
            actions: Vec::new(),
            context: None,
            api_calls: Vec::new(),
            shims: None,
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

    /// 1 when something was found; otherwise 2 when part of the node could not
    /// be checked; 0 when everything was checked and nothing found.
    pub fn exit_code(&self) -> ExitCode {
        if !self.findings.is_empty() {
            ExitCode::from(1)
        } else if !self.gaps.is_empty() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        }
    }
}
