//! A synthetic Kubernetes node, to benchmark nodectl at node scale.
//!
//! ```sh
//! cargo run --release -p nodectl-bench --bin synthetic_node -- \
//!     --out DIR --containers N --mounts M --processes P [--seed S] \
//!     [--address SOCKET --daemon-pid PID] [--status-pid-offset K]
//! ```
//!
//! Everything is plain files: nothing is mounted and no process is started.
//! What only the kernel can say (who listens on the socket, namespaces,
//! uids, the owner of a binary) is borrowed from a real process: with
//! `--daemon-pid`, the process listening on `--address` (bench/run's
//! frozen listener, bench/src/bin/frozen_containerd.rs) is the node's
//! containerd, as in tests/support/fake_daemon.rs (see `write_proof`).
//! Under DIR it writes
//!
//! - `root/`: containerd's root, with CRI's status file for each of the N
//!   containers (running, exited, zombie, late exit, corrupt) and a directory
//!   per pod sandbox;
//! - `state/`: containerd's state, with the task bundle (OCI `config.json`
//!   with the CRI annotations, `address`, `shim.pid`) of every live task and
//!   a directory per pod sandbox;
//! - `proc/`: a procfs root (`stat` with `btime`, `meminfo`, `pressure/io`,
//!   `swaps` with no area (kubelet's default: a node without swap),
//!   and `<pid>/{stat,cmdline}` for P processes: one runc v2 shim per pod with
//!   its threads, the pods' processes as the shims' children, leaked shims and
//!   the rest of a node; with `--daemon-pid`, containerd's process has that
//!   pid (no other process has it) and it and every shim have the links
//!   that prove them (`ns/*`, `status`, `root`, `exe`), and each pod's pause
//!   process is in its pod's network namespace (`task/<pid>/ns/net`);
//! - `mountinfo`: M mounts, the containers' overlay rootfs and the pods' shm
//!   among thousands of unrelated ones;
//! - `containerd.toml`: a config (version 2) that names CRI's CNI
//!   `conf_dir`, `cni/net.d`, and puts CRI's netns directory under state
//!   (`netns_mounts_under_state_dir`);
//! - `state/io.containerd.grpc.v1.cri/netns/cni-<uuid>`: each pod's network
//!   namespace (a plain file, its nsfs mount a line of `mountinfo` after
//!   the pods' volumes) and a few leaked ones that no process is in;
//! - `cni/`: the node's CNI network: `net.d/10-nodectl-bench.conflist`
//!   (bridge with host-local IPAM, a subnet that holds every sandbox, its
//!   `dataDir` in `cni/networks`) and host-local's store: one reservation per
//!   pod sandbox, a few for sandboxes long gone (leaked), `last_reserved_ip.0`
//!   and `lock`. libcni's result cache is a fixed path on the machine
//!   (/var/lib/cni/results) that nodectl cannot be pointed away from, so
//!   none is written: the reservations name no pod;
//! - `kubelet/pods/<uid>/`: kubelet's directory of each pod (`etc-hosts`,
//!   `containers/<name>/`, the projected service-account volume
//!   `volumes/kubernetes.io~projected/kube-api-access-*`, with a tmpfs
//!   mounted there in `mountinfo`, after the M mounts), and a few orphans
//!   (uids of no pod), one with its volume still mounted;
//! - `cgroup/`: a cgroup v2 filesystem (`cgroup.controllers` at its top)
//!   with kubelet's pod cgroups (cgroupfs driver, cgroup root `/`):
//!   `kubepods/[burstable/|besteffort/]pod<uid>/<container id>/cgroup.procs`
//!   naming the pause and container processes of `proc/`, and a few leaked
//!   pod cgroups (uids of no pod), empty;
//! - `expected.json`: what is in the node, and (with `--daemon-pid`) what
//!   each nodectl command must report on it when containerd accepts
//!   connections but never answers: findings by kind and gaps by source,
//!   exactly.
//!
//! Point nodectl at it with `--root DIR/root --state DIR/state --address
//! SOCKET --config DIR/containerd.toml --proc-root
//! DIR/proc --mountinfo DIR/mountinfo --kubelet-root DIR/kubelet --cgroup-fs
//! DIR/cgroup`. The same seed gives the same node, except for times, which
//! are relative to now; what the generator wrote before the kubelet side
//! (CNI and the rest) is as it was, the mount table's first M lines too.
//!
//! `--status-pid-offset K` (default 0) adds K to the pid in every status
//! file, and nothing else: with K at or above the largest pid Linux allows
//! (4,194,304), no status file names a live process of the machine, so the
//! store can be measured against the real `/proc` (bench/run's real-/proc
//! row). The node's own `proc/` and `expected.json` then no longer match the
//! status files.

use std::fmt::Write as _;
use std::fs::{self, File, FileTimes};
use std::io;
use std::net::Ipv4Addr;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const USAGE: &str = "usage: synthetic_node --out DIR --containers N --mounts M --processes P \
                     [--seed S] [--address SOCKET] [--daemon-pid PID] [--status-pid-offset K] \
                     [--mount-table [--outside-mount-namespace INODE]]";

/// The socket of the containerd under test (`--address`); its shims name it
/// with `-address`.
const DEFAULT_ADDRESS: &str = "/run/containerd/containerd.sock";
/// Another containerd on the same node (k3s, say): its shims are not ours.
const OTHER_ADDRESS: &str = "/run/k3s/containerd/containerd.sock";
const NAMESPACE: &str = "k8s.io";
/// Containers in CRI's store per pod: an init container, two long-running
/// ones and a sidecar; the pod's sandbox (pause) comes on top.
const CONTAINERS_PER_POD: usize = 4;
/// A runc v2 shim is a Go program: a handful of threads.
const SHIM_THREADS: usize = 9;
/// `/proc/<pid>/stat` counts start times in clock ticks (USER_HZ).
const TICKS_PER_SECOND: i64 = 100;
const SEC: i64 = 1_000_000_000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
/// Files and directories this generator owns inside `--out`.
const OWN_ENTRIES: &[&str] = &[
    "root",
    "state",
    "proc",
    "mountinfo",
    "containerd.toml",
    "cni",
    "kubelet",
    "cgroup",
    "host",
    "expected.json",
];
/// The node's CNI network; its name is also its store's directory.
const CNI_NETWORK: &str = "nodectl-bench";
/// The pods' addresses come from 10.0.0.0/<prefix>, a /24 or larger.
const POD_NETWORK: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 0);
/// Reservations host-local still holds for sandboxes long gone (a DEL that
/// failed or never ran): ids no store or API knows.
const LEAKED_RESERVATIONS: usize = 5;
/// kubelet pod directories of pods long gone (uids of no pod): the first
/// still has its projected volume mounted (an unmount that failed), the
/// others are empty shells.
const ORPHAN_POD_DIRS: usize = 3;
/// Pod cgroups of pods long gone that kubelet failed to remove.
const LEAKED_POD_CGROUPS: usize = 3;
/// CRI's network namespaces of sandboxes removed without their teardown.
const LEAKED_NETNS: usize = 2;
/// What a cgroup v2 directory holds besides its children (a few of the
/// kernel's interface files; `cgroup.procs` is written apart).
const CGROUP_FILES: &[(&str, &str)] = &[
    (
        "cgroup.controllers",
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    ),
    ("cgroup.type", "domain\n"),
    ("cpu.weight", "100\n"),
    ("memory.max", "max\n"),
    ("pids.max", "max\n"),
];
/// The mount table's first lines: the node's own filesystems (`/`, `/sys`,
/// `/proc`, ...), which `--mount-table` leaves to the machine.
const BASE_MOUNTS: usize = 21;
/// The tmpfs kubelet mounts at a pod's projected service-account volume.
const PROJECTED_TMPFS: &str = "rw,relatime - tmpfs tmpfs rw,size=524288k,inode64";

/// Syscall numbers for `/proc/<pid>/task/<tid>/syscall`.
#[cfg(target_arch = "x86_64")]
mod sys {
    pub const READ: i64 = 0;
    pub const UMOUNT2: i64 = 166;
    pub const FUTEX: i64 = 202;
    pub const WAITID: i64 = 247;
    pub const EPOLL_PWAIT: i64 = 281;
}
#[cfg(not(target_arch = "x86_64"))]
mod sys {
    pub const READ: i64 = 63;
    pub const UMOUNT2: i64 = 39;
    pub const FUTEX: i64 = 98;
    pub const WAITID: i64 = 95;
    pub const EPOLL_PWAIT: i64 = 22;
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(err) => {
            eprintln!("synthetic_node: {err}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(node) => {
            println!("{}", node.summary());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("synthetic_node: {err}");
            ExitCode::FAILURE
        }
    }
}

struct Args {
    out: PathBuf,
    containers: usize,
    mounts: usize,
    processes: usize,
    seed: u64,
    address: String,
    /// The real process listening on `address`: the node's containerd.
    daemon_pid: Option<i32>,
    /// Added to the pid in every status file (see the head of this file).
    status_pid_offset: i64,
    /// Mount the node's table for real (see [`mount_table`]).
    mount_table: bool,
    /// The mount namespace (its inode) `--mount-table` must not be in:
    /// the one the caller left (`unshare -m`).
    outside_mount_namespace: Option<u64>,
}

impl Args {
    fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
        let (mut out, mut containers, mut mounts, mut processes) = (None, None, None, None);
        let mut seed = 1;
        let mut address = DEFAULT_ADDRESS.to_string();
        let mut status_pid_offset = 0;
        let mut daemon_pid = None;
        let mut mount_table = false;
        let mut outside_mount_namespace = None;
        while let Some(flag) = argv.next() {
            let mut value = || argv.next().ok_or_else(|| format!("{flag} needs a value"));
            let number = |text: String| {
                text.replace(['_', ','], "")
                    .parse::<usize>()
                    .map_err(|e| format!("{flag} {text}: {e}"))
            };
            match flag.as_str() {
                "--out" => out = Some(PathBuf::from(value()?)),
                "--containers" => containers = Some(number(value()?)?),
                "--mounts" => mounts = Some(number(value()?)?),
                "--processes" => processes = Some(number(value()?)?),
                "--seed" => seed = number(value()?)? as u64,
                "--address" => address = value()?,
                "--status-pid-offset" => status_pid_offset = number(value()?)? as i64,
                "--daemon-pid" => daemon_pid = Some(number(value()?)? as i32),
                "--mount-table" => mount_table = true,
                "--outside-mount-namespace" => {
                    outside_mount_namespace = Some(number(value()?)? as u64)
                }
                "-h" | "--help" => return Err("help".to_string()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let missing = |name: &str| format!("{name} is required");
        Ok(Args {
            out: out.ok_or_else(|| missing("--out"))?,
            containers: containers.ok_or_else(|| missing("--containers"))?,
            mounts: mounts.ok_or_else(|| missing("--mounts"))?,
            processes: processes.ok_or_else(|| missing("--processes"))?,
            seed,
            address,
            daemon_pid,
            status_pid_offset,
            mount_table,
            outside_mount_namespace,
        })
    }
}

/// splitmix64: small, fast, and the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A value in `lo..hi`.
    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo).max(1) as u64) as i64
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn hex(&mut self, len: usize) -> String {
        let mut text = String::with_capacity(len + 16);
        while text.len() < len {
            let _ = write!(text, "{:016x}", self.next());
        }
        text.truncate(len);
        text
    }

    /// The alphabet of Kubernetes' generated name suffixes.
    fn suffix(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..len).map(|_| *self.pick(ALPHABET) as char).collect()
    }

    fn uuid(&mut self) -> String {
        let h = self.hex(32);
        format!(
            "{}-{}-4{}-a{}-{}",
            &h[..8],
            &h[8..12],
            &h[13..16],
            &h[17..20],
            &h[20..]
        )
    }
}

/// What CRI's status file of a container says, and what is true.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// RUNNING, and its process lives (pid and start time match).
    Running,
    /// EXITED, recorded promptly (status mtime a few ms after FinishedAt).
    Exited,
    /// RUNNING, but the process is dead: how, below. A `zombie` finding.
    Zombie(Death),
    /// EXITED, recorded minutes after FinishedAt, within the last day.
    /// A `late-exit` finding.
    LateExit,
    /// EXITED and recorded late, but days ago (outside `--since`): no finding.
    OldLateExit,
    /// The status file is torn (truncated or empty): a gap naming it.
    Corrupt,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Death {
    /// No process has the pid.
    Absent,
    /// The process is defunct (Z), waiting for the shim to reap it.
    Defunct,
    /// The pid now belongs to a process started much later.
    Reused,
}

