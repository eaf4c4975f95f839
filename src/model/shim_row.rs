//! One row of the shim inventory (`nodectl shims`).

use serde::Serialize;
use serde_json::Value;

use crate::model::names::PodRef;

#[derive(Debug, Serialize)]
pub struct ShimRow {
    pub pid: i32,
    pub binary: String,
    pub namespace: Option<String>,
    pub id: Option<String>,
    pub address: Option<String>,
    /// `start`/`delete` for containerd's short-lived invocations of the binary.
    pub action: Option<String>,
    /// Started by the containerd nodectl looked at (`--address`), proven.
    pub ours: bool,
    /// `ours`, `other` (not proven to serve nodectl's containerd),
    /// `impostor` (its executable, uids or namespaces are not containerd's:
    /// only its name looks like a shim) or `unproven` (an old archive).
    pub identity: &'static str,
    /// Why it is `other` or `impostor`.
    pub reason: Option<String>,
    #[serde(flatten)]
    pub pod: PodRef,
    pub started_at: Value,
    pub age_seconds: f64,
    pub rss_bytes: u64,
    pub children_live: Vec<i32>,
    pub children_defunct: Vec<i32>,
    pub bundle_dir: Option<String>,
    pub socket: Option<String>,
    /// Syscalls its threads are blocked in, e.g. `umount2`.
    pub blocked_in: Vec<String>,
}
