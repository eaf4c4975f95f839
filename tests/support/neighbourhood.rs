//! What a real node has beside the bed's containerd, so that every real
//! test runs where nodectl really runs: a mount table of hundreds of KB
//! mounted before the bed's own mounts (every pod's secrets and
//! service-account tokens, shm, another runtime's overlays), and an
//! unprivileged user's processes. None of it is containerd's, CRI's or
//! kubelet's, so none of it may ever be reported or touched; and nodectl
//! must still see the bed's own objects past it (issue "A node, not a
//! bed": procfs hands out the mount table a page at a time, and a reader
//! that stopped early judged only the first one).
//!
//! Everything mounted lives below `<bed>/neighbourhood`, which the bed's
//! teardown unmounts with the rest of its temp dir; the processes are
//! ended by [`Neighbourhood::end`].

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::mount::{mount, MsFlags};

/// Secret and token volumes, one a pod, as kubelet mounts them (tmpfs).
const SECRET_VOLUMES: usize = 1_000;
/// Another runtime's sandboxes' shm (tmpfs).
const SHM_MOUNTS: usize = 100;
/// Another runtime's container root filesystems (overlay).
const OVERLAYS: usize = 100;
/// The mounts above must make at least this much of the mount table: a
/// real node's is tens to hundreds of KB, and procfs hands it out about
/// 4 KB a read.
pub const PADDING_BYTES: usize = 256 * 1024;
/// ... in at least this many mounts before the bed's own.
pub const PADDING_MOUNTS: usize = 1_000;
/// `nobody`: a user with no say over anything nodectl judges.
const UNPRIVILEGED_UID: u32 = 65534;
/// How many of that user's processes run beside the bed.
const UNPRIVILEGED_PROCESSES: usize = 3;

pub struct Neighbourhood {
    pub dir: PathBuf,
    /// The unprivileged user's processes.
    processes: Vec<Child>,
}

impl Neighbourhood {
    /// Mounts the padding below `<bed_dir>/neighbourhood` and starts the
    /// unprivileged processes. Called before the bed's containerd starts,
    /// so every mount of the bed comes after the padding in the table.
    pub fn build(bed_dir: &Path) -> Result<Neighbourhood, String> {
        let dir = bed_dir.join("neighbourhood");
        let mut neighbourhood = Neighbourhood {
            dir,
            processes: Vec::new(),
        };
        neighbourhood.mount_padding()?;
        neighbourhood.check_padding()?;
        for _ in 0..UNPRIVILEGED_PROCESSES {
            let child = Command::new("sleep")
                .arg("3600")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .uid(UNPRIVILEGED_UID)
                .gid(UNPRIVILEGED_UID)
                .spawn()
                .map_err(|e| format!("starting a process as uid {UNPRIVILEGED_UID}: {e}"))?;
            neighbourhood.processes.push(child);
        }
        Ok(neighbourhood)
    }

    fn mount_padding(&self) -> Result<(), String> {
        let tmpfs = |point: &Path, options: &str| -> Result<(), String> {
            fs::create_dir_all(point).map_err(|e| format!("{}: {e}", point.display()))?;
            mount(
                Some("tmpfs"),
                point,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                Some(options),
            )
            .map_err(|e| format!("mounting tmpfs on {}: {e}", point.display()))
        };
        for pod in 0..SECRET_VOLUMES {
            // kubelet: <root>/pods/<uid>/volumes/kubernetes.io~projected/<name>.
            let point = self
                .dir
                .join("kubelet/pods")
                .join(pod_uid(pod))
                .join("volumes/kubernetes.io~projected/kube-api-access-x7k2p");
            tmpfs(&point, "size=64k,mode=0755")?;
        }
        for sandbox in 0..SHM_MOUNTS {
            let point = self
                .dir
                .join("other-runtime/sandboxes")
                .join(hex_id(sandbox))
                .join("shm");
            tmpfs(&point, "size=65536k,mode=1777")?;
        }
        let lower = self.dir.join("other-runtime/layers/base");
        fs::create_dir_all(&lower).map_err(|e| format!("{}: {e}", lower.display()))?;
        for container in 0..OVERLAYS {
            let base = self
                .dir
                .join("other-runtime/containers")
                .join(hex_id(container));
            let (upper, work, merged) = (base.join("fs"), base.join("work"), base.join("rootfs"));
            for d in [&upper, &work, &merged] {
                fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            }
            let options = format!(
                "lowerdir={},upperdir={},workdir={}",
                lower.display(),
                upper.display(),
                work.display()
            );
            mount(
                Some("overlay"),
                &merged,
                Some("overlay"),
                MsFlags::empty(),
                Some(options.as_str()),
            )
            .map_err(|e| format!("mounting overlay on {}: {e}", merged.display()))?;
        }
        Ok(())
    }