/// The kind of container `index`: a fixed mix, spread over the pods. Per 50
/// containers: 20 running, 24 exited, 2 zombies, 2 late exits, 1 old late
/// exit, 1 corrupt.
fn kind_of(index: usize, zombies_so_far: usize) -> Kind {
    match (index * 37) % 50 {
        0..=19 => Kind::Running,
        20..=43 => Kind::Exited,
        44 | 45 => Kind::Zombie(match zombies_so_far % 3 {
            0 => Death::Absent,
            1 => Death::Defunct,
            _ => Death::Reused,
        }),
        46 | 47 => Kind::LateExit,
        48 => Kind::OldLateExit,
        _ => Kind::Corrupt,
    }
}

/// A containerized program: its `comm`, its command line, its RSS in pages.
struct Program {
    comm: &'static str,
    args: &'static [&'static str],
    rss_pages: u64,
}

const INIT: Program = Program {
    comm: "sh",
    args: &[
        "/bin/sh",
        "-c",
        "cp -r /config/. /shared/ && chmod -R g+w /shared",
    ],
    rss_pages: 200,
};
const APPS: &[Program] = &[
    Program {
        comm: "nginx",
        args: &["nginx: master process nginx -g daemon off;"],
        rss_pages: 2_400,
    },
    Program {
        comm: "java",
        args: &[
            "java",
            "-XX:MaxRAMPercentage=75",
            "-jar",
            "/app/service.jar",
        ],
        rss_pages: 120_000,
    },
    Program {
        comm: "node",
        args: &["node", "--max-old-space-size=512", "dist/server.js"],
        rss_pages: 22_000,
    },
    Program {
        comm: "gunicorn",
        args: &[
            "/usr/local/bin/python",
            "/usr/local/bin/gunicorn",
            "-w",
            "4",
            "app:app",
        ],
        rss_pages: 15_000,
    },
    Program {
        comm: "redis-server",
        args: &["redis-server *:6379"],
        rss_pages: 3_000,
    },
];
const SIDECAR: Program = Program {
    comm: "envoy",
    args: &[
        "envoy",
        "-c",
        "/etc/envoy/envoy.yaml",
        "--service-cluster",
        "mesh",
    ],
    rss_pages: 12_000,
};
const LOGGER: Program = Program {
    comm: "fluent-bit",
    args: &[
        "/fluent-bit/bin/fluent-bit",
        "-c",
        "/fluent-bit/etc/fluent-bit.conf",
    ],
    rss_pages: 4_000,
};
const PAUSE: Program = Program {
    comm: "pause",
    args: &["/pause"],
    rss_pages: 60,
};

/// Boot time and now, unix ns.
#[derive(Clone, Copy)]
struct Times {
    boot: i64,
    now: i64,
}

struct Pod {
    sandbox_id: String,
    uid: String,
    name: String,
    namespace: &'static str,
    started: i64,
    shim_pid: i32,
    /// A container of this pod is a zombie: its shim sits in umount2.
    blocked: bool,
}

struct Container {
    id: String,
    pod: usize,
    name: &'static str,
    program: &'static Program,
    kind: Kind,
    /// The pid in the status file (0 once exited).
    pid: i32,
    created: i64,
    started: i64,
    finished: i64,
    exit_code: i32,
    reason: &'static str,
    /// When CRI wrote the status file: its mtime.
    written: i64,
}

impl Container {
    /// Whether containerd still has its task, hence a bundle and a rootfs mount.
    fn has_task(&self) -> bool {
        matches!(self.kind, Kind::Running | Kind::Zombie(_))
    }
}

struct Thread {
    tid: i32,
    state: char,
    syscall: i64,
    wchan: &'static str,
}

struct Proc {
    pid: i32,
    ppid: i32,
    comm: String,
    state: char,
    started: i64,
    cmdline: Vec<String>,
    rss_pages: u64,
    kernel: bool,
    threads: Vec<Thread>,
    cwd: Option<PathBuf>,
}

/// Allocates pids the way the kernel does: increasing, with the gaps left by
/// short-lived processes; never `reserved` (the real listener's pid, which
/// the node's containerd has).
struct Pids {
    last: i32,
    reserved: Option<i32>,
}

impl Pids {
    fn next(&mut self, rng: &mut Rng) -> i32 {
        self.last += 1 + rng.below(3) as i32;
        if Some(self.last) == self.reserved {
            self.last += 1;
        }
        self.last
    }
}

#[derive(Default)]
struct Counts {
    pods: usize,
    running: usize,
    exited: usize,
    zombies: usize,
    zombies_absent: usize,
    zombies_defunct: usize,
    zombies_reused: usize,
    late_exits: usize,
    old_late_exits: usize,
    corrupt: usize,
    /// Running containers turned into exited ones to fit `--processes`.
    converted_to_exited: usize,
    bundles: usize,
    shims: usize,
    leaked_shims: usize,
    blocked_shims: usize,
    processes: usize,
    shim_threads: usize,
    mounts: usize,
    rootfs_mounts: usize,
    shm_mounts: usize,
    leaked_mounts: usize,
    /// The pods' CNI subnet, and the addresses host-local holds in it.
    pod_subnet: String,
    ip_reservations: usize,
    leaked_ip_reservations: usize,
    /// kubelet's pod directories (orphans among them), the volumes
    /// mounted below them, and the pod cgroups (leaked among them).
    pod_dirs: usize,
    orphan_pod_dirs: usize,
    pod_dir_mounts: usize,
    pod_cgroups: usize,
    leaked_pod_cgroups: usize,
    /// CRI's network namespaces (mounted, leaked among them).
    netns: usize,
    leaked_netns: usize,
}

struct Node {
    dir: PathBuf,
    counts: Counts,
}

impl Node {
    fn summary(&self) -> String {
        let c = &self.counts;
        format!(
            "synthetic node in {}: {} containers in {} pods ({} running, {} exited, \
             {} zombies, {} late exits, {} old late exits, {} corrupt), {} processes \
             ({} shims, {} leaked), {} mounts ({} rootfs, {} shm, {} leaked), \
             {} CNI reservations in {} ({} leaked), {} kubelet pod dirs ({} orphans, \
             {} mounts below them), {} pod cgroups ({} leaked), {} pod network namespaces \
             ({} leaked)",
            self.dir.display(),
            c.running + c.exited + c.zombies + c.late_exits + c.old_late_exits + c.corrupt,
            c.pods,
            c.running,
            c.exited,
            c.zombies,
            c.late_exits,
            c.old_late_exits,
            c.corrupt,
            c.processes,
            c.shims,
            c.leaked_shims,
            c.mounts,
            c.rootfs_mounts,
            c.shm_mounts,
            c.leaked_mounts,
            c.ip_reservations,
            c.pod_subnet,
            c.leaked_ip_reservations,
            c.pod_dirs,
            c.orphan_pod_dirs,
            c.pod_dir_mounts,
            c.pod_cgroups,
            c.leaked_pod_cgroups,
            c.netns,
            c.leaked_netns
        )
    }
}

fn io_err(path: &Path, err: io::Error) -> String {
    format!("{}: {err}", path.display())
}

fn write(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), String> {
    fs::write(path, contents).map_err(|e| io_err(path, e))
}

fn mkdir(path: &Path) -> Result<(), String> {
    fs::create_dir_all(path).map_err(|e| io_err(path, e))
}

fn set_mtime(path: &Path, nanos: i64) -> Result<(), String> {
    let time = UNIX_EPOCH + Duration::from_nanos(nanos as u64);
    File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_times(FileTimes::new().set_modified(time)))
        .map_err(|e| io_err(path, e))
}

/// [`set_mtime`] for a directory, which cannot be opened for writing.
fn set_dir_mtime(path: &Path, nanos: i64) -> Result<(), String> {
    let time = UNIX_EPOCH + Duration::from_nanos(nanos as u64);
    File::open(path)
        .and_then(|dir| dir.set_times(FileTimes::new().set_modified(time)))
        .map_err(|e| io_err(path, e))
}

/// Makes `out` ready: created if missing; a previous synthetic node in it is
/// replaced; anything else there makes us stop rather than delete it.
fn prepare(out: &Path) -> Result<PathBuf, String> {
    mkdir(out)?;
    let out = out.canonicalize().map_err(|e| io_err(out, e))?;
    let entries = fs::read_dir(&out).map_err(|e| io_err(&out, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_err(&out, e))?;
        let name = entry.file_name();
        if !OWN_ENTRIES.iter().any(|own| name == *own) {
            return Err(format!(
                "{} holds {:?}, which this generator did not write; use an empty directory",
                out.display(),
                name
            ));
        }
    }
    for name in OWN_ENTRIES {
        let path = out.join(name);
        if path.is_dir() {
            fs::remove_dir_all(&path).map_err(|e| io_err(&path, e))?;
        } else if path.exists() {
            fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
        }
    }
    if out.to_string_lossy().contains(char::is_whitespace) {
        return Err(format!(
            "{}: a path with white space would need escaping in mountinfo; pick another",
            out.display()
        ));
    }
    Ok(out)
}

fn run(args: &Args) -> Result<Node, String> {
    if let Some(pid) = args.daemon_pid {
        // PID 1 and kthreadd are the node's own; the listener is a live
        // process whose namespaces and uids the node's containerd borrows.
        if pid <= 2 || !Path::new(&format!("/proc/{pid}/status")).exists() {
            return Err(format!(
                "--daemon-pid {pid}: no such process to be the node's containerd"
            ));
        }
    }
    if args.mount_table {
        own_private_mount_namespace(args.outside_mount_namespace)?;
    }
    let dir = prepare(&args.out)?;
    let mut rng = Rng(args.seed);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_nanos() as i64;
    // Booted ten days ago; /proc/stat's btime has whole seconds.
    let boot = (now - 10 * DAY) / SEC * SEC;
    let mut counts = Counts::default();

    let (mut pods, mut containers) = plan_containers(args.containers, now, &mut rng, &mut counts);
    let times = Times { boot, now };
    let tasks = dir
        .join("state/io.containerd.runtime.v2.task")
        .join(NAMESPACE);
    let procs = plan_processes(
        args,
        times,
        &tasks,
        &mut pods,
        &mut containers,
        &mut rng,
        &mut counts,
    )?;
    let root = dir.join("root");
    let state = dir.join("state");
    write_cri_store(&root, &state, &pods, &containers, args.status_pid_offset)?;
    write_bundles(&state, &pods, &containers, &mut rng, &mut counts)?;
    write_procfs(&dir.join("proc"), boot, now, &procs, args.daemon_pid)?;
    let mountinfo = mountinfo(
        args.mounts,
        &root,
        &state,
        &pods,
        &containers,
        &mut rng,
        &mut counts,
    )?;
    write(&dir.join("mountinfo"), mountinfo)?;
    // Last: its draws from `rng` leave the rest of the node as it was.
    write_cni(&dir, &pods, now, &mut rng, &mut counts)?;
    // kubelet's side, after CNI for the same reason.
    let pod_dir_mounts = write_kubelet_pods(&dir, &pods, &containers, now, &mut rng, &mut counts)?;
    append(&dir.join("mountinfo"), pod_dir_mounts)?;
    write_pod_cgroups(&dir, &pods, &containers, &procs, now, &mut rng, &mut counts)?;
    // CRI's network namespaces, last for the same reason.
    let netns_mounts = write_netns(&state, &pods, &procs, now, &mut rng, &mut counts)?;
    append(&dir.join("mountinfo"), netns_mounts)?;
    if args.mount_table {
        mount_table(&dir, BASE_MOUNTS, &mut rng)?;
    }
    write(&dir.join("expected.json"), expected(&counts, args))?;
    Ok(Node { dir, counts })
}

