//! Whether a directory nodectl reads is the host's. In the host's mount
//! namespace it is. In another (a DaemonSet pod) a directory its container
//! does not mount is absent or the container's own, and reading it as the
//! host's would call a node clear while blind: CNI's configs and address
//! store, kubelet's pods, the netns directory, the cgroup hierarchy. So it
//! is held to the host's own, looked at through PID 1's root (the host's,
//! from a pod with `hostPID`) resolved with `openat2(RESOLVE_IN_ROOT)`, so
//! that no symlink there leads out of it: the same device and inode (a bind
//! mount keeps both) is the host's directory; absent on both sides is
//! absent on the host; anything else is a gap.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};

use crate::sources::daemon_proof;

/// Where nodectl stands: in the host's mount namespace (or cannot tell:
/// PID 1 unreadable, as [`daemon_proof::host`] takes it), or in another,
/// with the host's root open when it could be.
pub enum HostView {
    Same,
    Other(Result<File, String>),
}

impl HostView {
    /// nodectl's mount namespace against PID 1's, under `proc_root`.
    pub fn of(proc_root: &Path) -> HostView {
        let Some(host) = daemon_proof::host(proc_root) else {
            return HostView::Same;
        };
        let ours = std::fs::metadata(proc_root.join("self/ns/mnt")).map(|m| m.ino());
        if host.described != "PID 1" || ours.as_ref().is_ok_and(|ours| *ours == host.namespaces.mnt)
        {
            return HostView::Same;
        }
        let root = proc_root.join("1/root");
        HostView::Other(File::open(&root).map_err(|err| format!("{}: {err}", root.display())))
    }

    /// Why `path` as nodectl sees it is not the host's, if it is not.
    pub fn hidden(&self, path: &Path) -> Option<String> {
        let root = match self {
            HostView::Same => return None,
            HostView::Other(Ok(root)) => root,
            HostView::Other(Err(why)) => {
                return Some(format!(
                    "nodectl runs in another mount namespace than the host's and cannot look at \
                     the host's {} to tell whether it is the one it sees ({why})",
                    path.display()
                ))
            }
        };
        let host = open_in_root(root, path, OFlags::PATH).and_then(|file| file.metadata());
        let ours = std::fs::metadata(path);
        let same = |host: &std::fs::Metadata, ours: &std::fs::Metadata| {
            (host.dev(), host.ino()) == (ours.dev(), ours.ino())
        };
        let shown = path.display();
        match (host, ours) {
            (Ok(host), Ok(ours)) if same(&host, &ours) => None,
            (Err(host), Err(ours))
                if host.kind() == io::ErrorKind::NotFound
                    && ours.kind() == io::ErrorKind::NotFound =>
            {
                None
            }
            (Ok(_), Err(_)) => Some(format!(
                "the host has {shown}, and nodectl (in another mount namespace) does not see it: \
                 mount it into nodectl's container at the same path{}",
                debug_pod_fix(root, path)
            )),
            (Ok(_), Ok(_)) => Some(format!(
                "{shown} as nodectl sees it is not the host's (another device or inode): mount \
                 the host's at the same path{}",
                debug_pod_fix(root, path)
            )),
            (Err(host), _) if host.kind() == io::ErrorKind::NotFound => Some(format!(
                "the host has no {shown}; the one nodectl sees is its container's own"
            )),
            (Err(host), _) => Some(format!("the host's {shown} cannot be looked at: {host}")),
        }
    }
}