    /// The padding really is what the bed claims: enough mounts, enough of
    /// the table (read here whole, as `std` reads to the end).
    fn check_padding(&self) -> Result<(), String> {
        let table = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let below = format!("{}/", self.dir.display());
        let (mounts, bytes) = table
            .lines()
            .filter(|line| {
                line.split(' ')
                    .nth(4)
                    .is_some_and(|p| p.starts_with(&below))
            })
            .fold((0, 0), |(n, b), line| (n + 1, b + line.len() + 1));
        if mounts < PADDING_MOUNTS || bytes < PADDING_BYTES {
            return Err(format!(
                "the neighbourhood's padding is {mounts} mounts, {bytes} bytes of the mount \
                 table; at least {PADDING_MOUNTS} and {PADDING_BYTES} are needed"
            ));
        }
        Ok(())
    }

    /// Ends the neighbourhood of a bed that failed to start, and says so
    /// with `why`: its processes ended, its mounts detached.
    pub fn abandon(&mut self, bed_dir: &Path, why: String) -> String {
        let mut problems = self.end();
        let left = super::teardown::unmount_below(bed_dir);
        if !left.is_empty() {
            problems.push(format!("still mounted: {left:?}"));
        }
        match problems.is_empty() {
            true => why,
            false => format!("{why} (the neighbourhood: {})", problems.join("; ")),
        }
    }

    /// Ends the unprivileged processes (the mounts go with the bed's dir).
    pub fn end(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for mut child in self.processes.drain(..) {
            let _ = child.kill();
            if let Err(e) = child.wait() {
                problems.push(format!("reaping a neighbour's process: {e}"));
            }
        }
        problems
    }
}

/// A pod uid as the API server makes them (a v4 UUID's shape).
fn pod_uid(n: usize) -> String {
    format!("5e0c{n:04x}-8d1f-4b6a-9c2e-{n:012x}")
}

/// A 64-hex-digit id, as container runtimes name sandboxes and containers.
fn hex_id(n: usize) -> String {
    format!("{:0>64x}", 0x00ab_cdef_0000_0000_u64 + n as u64)
}

/// A pod tenant's process named like a shim: `containerd-shim-runc-v2`
/// (a copy of `sleep`, so its comm and its executable's name are a shim's),
/// without `-id`, in mount and pid namespaces of its own (as `unshare -m -p
/// --fork --mount-proc` makes them, as a container's process is), its
/// binary on a tmpfs only that mount namespace sees. nodectl must not take
/// it for a shim of any containerd: it could not serve anything of theirs.
pub struct TenantShim {
    child: Child,
    /// As the test's pid namespace sees it.
    pub pid: i32,
}

impl TenantShim {
    pub fn start(scratch: &Path) -> TenantShim {
        let mount_point = scratch.join("tenant-shim-mnt");
        fs::create_dir_all(&mount_point).unwrap();
        // The tmpfs, the copy and the exec happen in the new namespaces.
        let script = r#"mnt=$0
mount -t tmpfs tmpfs "$mnt" && cp "$(command -v sleep)" "$mnt/containerd-shim-runc-v2" && exec "$mnt/containerd-shim-runc-v2" 3600"#;
        let child = Command::new("unshare")
            .args(["-m", "-p", "--fork", "--mount-proc", "--kill-child"])
            .args(["sh", "-c", script])
            .arg(&mount_point)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("unshare: {e}"));
        let mut pid = None;
        let started = super::wait_until(std::time::Duration::from_secs(10), || {
            pid = super::procs::descendants(&[child.id() as i32])
                .into_iter()
                .find(|&p| {
                    fs::read_to_string(format!("/proc/{p}/comm"))
                        .is_ok_and(|c| c.trim() == "containerd-shim")
                });
            pid.is_some()
        });
        let tenant = TenantShim {
            child,
            pid: pid.unwrap_or(0),
        };
        assert!(started, "the tenant's shim-named process did not start");
        for ns in ["mnt", "pid"] {
            let theirs = fs::read_link(format!("/proc/{}/ns/{ns}", tenant.pid)).unwrap();
            let ours = fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
            assert_ne!(
                theirs, ours,
                "the tenant's process has a {ns} namespace of its own"
            );
        }
        tenant
    }
}

impl Drop for TenantShim {
    fn drop(&mut self) {
        // The init of its pid namespace: only SIGKILL reaches it from outside.
        if self.pid > 0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