/// Pods and their containers, with the times in their status files.
fn plan_containers(
    count: usize,
    now: i64,
    rng: &mut Rng,
    counts: &mut Counts,
) -> (Vec<Pod>, Vec<Container>) {
    const NAMESPACES: &[&str] = &[
        "default",
        "shop",
        "payments",
        "monitoring",
        "batch",
        "kube-system",
    ];
    const WORKLOADS: &[&str] = &[
        "web", "api", "checkout", "worker", "cache", "search", "report", "ingest",
    ];
    let pod_count = count.div_ceil(CONTAINERS_PER_POD);
    let pods: Vec<Pod> = (0..pod_count)
        .map(|_| {
            let name = format!(
                "{}-{}-{}",
                rng.pick(WORKLOADS),
                rng.suffix(10),
                rng.suffix(5)
            );
            let namespace = NAMESPACES[rng.below(NAMESPACES.len() as u64) as usize];
            Pod {
                sandbox_id: rng.hex(64),
                uid: rng.uuid(),
                name,
                namespace,
                // Up for days: old enough for every exit below.
                started: now - rng.between(4 * DAY, 8 * DAY),
                shim_pid: 0,
                blocked: false,
            }
        })
        .collect();
    counts.pods = pod_count;

    let mut containers = Vec::with_capacity(count);
    for index in 0..count {
        let pod = index / CONTAINERS_PER_POD;
        let pod_started = pods[pod].started;
        let kind = kind_of(index, counts.zombies);
        let (name, program) = match index % CONTAINERS_PER_POD {
            0 => ("init-config", &INIT),
            1 => ("app", &APPS[pod % APPS.len()]),
            2 => ("proxy", &SIDECAR),
            _ => ("log-shipper", &LOGGER),
        };
        // Started a few seconds after the sandbox, or restarted since.
        let mut started = pod_started + rng.between(2 * SEC, 30 * SEC);
        if rng.below(4) == 0 {
            started = rng.between(pod_started + HOUR, now - 10 * MIN);
        }
        let mut container = Container {
            id: rng.hex(64),
            pod,
            name,
            program,
            kind,
            pid: 0,
            created: started - rng.between(40_000_000, 400_000_000),
            started,
            finished: 0,
            exit_code: 0,
            reason: "",
            written: started + rng.between(1_000_000, 20_000_000),
        };
        match kind {
            Kind::Running | Kind::Zombie(_) => {}
            Kind::Exited | Kind::Corrupt => {
                container.finished = rng.between(started + SEC, now - MIN);
                container.written = container.finished + rng.between(5_000_000, 80_000_000);
            }
            Kind::LateExit => {
                // Exited within the last day; CRI recorded it minutes later.
                container.finished = now - rng.between(HOUR, 20 * HOUR);
                container.written = container.finished + rng.between(2 * MIN, 15 * MIN);
            }
            Kind::OldLateExit => {
                container.finished = now - rng.between(3 * DAY, 3 * DAY + 12 * HOUR);
                container.written = container.finished + rng.between(2 * MIN, 15 * MIN);
            }
        }
        if container.finished != 0 {
            if rng.below(7) == 0 {
                (container.exit_code, container.reason) = (137, "OOMKilled");
            } else if rng.below(5) == 0 {
                container.exit_code = 1;
            }
        }
        match kind {
            Kind::Running => counts.running += 1,
            Kind::Exited => counts.exited += 1,
            Kind::Zombie(death) => {
                counts.zombies += 1;
                match death {
                    Death::Absent => counts.zombies_absent += 1,
                    Death::Defunct => counts.zombies_defunct += 1,
                    Death::Reused => counts.zombies_reused += 1,
                }
            }
            Kind::LateExit => counts.late_exits += 1,
            Kind::OldLateExit => counts.old_late_exits += 1,
            Kind::Corrupt => counts.corrupt += 1,
        }
        containers.push(container);
    }
    (pods, containers)
}

/// The node's own processes before any pod: kernel threads and daemons.
const KERNEL_THREADS: &[&str] = &[
    "rcu_gp",
    "rcu_par_gp",
    "slub_flushwq",
    "netns",
    "kworker/0:0H-events_highpri",
    "mm_percpu_wq",
    "rcu_tasks_kthread",
    "ksoftirqd/0",
    "rcu_preempt",
    "migration/0",
    "cpuhp/0",
    "cpuhp/1",
    "migration/1",
    "ksoftirqd/1",
    "kdevtmpfs",
    "inet_frag_wq",
    "kauditd",
    "khungtaskd",
    "oom_reaper",
    "writeback",
    "kcompactd0",
    "ksmd",
    "khugepaged",
    "kblockd",
    "kswapd0",
    "jbd2/vda-8",
    "ext4-rsv-conver",
];
const DAEMONS: &[(&str, &[&str])] = &[
    ("systemd-journal", &["/lib/systemd/systemd-journald"]),
    ("systemd-udevd", &["/lib/systemd/systemd-udevd"]),
    ("systemd-network", &["/lib/systemd/systemd-networkd"]),
    ("systemd-resolve", &["/lib/systemd/systemd-resolved"]),
    (
        "dbus-daemon",
        &["/usr/bin/dbus-daemon", "--system", "--nofork"],
    ),
    ("chronyd", &["/usr/sbin/chronyd", "-F", "1"]),
    (
        "sshd",
        &["sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"],
    ),
    (
        "containerd",
        &[
            "/usr/bin/containerd",
            "--config",
            "/etc/containerd/config.toml",
        ],
    ),
    (
        "kubelet",
        &[
            "/usr/bin/kubelet",
            "--config=/var/lib/kubelet/config.yaml",
            "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
        ],
    ),
    ("(sd-pam)", &["(sd-pam)"]),
    ("tmux: server", &["tmux", "new", "-s", "debug"]),
];
/// Processes started later that belong to no pod: what fills `--processes`.
const HOST_PROGRAMS: &[(&str, &[&str])] = &[
    ("bash", &["-bash"]),
    ("sleep", &["sleep", "3600"]),
    (
        "node_exporter",
        &["/usr/bin/node_exporter", "--collector.systemd"],
    ),
    (
        "agetty",
        &[
            "/sbin/agetty",
            "-o",
            "-p -- \\u",
            "--noclear",
            "tty1",
            "linux",
        ],
    ),
    ("cron", &["/usr/sbin/cron", "-f"]),
    ("python3", &["/usr/bin/python3", "/opt/agent/agent.py"]),
];

fn user_proc(pid: i32, ppid: i32, comm: &str, args: &[&str], started: i64, rss: u64) -> Proc {
    Proc {
        pid,
        ppid,
        comm: comm.to_string(),
        state: 'S',
        started,
        cmdline: args.iter().map(|a| a.to_string()).collect(),
        rss_pages: rss,
        kernel: false,
        threads: Vec::new(),
        cwd: None,
    }
}

fn kernel_proc(pid: i32, comm: &str, started: i64) -> Proc {
    Proc {
        state: 'I',
        kernel: true,
        cmdline: Vec::new(),
        ..user_proc(pid, 2, comm, &[], started, 0)
    }
}

