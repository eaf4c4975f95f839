//! The network namespaces CRI mounts for pods: one nsfs bind mount per pod
//! (`cni-<uuid>`) in its netns directory, made before the pod's network
//! and removed in its teardown. The directory may hold others' too (`ip
//! netns add`, another runtime's): what made each is told by its name,
//! the sandbox records and libcni's cache (see `checks::leaked_netns`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::model::cri_status::UnixNanos;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetnsView {
    /// CRI's netns directory (`/var/run/netns`, or under its state
    /// directory with `netns_mounts_under_state_dir`).
    #[serde(with = "crate::model::path_json")]
    pub dir: PathBuf,
    pub mounts: Vec<NetnsMount>,
    /// What holds each namespace a check asked about, by the namespace's
    /// inode: a thread in it (`/proc/<pid>/task/<tid>/ns/net`) or an open
    /// descriptor on it (`/proc/<pid>/fd/<n>`), each matched by the nsfs
    /// device and inode the kernel gives it. Looked for only for the
    /// namespaces CRI made that no sandbox record names.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub holders: BTreeMap<u64, NetnsHolder>,
    /// Whether `holders` was looked for in every process's threads and
    /// descriptors (procfs read whole, within its time).
    #[serde(default)]
    pub holders_looked_for: bool,
    /// The processes whose threads or descriptors the kernel would not let
    /// nodectl see (ptrace access: without CAP_SYS_PTRACE, a process with
    /// capabilities nodectl lacks): what they hold is unknown. A gap names
    /// them.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub holders_unread: BTreeSet<i32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetnsMount {
    /// The mount point, spelled below `dir` as nodectl was given it.
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    /// The namespace's inode (what `/proc/<pid>/ns/net` links to).
    pub inode: u64,
    /// The nsfs device it is on: with the inode, the namespace's identity.
    #[serde(default)]
    pub device: u64,
    /// When the namespace's nsfs inode was made (unix ns): its bind mount.
    pub created_at: UnixNanos,
    /// The network interfaces in it (as its `/proc/<tid>/net/dev` lists
    /// them), when they were looked at: only for a namespace CRI made that
    /// nothing else names or holds. `None`: not looked at, or not seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<String>>,
}

/// A process holding a network namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetnsHolder {
    pub pid: i32,
    pub by: HeldBy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeldBy {
    /// One of its threads is in the namespace.
    Thread(i32),
    /// It holds a descriptor open on the namespace.
    Descriptor(i32),
}

impl std::fmt::Display for NetnsHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.by {
            HeldBy::Thread(tid) if tid == self.pid => write!(f, "process {} is in it", self.pid),
            HeldBy::Thread(tid) => write!(f, "thread {tid} of process {} is in it", self.pid),
            HeldBy::Descriptor(fd) => {
                write!(f, "process {} holds it open (descriptor {fd})", self.pid)
            }
        }
    }
}

/// Whether `name` is one CRI gives the namespaces it makes: containerd's
/// `pkg/netns` `newNS` (every line, 1.6 to 2.3) names each
/// `cni-%x-%x-%x-%x-%x` of 16 random bytes, lowercase hex split 8-4-4-4-12.
/// `ip netns add`, podman (`netns-<uuid>`) and others name theirs
/// otherwise.
pub fn is_cri_name(name: &std::ffi::OsStr) -> bool {
    let Some(uuid) = name.to_str().and_then(|n| n.strip_prefix("cni-")) else {
        return false;
    };
    let groups: Vec<&str> = uuid.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// Whether CRI made the namespace mounted at file `name` of its netns
/// directory: named as CRI names them, or named by libcni's cache of an
/// ADD of one of CRI's networks (the pod's netns, whatever its name). A
/// sandbox record naming it says so too, but such a namespace is never a
/// leak.
pub fn is_cri_made(name: &std::ffi::OsStr, cni: Option<&crate::model::CniIndex>) -> bool {
    is_cri_name(name) || cni.is_some_and(|cni| cni.attachment_in_netns(name).is_some())
}

/// The fallback devices the kernel puts in every new network namespace
/// while their tunnel modules are loaded (`net.core.
/// fb_tunnels_only_for_init_net` 0, the default): nobody's interface.
const KERNEL_FALLBACK_TUNNELS: &[&str] = &[
    "tunl0", "sit0", "ip6tnl0", "gre0", "gretap0", "erspan0", "ip6gre0", "ip_vti0", "ip6_vti0",
];

/// The interfaces of `mount` that CRI did not put there: any but `lo`, the
/// kernel's fallback tunnels and the pod's own, which go-cni names
/// `eth<i>` for CRI's i-th network (`getIfName`, prefix `eth`). `None`:
/// its interfaces were not seen, so nothing can be said.
pub fn foreign_interfaces(mount: &NetnsMount, cri_networks: usize) -> Option<Vec<&str>> {
    let pods_own = |name: &str| {
        name.strip_prefix("eth")
            .and_then(|i| i.parse::<usize>().ok())
            .is_some_and(|i| i < cri_networks.max(1))
    };
    let interfaces = mount.interfaces.as_ref()?;
    Some(
        interfaces
            .iter()
            .map(String::as_str)
            .filter(|name| {
                *name != "lo" && !KERNEL_FALLBACK_TUNNELS.contains(name) && !pods_own(name)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_names_its_namespaces_cni_and_a_uuid() {
        for (name, cri_s) in [
            ("cni-1b2f3c4d-0a1b-2c3d-4e5f-0123456789ab", true),
            ("cni-00000000-0000-0000-0000-000000000000", true),
            ("cni-1B2F3C4D-0A1B-2C3D-4E5F-0123456789AB", false),
            ("cni-1b2f3c4d-0a1b-2c3d-4e5f-0123456789a", false),
            ("cni-1b2f3c4d-0a1b-2c3d-4e5f-0123456789abc", false),
            ("cni-1b2f3c4d0a1b-2c3d-4e5f-0123456789ab", false),
            ("cni-1b2f3c4d-0a1b-2c3d-4e5f-0123456789ag", false),
            ("netns-1b2f3c4d-0a1b-2c3d-4e5f-0123456789ab", false),
            ("admin", false),
            ("cni-admin", false),
        ] {
            assert_eq!(is_cri_name(name.as_ref()), cri_s, "{name}");
        }
    }

    #[test]
    fn only_lo_and_the_pods_own_interfaces_are_cri_s() {
        let mount = |interfaces: Option<&[&str]>| NetnsMount {
            path: PathBuf::from("/var/run/netns/cni-x"),
            inode: 1,
            device: 4,
            created_at: 0,
            interfaces: interfaces.map(|i| i.iter().map(|n| n.to_string()).collect()),
        };
        let empty: Vec<&str> = Vec::new();
        assert_eq!(
            foreign_interfaces(&mount(Some(&["lo", "eth0"])), 1),
            Some(empty.clone())
        );
        assert_eq!(
            foreign_interfaces(&mount(Some(&["lo"])), 0),
            Some(empty.clone())
        );
        assert_eq!(
            foreign_interfaces(&mount(Some(&["lo", "eth0", "eth1"])), 1),
            Some(vec!["eth1"])
        );
        assert_eq!(
            foreign_interfaces(&mount(Some(&["lo", "eth0", "eth1"])), 2),
            Some(empty)
        );
        assert_eq!(
            foreign_interfaces(&mount(Some(&["lo", "vadm0", "eth"])), 1),
            Some(vec!["vadm0", "eth"])
        );
        assert_eq!(foreign_interfaces(&mount(None), 1), None);
    }
}
