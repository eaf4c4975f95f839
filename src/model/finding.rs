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

/// What a finding is about, one variant per kind in the order of the check
/// registry (`checks::registry::CHECKS`, which a test holds to it). Its name
/// (in JSON, Prometheus and tables) is the variant's in kebab case,
/// [`Kind::as_str`]'s, and nowhere else.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::VariantArray,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Kind {
    Zombie,
    LateExit,
    LeakedShim,
    LeakedMount,
    OrphanBundle,
    LeakedSnapshot,
    LeakedIp,
    LeakedSandbox,
    DuplicateSandboxName,
    OrphanPodDir,
    LeakedPodCgroup,
    FailingSandbox,
    LeakedNetns,
    CriDrift,
    CriSlow,
    ShimBlocked,
    ApiUnreachable,
}

impl Kind {
    /// Every kind, in the order above.
    pub const ALL: &'static [Kind] = <Kind as strum::VariantArray>::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One thing found wrong, with everything an operator needs to act on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub severity: Severity,
    /// The full id of the container (or shim, mount, ...) the finding is about.
    pub id: String,
    /// What is wrong, in one line.
    pub summary: String,
    /// The facts behind it; keys are stable per kind (see docs/findings.md).
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