/// A running shim of `address`: `containerd-shim-runc-v2 -namespace NS -id ID
/// -address ADDRESS`, with its threads; `blocked` puts one in umount2.
#[allow(clippy::too_many_arguments)]
fn shim_proc(
    pids: &mut Pids,
    rng: &mut Rng,
    id: &str,
    address: &str,
    action: Option<&str>,
    bundle: PathBuf,
    started: i64,
    blocked: bool,
) -> Proc {
    let pid = pids.next(rng);
    let mut cmdline: Vec<String> = [
        "/usr/bin/containerd-shim-runc-v2",
        "-namespace",
        NAMESPACE,
        "-id",
        id,
        "-address",
        address,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    if let Some(action) = action {
        cmdline.push(action.to_string());
    }
    let threads = (0..SHIM_THREADS)
        .map(|n| {
            let tid = if n == 0 { pid } else { pids.next(rng) };
            let (state, syscall, wchan) = match n {
                1 if blocked => ('D', sys::UMOUNT2, "wb_wait_for_completion"),
                2 => ('S', sys::EPOLL_PWAIT, "do_epoll_wait"),
                3 => ('S', sys::WAITID, "do_wait"),
                4 => ('S', sys::READ, "pipe_read"),
                _ => ('S', sys::FUTEX, "futex_wait_queue"),
            };
            Thread {
                tid,
                state,
                syscall,
                wchan,
            }
        })
        .collect();
    Proc {
        threads,
        cwd: Some(bundle),
        cmdline,
        // Truncated to 15 bytes by the kernel, like every comm.
        comm: "containerd-shim".to_string(),
        ..user_proc(pid, 1, "", &[], started, rng.between(2_800, 3_800) as u64)
    }
}

/// Every process of the node, exactly `--processes` of them.
fn plan_processes(
    args: &Args,
    times: Times,
    tasks: &Path,
    pods: &mut [Pod],
    containers: &mut [Container],
    rng: &mut Rng,
    counts: &mut Counts,
) -> Result<Vec<Proc>, String> {
    let Times { boot, now } = times;
    let (total, address) = (args.processes, args.address.as_str());
    let mut procs = Vec::with_capacity(total);
    let leaked_shims = (pods.len() / 40).max(1);
    // A leaked shim with a defunct child, a shim of another containerd with
    // its container, and a `shim ... delete` cleanup run.
    let extras = leaked_shims + 1 + 2 + 1;
    let base = 2 + KERNEL_THREADS.len() + DAEMONS.len();
    let per_container = |c: &Container| match c.kind {
        Kind::Running | Kind::Zombie(Death::Defunct) | Kind::Zombie(Death::Reused) => 1,
        _ => 0,
    };
    let mut needed =
        base + extras + 2 * pods.len() + containers.iter().map(per_container).sum::<usize>();
    // A node with more containers than processes keeps exited ones: turn
    // running containers into exited ones, the last first, until it fits.
    for container in containers.iter_mut().rev() {
        if needed <= total {
            break;
        }
        if container.kind == Kind::Running {
            container.kind = Kind::Exited;
            container.finished = rng.between(container.started + SEC, now - MIN);
            container.written = container.finished + rng.between(5_000_000, 80_000_000);
            counts.running -= 1;
            counts.exited += 1;
            counts.converted_to_exited += 1;
            needed -= 1;
        }
    }
    if needed > total {
        return Err(format!(
            "{} containers in {} pods need at least {needed} processes (a shim and a \
             pause process per pod, and the node's own); raise --processes",
            containers.len(),
            pods.len()
        ));
    }

    let mut pids = Pids {
        last: 0,
        reserved: args.daemon_pid,
    };
    let booted = |rng: &mut Rng| boot + rng.between(SEC, 20 * SEC);
    procs.push(user_proc(
        1,
        0,
        "systemd",
        &["/sbin/init", "splash"],
        boot + SEC / 2,
        3_000,
    ));
    pids.last = 1;
    let mut kthreadd = kernel_proc(2, "kthreadd", boot + SEC / 2);
    (kthreadd.ppid, kthreadd.state) = (0, 'S');
    procs.push(kthreadd);
    pids.last = 2;
    for comm in KERNEL_THREADS {
        let pid = pids.next(rng);
        procs.push(kernel_proc(pid, comm, booted(rng)));
    }
    // The daemon's own flags name the node's paths and the socket it
    // listens on: what nodectl ties them to it by (src/paths/tie.rs).
    let state = tasks.ancestors().nth(2).unwrap_or(tasks);
    let node_dir = state.parent().unwrap_or(state);
    let daemon_args = vec![
        "/usr/bin/containerd".to_string(),
        "--config".to_string(),
        node_dir.join("containerd.toml").display().to_string(),
        "--address".to_string(),
        address.to_string(),
        "--root".to_string(),
        node_dir.join("root").display().to_string(),
        "--state".to_string(),
        state.display().to_string(),
    ];
    let daemon_pid = args.daemon_pid;
    for (comm, args) in DAEMONS {
        let pid = pids.next(rng);
        let started = booted(rng);
        let mut process = user_proc(pid, 1, comm, args, started, rng.between(500, 40_000) as u64);
        if let (true, Some(daemon)) = (*comm == "containerd", daemon_pid) {
            // The listener's pid: the pid drawn for it stays unused, so the
            // rest of the node is the same whatever the listener's.
            process.pid = daemon;
            process.cmdline = daemon_args.clone();
            process.cwd = Some(PathBuf::from("/"));
        }
        procs.push(process);
    }

    // Pods in the order they started: a shim, the pause process, then the
    // containers that run (or died without CRI noticing).
    let mut order: Vec<usize> = (0..pods.len()).collect();
    order.sort_by_key(|&p| pods[p].started);
    let mut by_pod: Vec<Vec<usize>> = vec![Vec::new(); pods.len()];
    for (index, container) in containers.iter().enumerate() {
        by_pod[container.pod].push(index);
    }
    let mut shim_pids = vec![0; pods.len()];
    let mut blocked = vec![false; pods.len()];
    for &p in &order {
        let pod = &pods[p];
        let pod_blocked = by_pod[p]
            .iter()
            .any(|&c| matches!(containers[c].kind, Kind::Zombie(_)));
        let bundle = tasks.join(&pod.sandbox_id);
        let shim = shim_proc(
            &mut pids,
            rng,
            &pod.sandbox_id,
            address,
            None,
            bundle,
            pod.started - SEC,
            pod_blocked,
        );
        let shim_pid = shim.pid;
        shim_pids[p] = shim_pid;
        blocked[p] = pod_blocked;
        procs.push(shim);
        let pause = pids.next(rng);
        procs.push(user_proc(
            pause,
            shim_pid,
            PAUSE.comm,
            PAUSE.args,
            pod.started,
            PAUSE.rss_pages,
        ));
        for &c in &by_pod[p] {
            let container = &mut containers[c];
            if !container.has_task() {
                continue;
            }
            let pid = pids.next(rng);
            container.pid = pid;
            let program = container.program;
            let mut process = user_proc(
                pid,
                shim_pid,
                program.comm,
                program.args,
                container.started,
                program.rss_pages,
            );
            match container.kind {
                Kind::Running => procs.push(process),
                Kind::Zombie(Death::Defunct) => {
                    (process.state, process.rss_pages) = ('Z', 0);
                    process.cmdline.clear();
                    procs.push(process);
                }
                // Held by a later process, created below; or by nobody.
                _ => {}
            }
        }
    }
    for (p, pod) in pods.iter_mut().enumerate() {
        (pod.shim_pid, pod.blocked) = (shim_pids[p], blocked[p]);
        counts.blocked_shims += pod.blocked as usize;
    }

    // Pids of dead containers that later processes took over.
    for container in containers.iter() {
        if container.kind == Kind::Zombie(Death::Reused) {
            procs.push(user_proc(
                container.pid,
                1,
                "sh",
                &["sh", "-c", "sleep 3600"],
                now - rng.between(MIN, 20 * MIN),
                150,
            ));
        }
    }

    // Leaked shims: no record anywhere, no live child; the first still has a
    // defunct one.
    for n in 0..leaked_shims {
        let id = rng.hex(64);
        // Its bundle directory is gone too.
        let bundle = tasks.join(&id);
        let started = now - rng.between(HOUR, 3 * DAY);
        let shim = shim_proc(&mut pids, rng, &id, address, None, bundle, started, false);
        let shim_pid = shim.pid;
        procs.push(shim);
        if n == 0 {
            let pid = pids.next(rng);
            let mut child = user_proc(pid, shim_pid, "nginx", &[], started + SEC, 0);
            child.state = 'Z';
            procs.push(child);
        }
    }
    counts.leaked_shims = leaked_shims;
    // Another containerd's shim, serving its own container: never judged.
    let other_id = rng.hex(64);
    let started = now - rng.between(DAY, 2 * DAY);
    let other = shim_proc(
        &mut pids,
        rng,
        &other_id,
        OTHER_ADDRESS,
        None,
        PathBuf::from(format!(
            "/run/k3s/containerd/io.containerd.runtime.v2.task/{NAMESPACE}/{other_id}"
        )),
        started,
        false,
    );
    let other_pid = other.pid;
    procs.push(other);
    let pid = pids.next(rng);
    procs.push(user_proc(
        pid,
        other_pid,
        "traefik",
        &["traefik", "--configfile=/config/traefik.yaml"],
        started + SEC,
        9_000,
    ));
    // containerd cleaning up after a dead shim: `shim ... delete`, one-shot.
    let gone = rng.hex(64);
    let cleanup = shim_proc(
        &mut pids,
        rng,
        &gone,
        address,
        Some("delete"),
        tasks.join(&gone),
        now - SEC,
        false,
    );
    procs.push(cleanup);

    // The rest of the node: workers and users' processes.
    let mut n = 0;
    while procs.len() < total {
        let pid = pids.next(rng);
        let started = rng.between(boot + MIN, now - SEC);
        if n % 3 == 0 {
            let comm = format!("kworker/u4:{}-events_unbound", n / 3);
            procs.push(kernel_proc(pid, &comm, started));
        } else {
            let (comm, args) = rng.pick(HOST_PROGRAMS);
            let rss = rng.between(100, 20_000) as u64;
            procs.push(user_proc(pid, 1, comm, args, started, rss));
        }
        n += 1;
    }
    procs.sort_by_key(|p| p.pid);
    counts.processes = procs.len();
    counts.shims = procs.iter().filter(|p| p.comm == "containerd-shim").count();
    counts.shim_threads = procs.iter().map(|p| p.threads.len()).sum();
    Ok(procs)
}

/// CRI's status file: the JSON containerd writes, Go field names, unix ns.
fn status_json(c: &Container, pid_offset: i64) -> String {
    // An exited container's pid stays 0 whatever the offset.
    let pid = if c.pid == 0 {
        0
    } else {
        i64::from(c.pid) + pid_offset
    };
    format!(
        "{{\"Version\":\"v1\",\"Pid\":{},\"CreatedAt\":{},\"StartedAt\":{},\"FinishedAt\":{},\
         \"ExitCode\":{},\"Reason\":\"{}\",\"Message\":\"\",\"Resources\":{{\"linux\":{{}}}}}}",
        pid, c.created, c.started, c.finished, c.exit_code, c.reason
    )
}

fn write_cri_store(
    root: &Path,
    state: &Path,
    pods: &[Pod],
    containers: &[Container],
    pid_offset: i64,
) -> Result<(), String> {
    let cri_root = root.join("io.containerd.grpc.v1.cri");
    let store = cri_root.join("containers");
    mkdir(&store)?;
    let mut torn = 0;
    for container in containers {
        let dir = store.join(&container.id);
        mkdir(&dir)?;
        let path = dir.join("status");
        let mut json = status_json(container, pid_offset);
        if container.kind == Kind::Corrupt {
            // Torn writes: half a file, or nothing.
            let keep = if torn % 2 == 0 { json.len() / 2 } else { 0 };
            json.truncate(keep);
            torn += 1;
        }
        write(&path, json)?;
        set_mtime(&path, container.written)?;
    }
    // Per sandbox, CRI keeps hostname, hosts and resolv.conf under root and
    // the shm mount point under state.
    for pod in pods {
        let dir = cri_root.join("sandboxes").join(&pod.sandbox_id);
        mkdir(&dir)?;
        write(&dir.join("hostname"), format!("{}\n", pod.name))?;
        write(
            &dir.join("hosts"),
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        )?;
        write(
            &dir.join("resolv.conf"),
            format!(
                "search {}.svc.cluster.local svc.cluster.local cluster.local\n\
                 nameserver 10.96.0.10\noptions ndots:5\n",
                pod.namespace
            ),
        )?;
        mkdir(
            &state
                .join("io.containerd.grpc.v1.cri/sandboxes")
                .join(&pod.sandbox_id)
                .join("shm"),
        )?;
    }
    Ok(())
}

/// An OCI runtime spec of realistic size (about 10 KiB) with CRI's annotations.
fn oci_spec(args: &[&str], annotations: &[(&str, String)], rng: &mut Rng) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let list = |items: &[String]| items.join(",");
    let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
    let mut env = vec![
        quote("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        quote(&format!("HOSTNAME={}", rng.suffix(12))),
    ];
    // What Kubernetes injects for every service of the namespace.
    for service in [
        "KUBERNETES",
        "WEB",
        "API",
        "CHECKOUT",
        "CACHE",
        "SEARCH",
        "REPORT",
        "INGEST",
        "PAYMENTS",
        "LEDGER",
    ] {
        let ip = format!("10.96.{}.{}", rng.below(255), rng.below(255));
        env.push(quote(&format!("{service}_SERVICE_HOST={ip}")));
        env.push(quote(&format!("{service}_SERVICE_PORT=443")));
        env.push(quote(&format!("{service}_PORT=tcp://{ip}:443")));
        env.push(quote(&format!("{service}_PORT_443_TCP=tcp://{ip}:443")));
        env.push(quote(&format!("{service}_PORT_443_TCP_PROTO=tcp")));
        env.push(quote(&format!("{service}_PORT_443_TCP_PORT=443")));
        env.push(quote(&format!("{service}_PORT_443_TCP_ADDR={ip}")));
    }
    let caps: Vec<String> = [
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_FSETID",
        "CAP_FOWNER",
        "CAP_MKNOD",
        "CAP_NET_RAW",
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETFCAP",
        "CAP_SETPCAP",
        "CAP_NET_BIND_SERVICE",
        "CAP_SYS_CHROOT",
        "CAP_KILL",
        "CAP_AUDIT_WRITE",
    ]
    .iter()
    .map(|c| quote(c))
    .collect();
    let caps = list(&caps);
    let masked: Vec<String> = [
        "/proc/asound",
        "/proc/acpi",
        "/proc/kcore",
        "/proc/keys",
        "/proc/latency_stats",
        "/proc/timer_list",
        "/proc/timer_stats",
        "/proc/sched_debug",
        "/proc/scsi",
        "/sys/firmware",
        "/sys/devices/virtual/powercap",
    ]
    .iter()
    .map(|p| quote(p))
    .collect();
    let readonly: Vec<String> = [
        "/proc/bus",
        "/proc/fs",
        "/proc/irq",
        "/proc/sys",
        "/proc/sysrq-trigger",
    ]
    .iter()
    .map(|p| quote(p))
    .collect();
    let mounts: Vec<String> = [
        ("/proc", "proc", "proc", "\"nosuid\",\"noexec\",\"nodev\""),
        (
            "/dev",
            "tmpfs",
            "tmpfs",
            "\"nosuid\",\"strictatime\",\"mode=755\",\"size=65536k\"",
        ),
        (
            "/dev/pts",
            "devpts",
            "devpts",
            "\"nosuid\",\"noexec\",\"newinstance\",\"ptmxmode=0666\",\"mode=0620\",\"gid=5\"",
        ),
        (
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            "\"nosuid\",\"noexec\",\"nodev\"",
        ),
        (
            "/sys",
            "sysfs",
            "sysfs",
            "\"nosuid\",\"noexec\",\"nodev\",\"ro\"",
        ),
        (
            "/sys/fs/cgroup",
            "cgroup",
            "cgroup",
            "\"nosuid\",\"noexec\",\"nodev\",\"relatime\",\"ro\"",
        ),
        (
            "/etc/hosts",
            "bind",
            "/var/lib/kubelet/pods/x/etc-hosts",
            "\"rbind\",\"rprivate\",\"rw\"",
        ),
        (
            "/dev/termination-log",
            "bind",
            "/var/lib/kubelet/pods/x/containers/app/0",
            "\"rbind\",\"rprivate\",\"rw\"",
        ),
        (
            "/etc/hostname",
            "bind",
            "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/x/hostname",
            "\"rbind\",\"rprivate\",\"rw\"",
        ),
        (
            "/etc/resolv.conf",
            "bind",
            "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/x/resolv.conf",
            "\"rbind\",\"rprivate\",\"rw\"",
        ),
        (
            "/dev/shm",
            "bind",
            "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/x/shm",
            "\"rbind\",\"rprivate\",\"rw\"",
        ),
        (
            "/var/run/secrets/kubernetes.io/serviceaccount",
            "bind",
            "/var/lib/kubelet/pods/x/volumes/kubernetes.io~projected/kube-api-access-x",
            "\"rbind\",\"rprivate\",\"ro\"",
        ),
    ]
    .iter()
    .map(|(dest, kind, source, options)| {
        format!(
            "{{\"destination\":{},\"type\":{},\"source\":{},\"options\":[{options}]}}",
            quote(dest),
            quote(kind),
            quote(source)
        )
    })
    .collect();
    let annotations: Vec<String> = annotations
        .iter()
        .map(|(key, value)| format!("{}:{}", quote(key), quote(value)))
        .collect();
    format!(
        "{{\"ociVersion\":\"1.1.0\",\"process\":{{\"user\":{{\"uid\":65535,\"gid\":65535,\
         \"additionalGids\":[65535]}},\"args\":[{}],\"env\":[{}],\"cwd\":\"/\",\
         \"capabilities\":{{\"bounding\":[{caps}],\"effective\":[{caps}],\"permitted\":[{caps}]}},\
         \"noNewPrivileges\":true,\"apparmorProfile\":\"cri-containerd.apparmor.d\",\
         \"oomScoreAdj\":-997}},\"root\":{{\"path\":\"rootfs\",\"readonly\":true}},\
         \"mounts\":[{}],\"annotations\":{{{}}},\"linux\":{{\"resources\":{{\"devices\":\
         [{{\"allow\":false,\"access\":\"rwm\"}}],\"memory\":{{\"limit\":536870912}},\
         \"cpu\":{{\"shares\":102,\"quota\":50000,\"period\":100000}}}},\
         \"cgroupsPath\":\"kubepods-burstable-pod{}.slice:cri-containerd:{}\",\
         \"namespaces\":[{{\"type\":\"pid\"}},{{\"type\":\"ipc\",\"path\":\"/proc/1/ns/ipc\"}},\
         {{\"type\":\"uts\",\"path\":\"/proc/1/ns/uts\"}},{{\"type\":\"mount\"}},\
         {{\"type\":\"network\",\"path\":\"/proc/1/ns/net\"}}],\
         \"maskedPaths\":[{}],\"readonlyPaths\":[{}]}}}}",
        list(&args),
        list(&env),
        list(&mounts),
        list(&annotations),
        rng.uuid().replace('-', "_"),
        rng.hex(64),
        list(&masked),
        list(&readonly)
    )
}

fn write_bundles(
    state: &Path,
    pods: &[Pod],
    containers: &[Container],
    rng: &mut Rng,
    counts: &mut Counts,
) -> Result<(), String> {
    let tasks = state.join("io.containerd.runtime.v2.task").join(NAMESPACE);
    mkdir(&tasks)?;
    let socket = |rng: &mut Rng| format!("unix:///run/containerd/s/{}\n", rng.hex(64));
    let pod_annotations = |pod: &Pod| {
        vec![
            ("io.kubernetes.cri.sandbox-id", pod.sandbox_id.clone()),
            ("io.kubernetes.cri.sandbox-name", pod.name.clone()),
            (
                "io.kubernetes.cri.sandbox-namespace",
                pod.namespace.to_string(),
            ),
            ("io.kubernetes.cri.sandbox-uid", pod.uid.clone()),
        ]
    };
    for pod in pods {
        let dir = tasks.join(&pod.sandbox_id);
        mkdir(&dir.join("rootfs"))?;
        let mut annotations = pod_annotations(pod);
        annotations.push(("io.kubernetes.cri.container-type", "sandbox".to_string()));
        annotations.push((
            "io.kubernetes.cri.sandbox-log-directory",
            format!("/var/log/pods/{}_{}_{}", pod.namespace, pod.name, pod.uid),
        ));
        write(
            &dir.join("config.json"),
            oci_spec(PAUSE.args, &annotations, rng),
        )?;
        write(&dir.join("shim.pid"), pod.shim_pid.to_string())?;
        write(&dir.join("address"), socket(rng))?;
        counts.bundles += 1;
    }
    for container in containers.iter().filter(|c| c.has_task()) {
        let pod = &pods[container.pod];
        let dir = tasks.join(&container.id);
        mkdir(&dir.join("rootfs"))?;
        let mut annotations = pod_annotations(pod);
        annotations.push(("io.kubernetes.cri.container-type", "container".to_string()));
        annotations.push((
            "io.kubernetes.cri.container-name",
            container.name.to_string(),
        ));
        annotations.push((
            "io.kubernetes.cri.image-name",
            format!(
                "registry.example.com/{}:1.{}",
                container.program.comm,
                container.pod % 9
            ),
        ));
        write(
            &dir.join("config.json"),
            oci_spec(container.program.args, &annotations, rng),
        )?;
        write(&dir.join("address"), socket(rng))?;
        counts.bundles += 1;
    }
    Ok(())
}

/// `/proc/<pid>/stat` as the kernel prints it: 52 fields, `comm` in parens.
fn stat_line(p: &Proc, id: i32, state: char, boot: i64) -> String {
    let starttime = (p.started - boot).max(0) / (SEC / TICKS_PER_SECOND);
    let threads = p.threads.len().max(1);
    let (flags, vsize, rss, code, stack, data, args, sigs) = if p.kernel || state == 'Z' {
        let flags = if p.kernel { 69_238_880 } else { 4_228_108 };
        (flags, 0, 0, 0, 0, 0, 0, (0, 2_147_483_647, 0))
    } else {
        let base = 0x5555_5555_4000u64 + ((p.pid as u64) << 16);
        let vsize = p.rss_pages * 4096 * 3 + 0x0800_0000;
        (
            4_194_560,
            vsize,
            p.rss_pages,
            base,
            0x7ffd_0000_0000u64 + ((p.pid as u64) << 12),
            base + 0x20_0000,
            0x7ffd_0000_1000u64 + ((p.pid as u64) << 12),
            (0, 4_096, 81_920),
        )
    };
    let utime = (starttime / 7) % 100_000;
    format!(
        "{id} ({comm}) {state} {ppid} {pgrp} {session} 0 -1 {flags} {minflt} 0 {majflt} 0 \
         {utime} {stime} 0 0 20 0 {threads} 0 {starttime} {vsize} {rss} 18446744073709551615 \
         {code} {code_end} {stack} 0 0 0 {blocked} {ignored} {caught} 0 0 0 17 {cpu} 0 0 \
         {blkio} 0 0 {data} {data_end} {brk} {args} {args_end} {args_end} {env_end} 0\n",
        comm = p.comm,
        ppid = p.ppid,
        pgrp = if p.kernel { 0 } else { p.pid },
        session = if p.kernel { 0 } else { p.pid },
        minflt = p.rss_pages * 3,
        majflt = p.rss_pages / 50,
        stime = utime / 3,
        code_end = if code == 0 { 0 } else { code + 0x1_8000 },
        blocked = sigs.0,
        ignored = sigs.1,
        caught = sigs.2,
        cpu = id % 2,
        blkio = if state == 'D' { 1_200 } else { 0 },
        data_end = if data == 0 { 0 } else { data + 0x2000 },
        brk = if data == 0 { 0 } else { data + 0x10_0000 },
        args_end = if args == 0 { 0 } else { args + 0x80 },
        env_end = if args == 0 { 0 } else { args + 0xf00 },
    )
}

fn write_procfs(
    proc_dir: &Path,
    boot: i64,
    now: i64,
    procs: &[Proc],
    daemon_pid: Option<i32>,
) -> Result<(), String> {
    mkdir(&proc_dir.join("pressure"))?;
    mkdir(&proc_dir.join("self"))?;
    if daemon_pid.is_some() {
        // The host's namespaces, as nodectl's own (PID 1's, else its own:
        // `daemon_proof::host`), for the daemon's to be compared with.
        for dir in [proc_dir.join("1"), proc_dir.join("self")] {
            link_namespaces(&dir, "/proc/self")?;
        }
        // Root-owned binaries by the names the kernel would give them
        // (`/proc/<pid>/exe` names the file it executed): never run.
        let bin = proc_dir.join(PROOF_BIN);
        mkdir(&bin)?;
        for name in [DAEMON_BINARY, SHIM_BINARY] {
            symlink(ROOT_OWNED_BINARY, bin.join(name)).map_err(|e| io_err(&bin.join(name), e))?;
        }
    }
    let uptime_ticks = (now - boot) / (SEC / TICKS_PER_SECOND);
    let blocked = procs
        .iter()
        .flat_map(|p| &p.threads)
        .filter(|t| t.state == 'D')
        .count();
    let cpu = |share: i64| {
        format!(
            "{} 1204 {} {} {} 0 {} 812 0 0",
            uptime_ticks / share,
            uptime_ticks / (share * 4),
            uptime_ticks - uptime_ticks / share,
            uptime_ticks / 40,
            uptime_ticks / 900
        )
    };
    write(
        &proc_dir.join("stat"),
        format!(
            "cpu  {}\ncpu0 {}\ncpu1 {}\nintr 48211934 0 9 0 0 0 0 0 0 0 0 0 0 156 0 0 0\n\
             ctxt 912837465\nbtime {}\nprocesses {}\nprocs_running 3\nprocs_blocked {blocked}\n\
             softirq 30117845 0 8123456 12 2345678 987654 0 4567 9876543 0 8800000\n",
            cpu(3),
            cpu(6),
            cpu(6),
            boot / SEC,
            procs.last().map_or(0, |p| p.pid) + 1_000
        ),
    )?;
    write(&proc_dir.join("meminfo"), MEMINFO)?;
    // The header alone: no swap area, as `SwapTotal` in MEMINFO says.
    write(
        &proc_dir.join("swaps"),
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
    )?;
    write(
        &proc_dir.join("pressure/io"),
        "some avg10=31.52 avg60=28.07 avg300=17.90 total=9123456789\n\
         full avg10=24.11 avg60=21.80 avg300=13.02 total=7012345678\n",
    )?;
    symlink("../../mountinfo", proc_dir.join("self/mountinfo"))
        .map_err(|e| io_err(&proc_dir.join("self/mountinfo"), e))?;
    // The calling thread's own: nodectl reads a network namespace's
    // interfaces from a thread that joined it (`thread-self/net/dev`).
    symlink("/proc/thread-self", proc_dir.join("thread-self"))
        .map_err(|e| io_err(&proc_dir.join("thread-self"), e))?;

    for p in procs {
        let dir = proc_dir.join(p.pid.to_string());
        mkdir(&dir)?;
        write(&dir.join("stat"), stat_line(p, p.pid, p.state, boot))?;
        let mut cmdline = String::new();
        for arg in &p.cmdline {
            cmdline.push_str(arg);
            cmdline.push('\0');
        }
        write(&dir.join("cmdline"), cmdline)?;
        write(&dir.join("comm"), format!("{}\n", p.comm))?;
        match (daemon_pid, proof_binary(p)) {
            (Some(daemon), Some(binary)) => write_proof(proc_dir, &dir, daemon, binary)?,
            // No listener to borrow the kernel's facts from: a containerd
            // whose binary was upgraded while it runs (the kernel then
            // links the old one as deleted), never proven.
            (None, Some(DAEMON_BINARY)) => {
                let exe = dir.join("exe");
                symlink("/usr/bin/containerd (deleted)", &exe).map_err(|e| io_err(&exe, e))?;
            }
            _ => {}
        }
        if let Some(cwd) = &p.cwd {
            symlink(cwd, dir.join("cwd")).map_err(|e| io_err(&dir.join("cwd"), e))?;
        }
        for thread in &p.threads {
            let task = dir.join("task").join(thread.tid.to_string());
            mkdir(&task)?;
            write(
                &task.join("stat"),
                stat_line(p, thread.tid, thread.state, boot),
            )?;
            write(
                &task.join("syscall"),
                format!(
                    "{} 0xc000{:06x} 0x80 0x0 0x0 0x0 0x0 0x7ffd{:08x} 0x46f923\n",
                    thread.syscall, thread.tid, thread.tid
                ),
            )?;
            write(&task.join("wchan"), thread.wchan)?;
        }
        if let Some(daemon) = daemon_pid.filter(|&d| d != p.pid) {
            write_descriptors_and_threads(&dir, p, daemon)?;
        }
    }
    Ok(())
}

/// What nodectl's look for the holders of CRI's network namespaces reads
/// of every process on a node (src/sources/netns.rs, `holders_in`): each
/// thread's `task/<tid>/ns/net`, in the host's namespace here (the
/// listener's, as the other borrowed links), and the descriptors in
/// `fd/`, links the kernel spells `/dev/null`, `socket:[<inode>]`,
/// `pipe:[<inode>]`, `anon_inode:[eventpoll]` (read as links, none a
/// namespace). A defunct process has neither; a kernel thread no
/// descriptor. A pause process's `ns/net` is its pod's (`write_netns`).
/// The node's containerd has none: its descriptors would tie its root.
fn write_descriptors_and_threads(dir: &Path, p: &Proc, daemon: i32) -> Result<(), String> {
    if p.state == 'Z' {
        return Ok(());
    }
    let tids: Vec<i32> = match p.threads.is_empty() {
        true => vec![p.pid],
        false => p.threads.iter().map(|t| t.tid).collect(),
    };
    if p.comm != PAUSE.comm {
        for tid in tids {
            let ns = dir.join("task").join(tid.to_string()).join("ns");
            mkdir(&ns)?;
            symlink(format!("/proc/{daemon}/ns/net"), ns.join("net"))
                .map_err(|e| io_err(&ns.join("net"), e))?;
        }
    }
    let fd = dir.join("fd");
    mkdir(&fd)?;
    if p.kernel {
        return Ok(());
    }
    let inode = 40_000 + p.pid as u64 * 8;
    let targets = [
        "/dev/null".to_string(),
        "/dev/null".to_string(),
        "/dev/null".to_string(),
        format!("socket:[{inode}]"),
        "anon_inode:[eventpoll]".to_string(),
        format!("pipe:[{}]", inode + 1),
        format!("pipe:[{}]", inode + 1),
    ];
    for (n, target) in targets.iter().enumerate() {
        symlink(target, fd.join(n.to_string())).map_err(|e| io_err(&fd.join(n.to_string()), e))?;
    }
    Ok(())
}

/// Where the synthetic procfs keeps the binaries its `exe` links name.
const PROOF_BIN: &str = "daemon-bin";
const DAEMON_BINARY: &str = "containerd";
const SHIM_BINARY: &str = "containerd-shim-runc-v2";
/// A root-owned binary no one else may write, present on every machine.
const ROOT_OWNED_BINARY: &str = "/bin/true";

/// The binary a process of the node runs, if nodectl proves it: the
/// daemon's, or a shim's (every `containerd-shim`, another containerd's
/// and the `delete` run too: real shims, judged by their `-address`).
fn proof_binary(p: &Proc) -> Option<&'static str> {
    match p.comm.as_str() {
        "containerd" => Some(DAEMON_BINARY),
        "containerd-shim" => Some(SHIM_BINARY),
        _ => None,
    }
}