/// `path` opened (with `flags`, close-on-exec added) as a process whose
/// root is `root` (an open `/proc/<pid>/root`) resolves it:
/// `openat2(RESOLVE_IN_ROOT)` takes `/`, `..` and every absolute symlink on
/// the way as that root, so nothing there leads out of it, and no magic
/// link (`/proc/self/...`) is followed.
pub fn open_in_root(root: &File, path: &Path, flags: OFlags) -> io::Result<File> {
    let relative = path.strip_prefix("/").unwrap_or(path);
    rustix::fs::openat2(
        root,
        relative,
        flags | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
    .map(File::from)
    .map_err(io::Error::from)
}

/// Where `kubectl debug node` puts the host's `/` in its pod (its volume
/// `host-root`, a hostPath of `/`).
const DEBUG_POD_HOST_ROOT: &str = "/host";
/// That volume's name, which a `--custom` container spec can mount again.
const DEBUG_POD_VOLUME: &str = "host-root";

/// How to show the host's `path` to nodectl in a `kubectl debug node` pod
/// (the host's `/` at [`DEBUG_POD_HOST_ROOT`], the same directory as the
/// host's `root`): the volume mount a `--custom` file adds; nothing
/// elsewhere. The profiles cannot add a mount, and nodectl does not read
/// below `/host` on its own: what it reads must be at the path the daemon
/// and its config name.
fn debug_pod_fix(root: &File, path: &Path) -> String {
    let (Ok(host), Ok(at)) = (root.metadata(), std::fs::metadata(DEBUG_POD_HOST_ROOT)) else {
        return String::new();
    };
    if (host.dev(), host.ino()) != (at.dev(), at.ino()) {
        return String::new();
    }
    let Some(shown) = path.to_str() else {
        return String::new();
    };
    let mount = serde_json::json!({
        "name": DEBUG_POD_VOLUME,
        "mountPath": shown,
        "subPath": shown.trim_start_matches('/'),
    });
    format!(
        "; in this `kubectl debug node` pod (the host's / at {DEBUG_POD_HOST_ROOT}), add \
         {mount} to the volumeMounts of a --custom file (docs/fleet.md)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_the_hosts_mount_namespace_nothing_is_hidden() {
        assert_eq!(HostView::Same.hidden(Path::new("/nonexistent/cni")), None);
    }

    /// A host root (a directory standing for PID 1's) and what nodectl
    /// sees beside it.
    fn other_view(root: &Path) -> HostView {
        HostView::Other(Ok(File::open(root).unwrap()))
    }

    #[test]
    fn in_another_only_the_hosts_own_directory_or_none_on_both_sides_is_seen() {
        let tmp = tempfile::tempdir().unwrap();
        let host_root = tmp.path().join("host");
        let seen = tmp.path().join("seen");
        std::fs::create_dir_all(host_root.join(seen.strip_prefix("/").unwrap())).unwrap();
        let view = other_view(&host_root);
        // The host has it, nodectl does not see it: a gap.
        let why = view.hidden(&seen).expect("hidden");
        assert!(why.contains("does not see it"), "{why}");
        // A directory of its own at the path: not the host's.
        std::fs::create_dir(&seen).unwrap();
        let why = view.hidden(&seen).expect("not the host's");
        assert!(why.contains("not the host's"), "{why}");
        // The host's, bind-mounted or (here) the very directory: seen.
        let same = other_view(Path::new("/"));
        assert_eq!(same.hidden(&seen), None);
        // Absent on both sides: absent on the host, no gap.
        assert_eq!(view.hidden(&tmp.path().join("neither")), None);
        // nodectl's own, where the host has none.
        std::fs::create_dir(tmp.path().join("empty-root")).unwrap();
        let why = other_view(&tmp.path().join("empty-root"))
            .hidden(&seen)
            .unwrap();
        assert!(why.contains("container's own"), "{why}");
    }

    #[test]
    fn a_symlink_in_the_hosts_root_does_not_lead_out_of_it() {
        let tmp = tempfile::tempdir().unwrap();
        let host_root = tmp.path().join("host");
        let seen = tmp.path().join("seen");
        std::fs::create_dir(&seen).unwrap();
        let link = host_root.join(seen.strip_prefix("/").unwrap());
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        // An absolute link to nodectl's directory: resolved inside the
        // host's root (where it names itself), never to nodectl's.
        std::os::unix::fs::symlink(&seen, &link).unwrap();
        assert!(other_view(&host_root).hidden(&seen).is_some());
    }
}
