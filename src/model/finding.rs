//! What a check found: a finding of one kind and severity, with evidence.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Something is broken now: a pod is wedged, a resource leaks.
    Critical,
    /// Evidence of a past failure, or a risk.
    Warning,
}

/// What a finding is about. Its name (in JSON, Prometheus and tables) is
/// [`Kind::as_str`]'s, and nowhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Zombie,
    LateExit,
    LeakedShim,
    LeakedMount,
    OrphanBundle,
    LeakedSnapshot,
    CriDrift,
    CriSlow,
    ShimBlocked,
    ApiUnreachable,
}

impl Kind {
    /// Every kind, in the order of the check registry
    /// (`checks::registry::CHECKS`, which a test holds to it).
    pub const ALL: [Kind; 10] = [
        Kind::Zombie,
        Kind::LateExit,
        Kind::LeakedShim,
        Kind::LeakedMount,
        Kind::OrphanBundle,
        Kind::LeakedSnapshot,
        Kind::CriDrift,
        Kind::CriSlow,
        Kind::ShimBlocked,
        Kind::ApiUnreachable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Zombie => "zombie",
            Kind::LateExit => "late-exit",
            Kind::LeakedShim => "leaked-shim",
            Kind::LeakedMount => "leaked-mount",
            Kind::OrphanBundle => "orphan-bundle",
            Kind::LeakedSnapshot => "leaked-snapshot",
            Kind::CriDrift => "cri-drift",
            Kind::CriSlow => "cri-slow",
            Kind::ShimBlocked => "shim-blocked",
            Kind::ApiUnreachable => "api-unreachable",
        }
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One thing found wrong, with everything an operator needs to act on it.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub severity: Severity,
    /// The full id of the container (or shim, mount, ...) the finding is about.
    pub id: String,
    /// What is wrong, in one line.
    pub summary: String,
    /// The facts behind it; keys are stable per kind (see README).
    pub evidence: Value,
    /// The likely cause.
    pub cause: String,
    /// What to do.
    pub remedy: String,
}

/// How a check knows whether containerd still owns an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// containerd's Containers.List answered.
    ContainerdApi,
    /// The API did not answer; inferred from CRI's and the runtime's directories.
    Disk,
}