/// `ns/{user,pid,mnt,net}` in `dir`, links to those of the process whose
/// procfs directory is `real` (resolved when nodectl reads them).
fn link_namespaces(dir: &Path, real: &str) -> Result<(), String> {
    let ns = dir.join("ns");
    mkdir(&ns)?;
    for name in ["user", "pid", "mnt", "net"] {
        symlink(format!("{real}/ns/{name}"), ns.join(name))
            .map_err(|e| io_err(&ns.join(name), e))?;
    }
    Ok(())
}

/// What nodectl proves a containerd or a shim by (`daemon_proof`,
/// `shim_proof`), in the node's `<pid>` directory `dir`, as the kernel
/// would give them for a process the listener (`daemon`, a real process)
/// started: its namespaces and uids are the listener's (`ns/*` and
/// `status` link to its own), its root is `/` (its `-address` resolves to
/// the listener's socket there), and its `exe` names a binary called
/// `binary` that reaches a root-owned file. Only names are made by hand,
/// as in tests/support/fake_daemon.rs.
fn write_proof(proc_dir: &Path, dir: &Path, daemon: i32, binary: &str) -> Result<(), String> {
    let real = format!("/proc/{daemon}");
    link_namespaces(dir, &real)?;
    let links = [
        ("status", format!("{real}/status")),
        ("root", "/".to_string()),
        (
            "exe",
            proc_dir.join(PROOF_BIN).join(binary).display().to_string(),
        ),
    ];
    for (name, target) in links {
        symlink(&target, dir.join(name)).map_err(|e| io_err(&dir.join(name), e))?;
    }
    Ok(())
}

const MEMINFO: &str = "MemTotal:       24684092 kB
MemFree:         1875012 kB
MemAvailable:    9043412 kB
Buffers:          109820 kB
Cached:          8281584 kB
SwapCached:            0 kB
Active:         14104732 kB
Inactive:        6183700 kB
Active(anon):   11201520 kB
Inactive(anon):   404364 kB
Active(file):    2903212 kB
Inactive(file):  5779336 kB
Unevictable:       11576 kB
Mlocked:            9808 kB
SwapTotal:             0 kB
SwapFree:              0 kB
Zswap:                 0 kB
Zswapped:              0 kB
Dirty:           2614496 kB
Writeback:        412040 kB
AnonPages:      11508496 kB
Mapped:           910036 kB
Shmem:             98856 kB
KReclaimable:     594132 kB
Slab:             829604 kB
SReclaimable:     594132 kB
SUnreclaim:       235472 kB
KernelStack:       31328 kB
PageTables:        61660 kB
SecPageTables:         0 kB
NFS_Unstable:          0 kB
Bounce:                0 kB
WritebackTmp:          0 kB
CommitLimit:    12342044 kB
Committed_AS:   28048480 kB
VmallocTotal:   34359738367 kB
VmallocUsed:       75588 kB
VmallocChunk:          0 kB
Percpu:            10856 kB
AnonHugePages:   2048000 kB
ShmemHugePages:        0 kB
ShmemPmdMapped:        0 kB
FileHugePages:         0 kB
FilePmdMapped:         0 kB
HugePages_Total:       0
HugePages_Free:        0
HugePages_Rsvd:        0
HugePages_Surp:        0
Hugepagesize:       2048 kB
Hugetlb:               0 kB
DirectMap4k:      520480 kB
DirectMap2M:    18076672 kB
DirectMap1G:     8388608 kB
";

/// The mount table: the node's own mounts, containerd's (task rootfs, sandbox
/// shm, and leaked ones), then kubelet's volumes, network namespaces and the
/// like until there are `total`.
fn mountinfo(
    total: usize,
    root: &Path,
    state: &Path,
    pods: &[Pod],
    containers: &[Container],
    rng: &mut Rng,
    counts: &mut Counts,
) -> Result<String, String> {
    // The node's own mounts elsewhere, under `host/` of the node (beside
    // `root/`), so that `--mount-table` mounts nothing outside it.
    let host = root.parent().unwrap_or(root).join("host");
    let host = host.display();
    let (root, state) = (root.display().to_string(), state.display().to_string());
    let snapshots = format!("{root}/io.containerd.snapshotter.v1.overlayfs/snapshots");
    let tasks = format!("{state}/io.containerd.runtime.v2.task/{NAMESPACE}");
    let sandboxes = format!("{state}/io.containerd.grpc.v1.cri/sandboxes");
    let base: [&str; BASE_MOUNTS] = [
        "1 0 252:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,errors=remount-ro",
        "2 1 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw",
        "3 1 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw",
        "4 1 0:5 / /dev rw,nosuid,relatime shared:2 - devtmpfs udev rw,size=12300000k,nr_inodes=3075000,mode=755,inode64",
        "5 4 0:24 / /dev/pts rw,nosuid,noexec,relatime shared:3 - devpts devpts rw,gid=5,mode=620,ptmxmode=000",
        "6 1 0:25 / /run rw,nosuid,nodev,noexec,relatime shared:5 - tmpfs tmpfs rw,size=2468412k,mode=755,inode64",
        "7 2 0:6 / /sys/kernel/security rw,nosuid,nodev,noexec,relatime shared:8 - securityfs securityfs rw",
        "8 4 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw,inode64",
        "9 6 0:27 / /run/lock rw,nosuid,nodev,noexec,relatime shared:6 - tmpfs tmpfs rw,size=5120k,inode64",
        "10 2 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot",
        "11 2 0:29 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:10 - pstore pstore rw",
        "12 2 0:30 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:11 - bpf bpf rw,mode=700",
        "13 3 0:31 / /proc/sys/fs/binfmt_misc rw,relatime shared:12 - autofs systemd-1 rw,fd=29,pgrp=1,timeout=0,minproto=5,maxproto=5,direct,pipe_ino=17170",
        "14 4 0:20 / /dev/mqueue rw,nosuid,nodev,noexec,relatime shared:14 - mqueue mqueue rw",
        "15 4 0:32 / /dev/hugepages rw,relatime shared:15 - hugetlbfs hugetlbfs rw,pagesize=2M",
        "16 2 0:7 / /sys/kernel/debug rw,nosuid,nodev,noexec,relatime shared:16 - debugfs debugfs rw",
        "17 2 0:12 / /sys/kernel/tracing rw,nosuid,nodev,noexec,relatime shared:17 - tracefs tracefs rw",
        "18 2 0:33 / /sys/fs/fuse/connections rw,nosuid,nodev,noexec,relatime shared:18 - fusectl fusectl rw",
        "19 2 0:21 / /sys/kernel/config rw,nosuid,nodev,noexec,relatime shared:19 - configfs configfs rw",
        "20 1 252:16 / /var/lib/kubelet rw,relatime shared:20 - ext4 /dev/vdb rw",
        "21 1 252:16 /containerd /var/lib/containerd rw,relatime shared:21 - ext4 /dev/vdb rw",
    ];
    let mut lines: Vec<String> = base.iter().map(|l| l.to_string()).collect();
    let mut next_id = 22;
    let mut minor = 40;
    let mut push = |lines: &mut Vec<String>, parent: u32, point: &str, rest: &str| {
        lines.push(format!("{next_id} {parent} 0:{minor} / {point} {rest}",));
        next_id += 1;
        minor += 1;
    };
    let mut snapshot = 10;
    let mut overlay = |rng: &mut Rng, id: &str| {
        let layers = rng.between(3, 12);
        let lower: Vec<String> = (0..layers)
            .map(|_| format!("{snapshots}/{}/fs", rng.between(1, 9_000)))
            .collect();
        snapshot += 1;
        let volatile = if rng.below(3) == 0 { ",volatile" } else { "" };
        (
            format!("{tasks}/{id}/rootfs"),
            format!(
                "rw,relatime - overlay overlay rw,lowerdir={},upperdir={snapshots}/{snapshot}/fs,\
                 workdir={snapshots}/{snapshot}/work{volatile},uuid=on",
                lower.join(":")
            ),
        )
    };
    let shm = "rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k,inode64";

    let leaked = (pods.len() / 40).max(1);
    let needed = base.len()
        + 2 * pods.len()
        + containers.iter().filter(|c| c.has_task()).count()
        + leaked
        + 1;
    if needed > total {
        return Err(format!(
            "{} pods and {} live tasks need at least {needed} mounts; raise --mounts",
            pods.len(),
            containers.iter().filter(|c| c.has_task()).count()
        ));
    }
    for pod in pods {
        let (point, rest) = overlay(rng, &pod.sandbox_id);
        push(&mut lines, 6, &point, &rest);
        push(
            &mut lines,
            6,
            &format!("{sandboxes}/{}/shm", pod.sandbox_id),
            shm,
        );
        counts.rootfs_mounts += 1;
        counts.shm_mounts += 1;
    }
    for container in containers.iter().filter(|c| c.has_task()) {
        let (point, rest) = overlay(rng, &container.id);
        push(&mut lines, 6, &point, &rest);
        counts.rootfs_mounts += 1;
    }
    // Left behind by tasks and a sandbox that nothing on disk knows any more.
    for _ in 0..leaked {
        let id = rng.hex(64);
        let (point, rest) = overlay(rng, &id);
        push(&mut lines, 6, &point, &rest);
    }
    let id = rng.hex(64);
    push(&mut lines, 6, &format!("{sandboxes}/{id}/shm"), shm);
    counts.leaked_mounts = leaked + 1;

    // Everything else a node mounts, round-robin over the pods.
    let mut n = 0;
    while lines.len() < total {
        let uid = if pods.is_empty() {
            rng.uuid()
        } else {
            pods[n % pods.len()].uid.clone()
        };
        let volumes = format!("{host}/var/lib/kubelet/pods/{uid}/volumes");
        let (point, rest) = match n % 6 {
            0 => (
                format!("{volumes}/kubernetes.io~projected/kube-api-access-{}", rng.suffix(5)),
                "rw,relatime - tmpfs tmpfs rw,size=524288k,inode64".to_string(),
            ),
            1 => (
                format!("{host}/run/netns/cni-{}", rng.uuid()),
                "rw - nsfs nsfs rw".to_string(),
            ),
            2 => (
                format!("{volumes}/kubernetes.io~secret/{}-tls", rng.suffix(6)),
                "rw,relatime - tmpfs tmpfs rw,size=524288k,inode64".to_string(),
            ),
            3 => (
                format!(
                    "{host}/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/{}/globalmount",
                    rng.hex(64)
                ),
                format!("rw,relatime - ext4 /dev/nvme{}n1 rw", rng.below(24) + 1),
            ),
            4 => (
                format!("{volumes}/kubernetes.io~csi/pvc-{}/mount", rng.uuid()),
                format!("rw,relatime - ext4 /dev/nvme{}n1 rw", rng.below(24) + 1),
            ),
            _ => (
                format!("{host}/var/lib/docker/overlay2/{}/merged", rng.hex(64)),
                format!(
                    "rw,relatime - overlay overlay rw,lowerdir={host}/var/lib/docker/overlay2/l/{}:{host}/var/lib/docker/overlay2/l/{},upperdir={host}/var/lib/docker/overlay2/{}/diff,workdir={host}/var/lib/docker/overlay2/{}/work",
                    rng.hex(26).to_uppercase(),
                    rng.hex(26).to_uppercase(),
                    rng.hex(64),
                    rng.hex(64)
                ),
            ),
        };
        push(&mut lines, 20, &point, &rest);
        n += 1;
    }
    counts.mounts = lines.len();
    let mut text = lines.join("\n");
    text.push('\n');
    Ok(text)
}

/// What the node holds, and what each nodectl command must find in it when
/// containerd's API does not answer (the benchmark has no containerd).
/// The smallest subnet prefix, /24 at most, whose host-local range (less
/// the network, gateway and broadcast addresses) holds `addresses`.
fn pod_subnet_prefix(addresses: usize) -> Result<u32, String> {
    (8..=24u32)
        .rev()
        .find(|prefix| (1usize << (32 - prefix)) - 3 >= addresses)
        .ok_or_else(|| format!("{addresses} pod addresses do not fit a /8"))
}

/// The containerd config naming CRI's CNI `conf_dir`, the node's network
/// config, and host-local's store as host-local writes it: a file per
/// address (the container id, `\r\n`, the interface; mtime when it was
/// reserved), `last_reserved_ip.0` (the last address given) and `lock`.
fn write_cni(
    dir: &Path,
    pods: &[Pod],
    now: i64,
    rng: &mut Rng,
    counts: &mut Counts,
) -> Result<(), String> {
    let conf_dir = dir.join("cni/net.d");
    let data_dir = dir.join("cni/networks");
    let quoted = |path: &Path| serde_json::to_string(&path.to_string_lossy()).unwrap_or_default();
    // A JSON string is a TOML basic string too.
    // CRI's pod network namespaces go under its state directory
    // (`netns_mounts_under_state_dir`, CRI's PluginConfig), where the
    // generator writes them (`write_netns`), not the machine's /var/run/netns.
    write(
        &dir.join("containerd.toml"),
        format!(
            "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  \
             netns_mounts_under_state_dir = true\n\n\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\n  conf_dir = {}\n",
            quoted(&conf_dir)
        ),
    )?;

    // Who holds each address, in the order host-local gave them out: the
    // leaked ones, from pods deleted days ago, spread over the range.
    let mut holders: Vec<(String, i64)> = pods
        .iter()
        .map(|pod| (pod.sandbox_id.clone(), pod.started))
        .collect();
    for k in 0..LEAKED_RESERVATIONS {
        let at = k * (holders.len() + 1) / LEAKED_RESERVATIONS;
        holders.insert(at, (rng.hex(64), now - rng.between(9 * DAY, 20 * DAY)));
    }
    let prefix = pod_subnet_prefix(holders.len())?;
    let subnet = format!("{POD_NETWORK}/{prefix}");
    let first_host = u32::from(POD_NETWORK) + 1;
    let config = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": data_dir,
                    "ranges": [[{"subnet": subnet, "gateway": Ipv4Addr::from(first_host).to_string()}]],
                    "routes": [{"dst": "0.0.0.0/0"}]
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    });
    mkdir(&conf_dir)?;
    write(
        &conf_dir.join(format!("10-{CNI_NETWORK}.conflist")),
        serde_json::to_string_pretty(&config).map_err(|e| e.to_string())?,
    )?;

    let store = data_dir.join(CNI_NETWORK);
    mkdir(&store)?;
    let mut last = String::new();
    // After the gateway, the first host.
    for (offset, (id, reserved_at)) in (1..).zip(&holders) {
        last = Ipv4Addr::from(first_host + offset).to_string();
        let path = store.join(&last);
        write(&path, format!("{id}\r\neth0"))?;
        set_mtime(&path, *reserved_at)?;
    }
    write(&store.join("last_reserved_ip.0"), &last)?;
    write(&store.join("lock"), "")?;
    counts.pod_subnet = subnet;
    counts.ip_reservations = holders.len();
    counts.leaked_ip_reservations = LEAKED_RESERVATIONS;
    Ok(())
}

/// Adds `text` at the end of the file at `path`.
fn append(path: &Path, text: impl AsRef<[u8]>) -> Result<(), String> {
    File::options()
        .append(true)
        .open(path)
        .and_then(|mut file| io::Write::write_all(&mut file, text.as_ref()))
        .map_err(|e| io_err(path, e))
}

/// kubelet's pod directories in `kubelet/pods`, as kubelet makes them: per
/// pod (named by its uid, the sandbox's `io.kubernetes.cri.sandbox-uid`)
/// `etc-hosts`, `containers/<name>/` and the projected service-account
/// volume `volumes/kubernetes.io~projected/kube-api-access-*`, where a
/// tmpfs is mounted; then the orphans. Returns the mount table's lines for
/// those tmpfs, numbered on from the table's last mount.
fn write_kubelet_pods(
    dir: &Path,
    pods: &[Pod],
    containers: &[Container],
    now: i64,
    rng: &mut Rng,
    counts: &mut Counts,
) -> Result<String, String> {
    let pods_dir = dir.join("kubelet/pods");
    mkdir(&pods_dir)?;
    // The table's mount ids run 1..=mounts, its anonymous devices 0:(id + 18).
    let mut next_id = counts.mounts + 1;
    let mut lines = String::new();
    let mut mount = |volume: &Path| {
        let _ = writeln!(
            lines,
            "{next_id} 1 0:{} / {} {PROJECTED_TMPFS}",
            next_id + 18,
            volume.display()
        );
        next_id += 1;
    };
    let projected = "volumes/kubernetes.io~projected";
    for (index, pod) in pods.iter().enumerate() {
        let pod_dir = pods_dir.join(&pod.uid);
        let volume = pod_dir.join(format!("{projected}/kube-api-access-{}", rng.suffix(5)));
        mkdir(&volume)?;
        for container in containers.iter().filter(|c| c.pod == index) {
            mkdir(&pod_dir.join("containers").join(container.name))?;
        }
        write(&pod_dir.join("etc-hosts"), ETC_HOSTS)?;
        mount(&volume);
        // Made when kubelet admitted the pod, a moment before its sandbox.
        set_dir_mtime(&pod_dir, pod.started - SEC)?;
    }
    for n in 0..ORPHAN_POD_DIRS {
        let pod_dir = pods_dir.join(rng.uuid());
        mkdir(&pod_dir.join(projected))?;
        if n == 0 {
            let volume = pod_dir.join(format!("{projected}/kube-api-access-{}", rng.suffix(5)));
            mkdir(&volume)?;
            mount(&volume);
        }
        set_dir_mtime(&pod_dir, now - rng.between(2 * DAY, 9 * DAY))?;
    }
    let mounted = pods.len() + 1;
    counts.pod_dirs = pods.len() + ORPHAN_POD_DIRS;
    counts.orphan_pod_dirs = ORPHAN_POD_DIRS;
    counts.pod_dir_mounts = mounted;
    counts.mounts += mounted;
    Ok(lines)
}

/// The hosts file kubelet writes for a pod on the pod network (the pod's
/// own line left out: the synthetic pods have no address of their own).
const ETC_HOSTS: &str = "# Kubernetes-managed hosts file.
127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
fe00::0\tip6-localnet
fe00::0\tip6-mcastprefix
fe00::1\tip6-allnodes
fe00::2\tip6-allrouters
";

/// A cgroup v2 filesystem in `cgroup/` (`cgroup.controllers` at its top)
/// with kubelet's pod cgroups, cgroupfs driver and cgroup root `/`:
/// `kubepods/pod<uid>` (guaranteed), `kubepods/burstable/pod<uid>` and
/// `kubepods/besteffort/pod<uid>`. Below each, the cgroups of its sandbox
/// and of its containers that have a task, their `cgroup.procs` naming the
/// live process of the synthetic procfs (the pause process, the
/// container's; none for a zombie). Then the leaked pod cgroups, empty.
fn write_pod_cgroups(
    dir: &Path,
    pods: &[Pod],
    containers: &[Container],
    procs: &[Proc],
    now: i64,
    rng: &mut Rng,
    counts: &mut Counts,
) -> Result<(), String> {
    let fs_root = dir.join("cgroup");
    mkdir(&fs_root)?;
    write(&fs_root.join(CGROUP_FILES[0].0), CGROUP_FILES[0].1)?;
    let kubepods = fs_root.join("kubepods");
    let qos_dirs = [
        kubepods.clone(),
        kubepods.join("burstable"),
        kubepods.join("besteffort"),
    ];
    for qos_dir in &qos_dirs {
        write_cgroup(qos_dir, "")?;
    }
    let pid_line = |pid: i32| format!("{pid}\n");
    for (index, pod) in pods.iter().enumerate() {
        // A fixed mix: a quarter guaranteed, half burstable, a quarter best effort.
        let qos_dir = &qos_dirs[[0, 1, 1, 2][index % 4]];
        let pod_cgroup = qos_dir.join(format!("pod{}", pod.uid));
        write_cgroup(&pod_cgroup, "")?;
        let pause = procs
            .iter()
            .find(|p| p.ppid == pod.shim_pid && p.comm == PAUSE.comm);
        write_cgroup(
            &pod_cgroup.join(&pod.sandbox_id),
            pause.map(|p| pid_line(p.pid)).unwrap_or_default(),
        )?;
        for container in containers.iter().filter(|c| c.pod == index && c.has_task()) {
            // A zombie's process is gone, or is another's now.
            let pids = match container.kind {
                Kind::Running => pid_line(container.pid),
                _ => String::new(),
            };
            write_cgroup(&pod_cgroup.join(&container.id), pids)?;
        }
        set_dir_mtime(&pod_cgroup, pod.started - SEC)?;
    }
    for n in 0..LEAKED_POD_CGROUPS {
        let pod_cgroup = qos_dirs[1 + n % 2].join(format!("pod{}", rng.uuid()));
        write_cgroup(&pod_cgroup, "")?;
        set_dir_mtime(&pod_cgroup, now - rng.between(2 * DAY, 9 * DAY))?;
    }
    counts.pod_cgroups = pods.len() + LEAKED_POD_CGROUPS;
    counts.leaked_pod_cgroups = LEAKED_POD_CGROUPS;
    Ok(())
}

/// CRI's network namespace of each pod, in its netns directory under state
/// (the config sets `netns_mounts_under_state_dir`): `cni-<uuid>`, as
/// containerd's pkg/netns names them (`NewNetNSFromPID`'s mount point), a
/// plain file where the node has an nsfs bind mount, and that mount's line
/// for `mountinfo`. The pod's pause process is in it: its
/// `task/<pid>/ns/net` (and `ns/net`) links to the file, whose `stat` is
/// the file's identity, as a real link's is the namespace's. Then the
/// leaked ones (a sandbox removed without its teardown): made days ago, no
/// process in them. Returns the mount table's lines, numbered on from the
/// table's last mount.
fn write_netns(
    state: &Path,
    pods: &[Pod],
    procs: &[Proc],
    now: i64,
    rng: &mut Rng,
    counts: &mut Counts,
) -> Result<String, String> {
    let netns_dir = state.join("io.containerd.grpc.v1.cri/netns");
    mkdir(&netns_dir)?;
    let proc_dir = state.parent().unwrap_or(state).join("proc");
    let mut next_id = counts.mounts + 1;
    let mut lines = String::new();
    let mut mount = |path: &Path, made: i64| -> Result<(), String> {
        write(path, "")?;
        set_mtime(path, made)?;
        let inode = fs::metadata(path).map_err(|e| io_err(path, e))?.ino();
        let _ = writeln!(
            lines,
            "{next_id} 6 0:4 net:[{inode}] {} rw shared:5 - nsfs nsfs rw",
            path.display()
        );
        next_id += 1;
        Ok(())
    };
    for pod in pods {
        let path = netns_dir.join(format!("cni-{}", rng.uuid()));
        // Made just before the sandbox's record named it.
        mount(&path, pod.started - SEC)?;
        let pause = procs
            .iter()
            .find(|p| p.ppid == pod.shim_pid && p.comm == PAUSE.comm);
        if let Some(pause) = pause {
            let pid = pause.pid.to_string();
            for ns in [
                proc_dir.join(&pid).join("ns"),
                proc_dir.join(&pid).join("task").join(&pid).join("ns"),
            ] {
                mkdir(&ns)?;
                symlink(&path, ns.join("net")).map_err(|e| io_err(&ns.join("net"), e))?;
            }
        }
    }
    for _ in 0..LEAKED_NETNS {
        let path = netns_dir.join(format!("cni-{}", rng.uuid()));
        mount(&path, now - rng.between(2 * DAY, 9 * DAY))?;
    }
    counts.netns = pods.len() + LEAKED_NETNS;
    counts.leaked_netns = LEAKED_NETNS;
    counts.mounts += pods.len() + LEAKED_NETNS;
    Ok(lines)
}

/// A cgroup directory: a few interface files and `cgroup.procs`.
fn write_cgroup(cgroup: &Path, procs: impl AsRef<[u8]>) -> Result<(), String> {
    mkdir(cgroup)?;
    for (name, contents) in CGROUP_FILES {
        write(&cgroup.join(name), contents)?;
    }
    write(&cgroup.join("cgroup.procs"), procs)
}

/// What is in the node, and (with `--daemon-pid`) what each command must
/// report on it while its containerd accepts connections but never
/// answers: findings by kind, gaps by source, exactly (bench/run fails on
/// any difference). With the API silent:
/// - `leaked-shim` is judged on what is on disk (inferred), `shim-blocked`
///   on the proven shims' threads, `api-unreachable` (a `check` of its own)
///   once for containerd's API and once for CRI's (same socket);
/// - each call that did not answer is a gap of its API: `Version` for
///   every command; `check` also asks containerd for CRI's namespace's
///   containers and leases (`Containers.List`, `Leases.List`, the only
///   namespace: the shims' and `-n`'s are CRI's) and for the snapshotter's
///   snapshots (`Snapshots.List`), and CRI for its `Version`;
/// - the leaked CNI reservations, orphan pod directories, leaked pod
///   cgroups and leaked network namespaces are no finding: they are judged
///   on containerd's or CRI's records, which do not answer
///   (src/checks/leaked_ip.rs, orphan_pod_dir.rs, leaked_pod_cgroup.rs,
///   leaked_netns.rs);
/// - a torn status file is a `cri-store` gap; a leaked network namespace
///   (no record answered, no process in it) has its interfaces looked at,
///   which a plain file cannot give (`setns` EINVAL: the table's mount does
///   not reach nodectl): one `mountinfo` gap of the whole directory, none
///   with `--mount-table` (a real namespace);
/// - with `--mount-table` no leaked mount is a finding: each has its
///   directory, a record on disk while the API is silent (below).
fn expected(c: &Counts, args: &Args) -> String {
    let commands = args.daemon_pid.map(|_| {
        // Findings by kind and gaps by source, those with none left out.
        let counted = |of: &[(&str, usize)]| {
            serde_json::Value::Object(
                of.iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(source, n)| (source.to_string(), (*n).into()))
                    .collect(),
            )
        };
        let store = ("cri-store", c.corrupt);
        // On a real table a leaked mount has its directory (a mount needs
        // one): a leaked rootfs its bundle, a leaked shm its sandbox's
        // directory under state, each a record on disk while the API is
        // silent (src/checks/shared.rs, has_record); and a leaked network
        // namespace's interfaces are seen (`setns` joins a real one).
        let leaked_mounts = if args.mount_table { 0 } else { c.leaked_mounts };
        let netns_gaps = if args.mount_table {
            0
        } else {
            c.leaked_netns.min(1)
        };
        let version = ("containerd-api", 1);
        serde_json::json!({
            "zombies": {
                "findings": counted(&[("zombie", c.zombies), ("late-exit", c.late_exits)]),
                "gaps": counted(&[store, version]),
            },
            "leaked-shims": {
                "findings": counted(&[("leaked-shim", c.leaked_shims)]),
                "gaps": counted(&[store, version]),
            },
            "leaked-mounts": {
                "findings": counted(&[("leaked-mount", leaked_mounts)]),
                "gaps": counted(&[store, version]),
            },
            "check": {
                "findings": counted(&[
                    ("zombie", c.zombies),
                    ("late-exit", c.late_exits),
                    ("leaked-shim", c.leaked_shims),
                    ("leaked-mount", leaked_mounts),
                    ("shim-blocked", c.blocked_shims),
                    ("api-unreachable", 2),
                ]),
                "gaps": counted(&[
                    store,
                    ("containerd-api", 4),
                    ("cri-api", 1),
                    ("mountinfo", netns_gaps),
                ]),
            },
        })
    });
    let node = serde_json::json!({
        "seed": args.seed,
        "containers": args.containers,
        "pods": c.pods,
        "running": c.running,
        "exited": c.exited,
        "converted_to_exited": c.converted_to_exited,
        "zombies": {"absent": c.zombies_absent, "defunct": c.zombies_defunct, "reused": c.zombies_reused},
        "late_exits": c.late_exits,
        "old_late_exits": c.old_late_exits,
        "corrupt_status_files": c.corrupt,
        "bundles": c.bundles,
        "processes": c.processes,
        "daemon_pid": args.daemon_pid,
        "shims": c.shims,
        "shim_threads": c.shim_threads,
        "leaked_shims": c.leaked_shims,
        "blocked_shims": c.blocked_shims,
        "mounts": c.mounts,
        "rootfs_mounts": c.rootfs_mounts,
        "shm_mounts": c.shm_mounts,
        "leaked_mounts": c.leaked_mounts,
        "netns": {"mounted": c.netns, "leaked": c.leaked_netns},
        "cni": {
            "network": CNI_NETWORK,
            "subnet": c.pod_subnet,
            "ip_reservations": c.ip_reservations,
            "leaked_ip_reservations": c.leaked_ip_reservations,
        },
        "kubelet": {
            "pod_dirs": c.pod_dirs,
            "orphan_pod_dirs": c.orphan_pod_dirs,
            "pod_dir_mounts": c.pod_dir_mounts,
            "pod_cgroups": c.pod_cgroups,
            "leaked_pod_cgroups": c.leaked_pod_cgroups,
        },
        "commands": commands,
    });
    let mut text = serde_json::to_string_pretty(&node).unwrap_or_default();
    text.push('\n');
    text
}

/// Refuses to mount anything unless this process is in a mount namespace
/// other than the one it was started from (one of its ancestors is in
/// another: `unshare -m` ran between them) and no mount of it propagates
/// (`--propagation private`): `--mount-table` must never touch the
/// machine's table. PID 1's namespace is not always readable (a container
/// may deny it), so the ancestors are asked instead, or the caller names
/// the namespace it left (`outside`, its inode).
fn own_private_mount_namespace(outside: Option<u64>) -> Result<(), String> {
    let namespace = |pid: &str| fs::metadata(format!("/proc/{pid}/ns/mnt")).map(|m| m.ino());
    let parent = |pid: &str| -> Option<String> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 2..];
        after.split(' ').nth(1).map(str::to_owned)
    };
    let mine = namespace("self").map_err(|e| format!("/proc/self/ns/mnt: {e}"))?;
    let mut ancestor = parent("self");
    let mut apart = outside.is_some_and(|outside| outside != mine);
    while let Some(pid) = ancestor.filter(|pid| !apart && pid != "0" && pid != "1") {
        match namespace(&pid) {
            Ok(theirs) if theirs != mine => {
                apart = true;
                break;
            }
            Ok(_) => ancestor = parent(&pid),
            Err(_) => break,
        }
    }
    if !apart {
        return Err(
            "--mount-table mounts the node's table: run it in a mount namespace of its own \
             (unshare -m --propagation private)"
                .to_string(),
        );
    }
    let table = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    // The optional fields, between the mount options and " - ".
    let shared = table.lines().any(|line| {
        line.split(" - ")
            .next()
            .is_some_and(|head| head.split(' ').skip(6).any(|f| f.starts_with("shared:")))
    });
    if shared {
        return Err(
            "--mount-table: a mount of this namespace propagates to another (shared); \
             use unshare -m --propagation private"
                .to_string(),
        );
    }
    Ok(())
}

/// `--mount-table`: mounts every line of the node's `mountinfo` past the
/// machine's own (`skip`), so that the kernel's table is the node's and
/// nodectl reads it through procfs, a page at most per read: a tmpfs for
/// each tmpfs (kubelet's volumes, the sandboxes' shm), an overlay for each
/// overlay (the tasks' rootfs over the snapshot directories they name), a
/// bind mount of the node's directory for each disk, and for each nsfs a
/// network namespace: one of its own for each of CRI's (its pod's, or
/// leaked), one shared by the rest (`host/run/netns`). Mount points are
/// made where missing: a leaked rootfs or shm has its directory, as on a
/// node (a mount needs one), and a leaked rootfs its bundle's spec, as
/// containerd's failed delete leaves it (`Bundle.Delete` returns when the
/// rootfs does not unmount, before it removes anything). Returns how many
/// were mounted.
fn mount_table(dir: &Path, skip: usize, rng: &mut Rng) -> Result<usize, String> {
    use nix::mount::{mount, MsFlags};
    let table_path = dir.join("mountinfo");
    let table = fs::read_to_string(&table_path).map_err(|e| io_err(&table_path, e))?;
    let netns_dir = dir.join("state/io.containerd.grpc.v1.cri/netns");
    let disk = dir.join("host/disk");
    mkdir(&disk)?;
    let shared_netns = dir.join("host/netns");
    write(&shared_netns, "")?;
    new_netns(&shared_netns)?;
    let none: Option<&str> = None;
    let mut mounted = 0;
    for line in table.lines().skip(skip) {
        let bad = || format!("{}: an odd line: {line}", table_path.display());
        let point = Path::new(line.split(' ').nth(4).ok_or_else(bad)?);
        let (_, after) = line.split_once(" - ").ok_or_else(bad)?;
        let mut parts = after.split(' ');
        let (fs_type, source, options) = (
            parts.next().ok_or_else(bad)?,
            parts.next().ok_or_else(bad)?,
            parts.next().unwrap_or(""),
        );
        let failed = |e: nix::Error| format!("mounting {fs_type} at {}: {e}", point.display());
        match fs_type {
            "nsfs" => {
                if !point.exists() {
                    mkdir(point.parent().ok_or_else(bad)?)?;
                    write(point, "")?;
                }
                if point.parent() == Some(netns_dir.as_path()) {
                    new_netns(point)?;
                } else {
                    mount(Some(&shared_netns), point, none, MsFlags::MS_BIND, none)
                        .map_err(failed)?;
                }
            }
            "overlay" => {
                let bundle = point.parent().ok_or_else(bad)?;
                if !bundle.exists() {
                    mkdir(bundle)?;
                    let id = bundle.file_name().unwrap_or_default().to_string_lossy();
                    let annotations = [
                        ("io.kubernetes.cri.container-type", "container".to_string()),
                        ("io.kubernetes.cri.sandbox-id", rng.hex(64)),
                        (
                            "io.kubernetes.cri.container-name",
                            format!("gone-{}", &id[..8.min(id.len())]),
                        ),
                    ];
                    write(
                        &bundle.join("config.json"),
                        oci_spec(PAUSE.args, &annotations, rng),
                    )?;
                }
                mkdir(point)?;
                let option = |key: &str| {
                    options
                        .split(',')
                        .find_map(|o| o.strip_prefix(key)?.strip_prefix('='))
                };
                let (Some(lower), Some(upper), Some(work)) =
                    (option("lowerdir"), option("upperdir"), option("workdir"))
                else {
                    return Err(bad());
                };
                // The generator draws layers at random: the kernel refuses
                // a layer twice or the upper layer's own snapshot as a
                // lower one (ELOOP), which no snapshotter would give it.
                let upper_snapshot = Path::new(upper).parent();
                let mut layers: Vec<&str> = Vec::new();
                for layer in lower.split(':') {
                    if !layers.contains(&layer) && Path::new(layer).parent() != upper_snapshot {
                        layers.push(layer);
                    }
                }
                for dir in layers.iter().chain([&upper, &work]) {
                    mkdir(Path::new(dir))?;
                }
                let data = format!(
                    "lowerdir={},upperdir={upper},workdir={work}",
                    layers.join(":")
                );
                mount(
                    Some("overlay"),
                    point,
                    Some("overlay"),
                    MsFlags::empty(),
                    Some(data.as_str()),
                )
                .map_err(failed)?;
            }
            "tmpfs" => {
                mkdir(point)?;
                mount(
                    Some(source),
                    point,
                    Some("tmpfs"),
                    MsFlags::empty(),
                    Some("size=64k"),
                )
                .map_err(failed)?;
            }
            _ => {
                mkdir(point)?;
                mount(Some(&disk), point, none, MsFlags::MS_BIND, none).map_err(failed)?;
            }
        }
        mounted += 1;
    }
    Ok(mounted)
}

/// A new network namespace, bind-mounted at `point` (a file), as
/// containerd's pkg/netns and `ip netns add` make them: a thread of its own
/// unshares its network namespace and mounts its `ns/net` there.
fn new_netns(point: &Path) -> Result<(), String> {
    use nix::mount::{mount, MsFlags};
    use nix::sched::{unshare, CloneFlags};
    let target = point.to_path_buf();
    std::thread::spawn(move || -> nix::Result<()> {
        unshare(CloneFlags::CLONE_NEWNET)?;
        mount(
            Some("/proc/thread-self/ns/net"),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
    })
    .join()
    .map_err(|_| {
        format!(
            "{}: the thread making its namespace panicked",
            point.display()
        )
    })?
    .map_err(|e| format!("{}: a network namespace: {e}", point.display()))
}
