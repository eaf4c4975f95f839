//! The syscall floor of a nodectl command: the least reading its answer
//! needs, done as cheaply as std allows; in one thread, but for `check`,
//! which reads as nodectl does on two (below). bench/run measures it beside
//! nodectl in the same run and prints the ratio of wall and of CPU time
//! (docs/benchmarks.md).
//!
//! ```sh
//! floor zombies --root ROOT [--proc-root /proc] [--stages]
//! floor leaked-shims|leaked-mounts --root ROOT --state STATE [--proc-root /proc]
//!     [--mountinfo /proc/self/mountinfo] [--stages]
//! floor check --root ROOT --state STATE [--proc-root /proc] [--mountinfo FILE]
//!     [--config FILE] [--kubelet-root DIR] [--cgroup-fs DIR]
//!     [--cni-results /var/lib/cni/results] [--stages]
//! floor from --archive FILE [--stages]
//! (any mode) [--api SOCKET --api-timeout MS]
//! ```
//!
//! `--api`: last, one connection to containerd's socket and a wait of
//! `--api-timeout` ms for a first byte, nothing sent: the least a command
//! that asks a containerd that never answers (bench/run's frozen one) must
//! spend to say so (`api-unreachable`, after `--timeout`).
//!
//! `zombies`: list CRI's containers directory (`ROOT/io.containerd.grpc.v1.cri/
//! containers`); of each `status` file one open, one read into a buffer that
//! holds any status file, and the close; find the `Pid` of the entries whose
//! `FinishedAt` is 0; `stat` `/proc/<pid>` for those.
//!
//! `check`: every input `check --settle 0s` reads on a node (its
//! `strace -f -e trace=%file,read`), each once, a file read
//! to its end (procfs returns at most a page per read and a size of 0),
//! relative to an open directory where nodectl's reads are:
//! - containerd's config (`--config`: CRI's CNI `conf_dir`);
//! - the status files as above, CRI's sandboxes directories under root and
//!   state, every bundle's `config.json` and `shim.pid`;
//! - the mount table (`--mountinfo`), whole; the node's `stat`, `meminfo`,
//!   `pressure/io` and `swaps`;
//! - CNI: the configs in `conf_dir`, and of each network host-local's store
//!   (`dataDir/<name>`), every file; the listing of libcni's result cache;
//! - kubelet's pod directories (`--kubelet-root`/pods, each stat'ed) and the
//!   pod cgroups (`--cgroup-fs`: `kubepods[/burstable|/besteffort]/pod*`,
//!   each stat'ed);
//! - CRI's network namespaces: the nsfs mounts of the table in its netns
//!   directory (under state), each stat'ed;
//! - the proc root listed and every `<pid>/stat`;
//! - the running containerd's proof (the process whose `comm` is
//!   `containerd`): PID 1's and its namespaces, `stat`, `cmdline`,
//!   `status`, `exe` and `cwd`, the socket's listener (`SO_PEERCRED`),
//!   its descriptors, root and state through its root and the
//!   directories on the way, its config through its root, and its binary
//!   (the version's build information);
//! - every shim: its proof (`stat` again, `status`, `exe`, `ns/*`, its
//!   `-address` opened inside its root), `cmdline`, `cwd`, and each
//!   thread's `syscall` (`stat` unless it runs or idles in a wait, `wchan`
//!   in D);
//! - what holds each network namespace: every process's `task/<tid>/ns/net`
//!   (stat'ed) and `fd/<n>` (read as links, stat'ed when one names a
//!   namespace); a thread of its own joins each one nothing holds (`setns`)
//!   and reads its `net/dev` (`thread-self` of the proc root);
//! - the second look, at once (`--settle 0s`): the status files of the
//!   running entries without a process (nodectl also re-reads those whose
//!   process is defunct or a later one), and the shims with a thread in
//!   `umount2` or D again.
//!
//! On threads as `check` reads (issue 46: a floor on one thread was slower
//! than nodectl on two, and no floor): the files that are not CRI's store or
//! procfs' processes on a thread of their own, beside the rest, as each
//! source of nodectl's has its thread; the status files, the processes'
//! `stat`, the shims and the namespaces' holders each on two threads, in
//! pieces taken in turn (nodectl's `on_two_threads`). The second look and
//! the daemon's proof, small, in one.
//!
//! `from`: what `check --from FILE` needs before it judges anything: the
//! archive (tar.gz) inflated, its `snapshots.json` read whole and decoded
//! into the snapshots the checks judge (nodectl's own types, with
//! serde_json). Stdout's `bundles` counts the first look's bundles.
//!
//! `leaked-shims`: the proc root's `<pid>/stat`, the shims' `cmdline` and
//! the bundle listing, as in `check`. `leaked-mounts`: mountinfo once, the
//! bundle listing, and the listings of CRI's containers and sandboxes
//! directories under ROOT.
//!
//! Stdout gets one line of JSON: what was read, and `running_absent`, the
//! entries without `FinishedAt` whose process does not exist (bench/run
//! compares nodectl's zombie count with it). `--stages` adds the time each
//! stage took, in microseconds.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};

use nix::dir::Dir;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode as FileMode;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: floor zombies|leaked-shims|leaked-mounts|check --root ROOT [--state STATE] [--proc-root DIR] \
                     [--mountinfo FILE] [--config FILE --kubelet-root DIR --cgroup-fs DIR] [--cni-results DIR] \
                     [--api SOCKET --api-timeout MS] [--stages]\n       floor from --archive FILE [--stages]";

/// Larger than any status file CRI writes (nodectl caps them lower).
const STATUS_BUFFER: usize = 64 * 1024;

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(err) => {
            eprintln!("floor: {err}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("floor: {err}");
            ExitCode::FAILURE
        }
    }
}

#[derive(PartialEq)]
enum Mode {
    Zombies,
    LeakedShims,
    LeakedMounts,
    Check,
    From,
}

struct Args {
    mode: Mode,
    root: PathBuf,
    state: Option<PathBuf>,
    proc_root: PathBuf,
    mountinfo: PathBuf,
    /// `check`: containerd's config (CRI's CNI `conf_dir`), kubelet's root,
    /// the cgroup filesystem and libcni's result cache, as nodectl is given
    /// them (`--config`, `--kubelet-root`, `--cgroup-fs`; the cache is
    /// nodectl's fixed path).
    config: Option<PathBuf>,
    kubelet_root: Option<PathBuf>,
    cgroup_fs: Option<PathBuf>,
    cni_results: PathBuf,
    stages: bool,
    /// containerd's socket, waited on last (see the head of this file).
    api: Option<PathBuf>,
    api_timeout: Duration,
    /// `from`: the archive.
    archive: Option<PathBuf>,
}

impl Args {
    fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
        let mode = match argv.next().as_deref() {
            Some("zombies") => Mode::Zombies,
            Some("leaked-shims") => Mode::LeakedShims,
            Some("leaked-mounts") => Mode::LeakedMounts,
            Some("check") => Mode::Check,
            Some("from") => Mode::From,
            other => return Err(format!("unknown mode {other:?}")),
        };
        let mut args = Args {
            mode,
            root: PathBuf::new(),
            state: None,
            proc_root: PathBuf::from("/proc"),
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
            config: None,
            kubelet_root: None,
            cgroup_fs: None,
            cni_results: PathBuf::from("/var/lib/cni/results"),
            stages: false,
            api: None,
            api_timeout: Duration::from_millis(200),
            archive: None,
        };
        let mut root = None;
        while let Some(flag) = argv.next() {
            let mut value = || argv.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--root" => root = Some(PathBuf::from(value()?)),
                "--state" => args.state = Some(PathBuf::from(value()?)),
                "--proc-root" => args.proc_root = PathBuf::from(value()?),
                "--mountinfo" => args.mountinfo = PathBuf::from(value()?),
                "--config" => args.config = Some(PathBuf::from(value()?)),
                "--kubelet-root" => args.kubelet_root = Some(PathBuf::from(value()?)),
                "--cgroup-fs" => args.cgroup_fs = Some(PathBuf::from(value()?)),
                "--cni-results" => args.cni_results = PathBuf::from(value()?),
                "--stages" => args.stages = true,
                "--archive" => args.archive = Some(PathBuf::from(value()?)),
                "--api" => args.api = Some(PathBuf::from(value()?)),
                "--api-timeout" => {
                    let text = value()?;
                    let ms = text
                        .trim_end_matches("ms")
                        .parse()
                        .map_err(|e| format!("--api-timeout {text}: {e}"))?;
                    args.api_timeout = Duration::from_millis(ms);
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if args.mode == Mode::From {
            args.archive.as_ref().ok_or("from needs --archive")?;
            return Ok(args);
        }
        args.root = root.ok_or("--root is required")?;
        if args.mode != Mode::Zombies && args.state.is_none() {
            return Err("this mode needs --state".to_string());
        }
        Ok(args)
    }
}

fn io_err(path: &Path, err: io::Error) -> String {
    format!("{}: {err}", path.display())
}

/// One open, one read into `buf`, close. Returns the bytes read.
fn read_once(path: &Path, buf: &mut [u8]) -> io::Result<usize> {
    File::open(path)?.read(buf)
}

/// The unsigned integer after `"key":` in a JSON text, without parsing the rest.
fn json_number(text: &[u8], key: &[u8]) -> Option<u64> {
    let at = text.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &text[at..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

#[derive(Default)]
struct Counts {
    status_files: u64,
    unfinished: u64,
    running_absent: u64,
    processes: u64,
    shims: u64,
    threads: u64,
    mount_lines: u64,
    bundles: u64,
    listed: u64,
    bytes: u64,
    /// `check`: files read whole, stats and link reads, CRI's network
    /// namespaces, those a thread or descriptor holds, those whose
    /// interfaces were looked at.
    files: u64,
    stats: u64,
    netns: u64,
    holders: u64,
    interfaces_looked_at: u64,
    /// With `--api`: whether a first byte came within the wait.
    api_answered: Option<bool>,
}

impl Counts {
    /// Adds what another thread counted (the wait on the API is this one's).
    fn add(&mut self, other: &Counts) {
        self.status_files += other.status_files;
        self.unfinished += other.unfinished;
        self.running_absent += other.running_absent;
        self.processes += other.processes;
        self.shims += other.shims;
        self.threads += other.threads;
        self.mount_lines += other.mount_lines;
        self.bundles += other.bundles;
        self.listed += other.listed;
        self.bytes += other.bytes;
        self.files += other.files;
        self.stats += other.stats;
        self.netns += other.netns;
        self.holders += other.holders;
        self.interfaces_looked_at += other.interfaces_looked_at;
    }
}

struct Stages {
    on: bool,
    last: Instant,
    out: Vec<(&'static str, u128)>,
}

impl Stages {
    fn mark(&mut self, name: &'static str) {
        if self.on {
            let now = Instant::now();
            self.out
                .push((name, now.duration_since(self.last).as_micros()));
            self.last = now;
        }
    }
}

/// The pids of the status files without `FinishedAt`, read in this thread.
fn status_files(root: &Path, counts: &mut Counts) -> Result<Vec<u64>, String> {
    let (dir, names) = status_names(root)?;
    let pids = status_pids(&dir, &names, counts);
    counts.unfinished = pids.len() as u64;
    Ok(pids)
}

/// [`status_files`] on two threads, as nodectl reads a store of thousands.
fn status_files_on_two_threads(root: &Path, counts: &mut Counts) -> Result<Vec<u64>, String> {
    let (dir, names) = status_names(root)?;
    let pids: Vec<u64> = on_two_threads(&names, counts, |names, counts| {
        status_pids(&dir, names, counts)
    })
    .into_iter()
    .flatten()
    .collect();
    counts.unfinished = pids.len() as u64;
    Ok(pids)
}

/// CRI's containers directory and its entries.
fn status_names(root: &Path) -> Result<(PathBuf, Vec<std::ffi::OsString>), String> {
    let dir = root.join("io.containerd.grpc.v1.cri/containers");
    let names = fs::read_dir(&dir)
        .map_err(|e| io_err(&dir, e))?
        .map(|entry| entry.map(|e| e.file_name()).map_err(|e| io_err(&dir, e)))
        .collect::<Result<_, _>>()?;
    Ok((dir, names))
}

/// Of each of `names`' status files one open, one read, the close: the
/// pids of those without `FinishedAt`.
fn status_pids(dir: &Path, names: &[std::ffi::OsString], counts: &mut Counts) -> Vec<u64> {
    let mut buf = vec![0u8; STATUS_BUFFER];
    let mut pids = Vec::new();
    let mut path = dir.to_path_buf();
    for name in names {
        path.push(name);
        path.push("status");
        if let Ok(n) = read_once(&path, &mut buf) {
            counts.status_files += 1;
            counts.bytes += n as u64;
            let text = &buf[..n];
            // A torn file (no closing brace) tells nothing.
            if text.last() == Some(&b'}') && json_number(text, b"\"FinishedAt\":") == Some(0) {
                if let Some(pid) = json_number(text, b"\"Pid\":").filter(|&p| p > 0) {
                    pids.push(pid);
                }
            }
        }
        path.pop();
        path.pop();
    }
    pids
}

/// Works through `items` on two threads as nodectl does where it reads a
/// node's many files (its `read::parallel::on_two_threads`: 16 pieces, each
/// thread taking the next when done), each thread counting on its own; the
/// answers in the order of the pieces. `check`'s floor does its bulk so:
/// a floor on one thread is slower than nodectl on two, and no floor.
fn on_two_threads<T: Sync, R: Send>(
    items: &[T],
    counts: &mut Counts,
    work: impl Fn(&[T], &mut Counts) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    if items.len() < 2 {
        return vec![work(items, counts)];
    }
    let pieces: Vec<&[T]> = items.chunks(items.len().div_ceil(16)).collect();
    let next = AtomicUsize::new(0);
    let (work, pieces, next) = (&work, &pieces, &next);
    let mut answers: Vec<(usize, R)> = std::thread::scope(|scope| {
        let threads = [(), ()].map(|()| {
            scope.spawn(move || {
                let mut counts = Counts::default();
                let mut answers = Vec::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(piece) = pieces.get(index) else {
                        break;
                    };
                    answers.push((index, work(piece, &mut counts)));
                }
                (answers, counts)
            })
        });
        let mut all = Vec::new();
        for thread in threads {
            let (answers, theirs) = thread.join().expect("a floor thread panicked");
            counts.add(&theirs);
            all.extend(answers);
        }
        all
    });
    answers.sort_by_key(|(index, _)| *index);
    answers.into_iter().map(|(_, answer)| answer).collect()
}

fn run(args: &Args) -> Result<String, String> {
    let mut stages = Stages {
        on: args.stages,
        last: Instant::now(),
        out: Vec::new(),
    };
    let mut counts = Counts::default();
    let mut procs = Procs::default();
    match args.mode {
        Mode::Zombies => {
            let pids = status_files(&args.root, &mut counts)?;
            stages.mark("status_files");
            let mut path = args.proc_root.clone();
            for pid in &pids {
                path.push(pid.to_string());
                if fs::metadata(&path).is_err() {
                    counts.running_absent += 1;
                }
                path.pop();
            }
            stages.mark("proc_stat_pids");
        }
        Mode::LeakedShims => {
            proc_scan(&args.proc_root, &mut procs, &mut counts, false)?;
            stages.mark("proc_stat_all");
            shim_cmdlines(args, &procs, &mut counts, &mut stages);
            bundles(args, &mut counts, &mut stages);
        }
        Mode::LeakedMounts => {
            mountinfo(args, &mut counts, &mut stages)?;
            bundles(args, &mut counts, &mut stages);
            for dir in [
                args.root.join("io.containerd.grpc.v1.cri/containers"),
                args.root.join("io.containerd.grpc.v1.cri/sandboxes"),
            ] {
                if let Ok(entries) = fs::read_dir(&dir) {
                    counts.listed += entries.count() as u64;
                }
            }
            stages.mark("cri_dirs");
        }
        Mode::Check => check(args, &mut procs, &mut counts, &mut stages)?,
        Mode::From => {
            let archive = args.archive.as_deref().unwrap_or(Path::new(""));
            (counts.bytes, counts.bundles) = decode_archive(archive)?;
            stages.mark("archive");
        }
    }
    if let Some(socket) = &args.api {
        counts.api_answered = Some(api_wait(socket, args.api_timeout)?);
        stages.mark("api_wait");
    }
    let mut line = format!(
        "{{\"status_files\":{},\"unfinished\":{},\"running_absent\":{},\"processes\":{},\
         \"shims\":{},\"threads\":{},\"mount_lines\":{},\"bundles\":{},\"listed\":{},\"bytes\":{}",
        counts.status_files,
        counts.unfinished,
        counts.running_absent,
        counts.processes,
        counts.shims,
        counts.threads,
        counts.mount_lines,
        counts.bundles,
        counts.listed,
        counts.bytes
    );
    if args.mode == Mode::Check {
        line.push_str(&format!(
            ",\"files\":{},\"stats\":{},\"netns\":{},\"holders\":{},\"interfaces_looked_at\":{}",
            counts.files, counts.stats, counts.netns, counts.holders, counts.interfaces_looked_at
        ));
    }
    if let Some(answered) = counts.api_answered {
        line.push_str(&format!(",\"api_answered\":{answered}"));
    }
    if args.stages {
        line.push_str(",\"stages_us\":{");
        for (i, (name, us)) in stages.out.iter().enumerate() {
            let comma = if i == 0 { "" } else { "," };
            line.push_str(&format!("{comma}\"{name}\":{us}"));
        }
        line.push('}');
    }
    line.push('}');
    Ok(line)
}

/// `from`: the archive inflated and its `snapshots.json` decoded; its size
/// and the first look's bundles.
fn decode_archive(path: &Path) -> Result<(u64, u64), String> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let entries = tar.entries().map_err(|e| io_err(path, e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| io_err(path, e))?;
        if entry.path().map_err(|e| io_err(path, e))?.as_ref() != Path::new("snapshots.json") {
            continue;
        }
        let mut json = Vec::new();
        entry.read_to_end(&mut json).map_err(|e| io_err(path, e))?;
        let archived: nodectl::archive::Archived =
            serde_json::from_slice(&json).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok((json.len() as u64, archived.first.bundles.len() as u64));
    }
    Err(format!("{}: no snapshots.json", path.display()))
}

/// The processes seen: every pid (sorted) and the shims'.
#[derive(Default)]
struct Procs {
    live: Vec<u64>,
    shims: Vec<u64>,
    /// The process whose `comm` is `containerd`.
    daemon: Option<u64>,
}

/// Lists the proc root and reads `<pid>/stat` of every process; on two
/// threads for `check` (nodectl's walk is on two).
fn proc_scan(
    proc_root: &Path,
    procs: &mut Procs,
    counts: &mut Counts,
    two_threads: bool,
) -> Result<(), String> {
    let mut pids = Vec::new();
    for entry in fs::read_dir(proc_root).map_err(|e| io_err(proc_root, e))? {
        let entry = entry.map_err(|e| io_err(proc_root, e))?;
        if let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u64>().ok())
        {
            pids.push(pid);
        }
    }
    let scan = |pids: &[u64], counts: &mut Counts| {
        let mut seen = Procs::default();
        let mut buf = vec![0u8; 4096];
        let mut path = proc_root.to_path_buf();
        for &pid in pids {
            path.push(pid.to_string());
            path.push("stat");
            if let Ok(n) = read_once(&path, &mut buf) {
                counts.processes += 1;
                counts.bytes += n as u64;
                seen.live.push(pid);
                // comm is between the first '(' and the last ')'.
                let text = &buf[..n];
                if let Some(open) = text.iter().position(|&b| b == b'(') {
                    if text[open + 1..].starts_with(b"containerd-shim") {
                        seen.shims.push(pid);
                    } else if text[open + 1..].starts_with(b"containerd)") {
                        seen.daemon = Some(pid);
                    }
                }
            }
            path.pop();
            path.pop();
        }
        seen
    };
    let pieces = if two_threads {
        on_two_threads(&pids, counts, scan)
    } else {
        vec![scan(&pids, counts)]
    };
    for seen in pieces {
        procs.live.extend(seen.live);
        procs.shims.extend(seen.shims);
        procs.daemon = procs.daemon.or(seen.daemon);
    }
    procs.live.sort_unstable();
    Ok(())
}

/// Reads `<pid>/cmdline` of every shim (its `-id`, `-namespace`, `-address`).
fn shim_cmdlines(args: &Args, procs: &Procs, counts: &mut Counts, stages: &mut Stages) {
    let mut buf = vec![0u8; 4096];
    let mut path = args.proc_root.clone();
    for pid in &procs.shims {
        path.push(pid.to_string());
        path.push("cmdline");
        if let Ok(n) = read_once(&path, &mut buf) {
            counts.shims += 1;
            counts.bytes += n as u64;
        }
        path.pop();
        path.pop();
    }
    stages.mark("shim_cmdline");
}

/// One connection to `socket` (reached through its open directory: a
/// socket's path is at most 108 bytes) and a wait of `timeout` for a first
/// byte. Whether one came (or the peer closed) before the wait ended.
fn api_wait(socket: &Path, timeout: Duration) -> Result<bool, String> {
    use std::os::fd::AsRawFd;
    let parent = socket
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = socket
        .file_name()
        .ok_or_else(|| format!("{}: names no file", socket.display()))?;
    let dir = File::open(parent).map_err(|e| io_err(parent, e))?;
    let short = Path::new(&format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    let mut stream =
        std::os::unix::net::UnixStream::connect(&short).map_err(|e| io_err(socket, e))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| io_err(socket, e))?;
    match stream.read(&mut [0u8; 1]) {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(io_err(socket, e)),
    }
}

/// Reads mountinfo once, whole.
fn mountinfo(args: &Args, counts: &mut Counts, stages: &mut Stages) -> Result<(), String> {
    let mountinfo = fs::read(&args.mountinfo).map_err(|e| io_err(&args.mountinfo, e))?;
    counts.bytes += mountinfo.len() as u64;
    counts.mount_lines = mountinfo.iter().filter(|&&b| b == b'\n').count() as u64;
    stages.mark("mountinfo");
    Ok(())
}

/// Lists the task bundles (`STATE/io.containerd.runtime.v2.task/<ns>/<id>`).
fn bundles(args: &Args, counts: &mut Counts, stages: &mut Stages) {
    let state = args.state.as_deref().expect("checked in Args::parse");
    let tasks = state.join("io.containerd.runtime.v2.task");
    if let Ok(namespaces) = fs::read_dir(&tasks) {
        for namespace in namespaces.filter_map(|e| e.ok()) {
            if let Ok(bundles) = fs::read_dir(namespace.path()) {
                counts.bundles += bundles.count() as u64;
            }
        }
    }
    stages.mark("bundle_dirs");
}

/// What `check` reads, read once each, in one thread, relative to an open
/// directory where nodectl's reads are (see the head of this file).
fn check(
    args: &Args,
    procs: &mut Procs,
    counts: &mut Counts,
    stages: &mut Stages,
) -> Result<(), String> {
    let state = args.state.as_deref().expect("checked in Args::parse");
    // Two strands at once, as nodectl's sources run each on a thread of its
    // own: the node's files on one thread (`files_strand`) while this one
    // reads CRI's store and procfs, its bulk on two threads; the
    // namespaces' holders once the mount table has named them.
    let timed = stages.on;
    let (files, pids, blocked, proc_dir) = std::thread::scope(|scope| {
        let files = scope.spawn(move || files_strand(args, state, timed));
        let pids = status_files_on_two_threads(&args.root, counts)?;
        stages.mark("status_files");
        proc_scan(&args.proc_root, procs, counts, true)?;
        counts.running_absent = pids
            .iter()
            .filter(|pid| procs.live.binary_search(pid).is_err())
            .count() as u64;
        stages.mark("proc_stat_all");

        let proc_dir = open_dir(&args.proc_root).map_err(|e| io_err(&args.proc_root, e))?;
        if let (Some(daemon), Some(socket)) = (procs.daemon, &args.api) {
            let mut buf = Vec::with_capacity(STATUS_BUFFER);
            prove_daemon(args, &proc_dir, daemon, socket, state, &mut buf, counts);
        }
        stages.mark("daemon");

        let blocked: Vec<u64> = on_two_threads(&procs.shims, counts, |shims, counts| {
            let mut buf = Vec::with_capacity(STATUS_BUFFER);
            shims
                .iter()
                .copied()
                .filter(|&pid| shim(&proc_dir, pid, args.api.as_deref(), &mut buf, counts))
                .collect::<Vec<u64>>()
        })
        .into_iter()
        .flatten()
        .collect();
        stages.mark("shims");
        let files = files.join().expect("the files strand panicked")?;
        stages.mark("files_strand_joined");
        Ok::<_, String>((files, pids, blocked, proc_dir))
    })?;
    counts.add(&files.counts);
    counts.mount_lines = files.counts.mount_lines;
    stages.out.extend(files.stages);
    let netns = files.netns;

    let held: std::collections::BTreeSet<(u64, u64)> =
        on_two_threads(&procs.live, counts, |pids, counts| {
            holders(&proc_dir, pids, &netns, counts)
        })
        .into_iter()
        .flatten()
        .collect();
    counts.holders = held.len() as u64;
    for (path, identity) in &netns {
        if !held.contains(identity) {
            look_at_interfaces(path, &args.proc_root, counts);
        }
    }
    stages.mark("netns_holders");

    // The second look (check --settle 0s: at once): the suspects again,
    // the zombie suspects' status files and the blocked shims.
    let containers = args.root.join("io.containerd.grpc.v1.cri/containers");
    let suspects = pids
        .iter()
        .filter(|pid| procs.live.binary_search(pid).is_err())
        .count();
    for entry in list(&containers).into_iter().take(suspects) {
        stat_counted(&containers.join(entry).join("status"), counts);
    }
    let mut buf = Vec::with_capacity(STATUS_BUFFER);
    for &pid in &blocked {
        shim(&proc_dir, pid, args.api.as_deref(), &mut buf, counts);
    }
    stages.mark("second_look");
    Ok(())
}

/// What [`files_strand`] read.
struct FilesRead {
    counts: Counts,
    /// CRI's network namespaces: the nsfs mounts of its netns directory.
    netns: Vec<(PathBuf, (u64, u64))>,
    /// Its stages, named `files.<stage>`: they overlap the other strand's.
    stages: Vec<(&'static str, u128)>,
}

/// The node's files that are not CRI's store or procfs' processes, in one
/// thread: containerd's config, CRI's sandbox directories and the bundles,
/// the mount table, the node's load, CNI, kubelet's pods and cgroups, CRI's
/// network namespaces.
fn files_strand(args: &Args, state: &Path, timed: bool) -> Result<FilesRead, String> {
    let mut counts = Counts::default();
    let mut stages = Stages {
        on: timed,
        last: Instant::now(),
        out: Vec::new(),
    };
    let mut buf = Vec::with_capacity(STATUS_BUFFER);
    // containerd's config: CRI's CNI conf_dir (and nothing else is needed).
    let conf_dir = match &args.config {
        Some(config) => {
            read_all(config, &mut buf, &mut counts).map_err(|e| io_err(config, e))?;
            toml_string(&buf, b"conf_dir").map(PathBuf::from)
        }
        None => None,
    };
    stages.mark("files.config");

    for dir in [
        args.root.join("io.containerd.grpc.v1.cri/sandboxes"),
        state.join("io.containerd.grpc.v1.cri/sandboxes"),
    ] {
        counts.listed += list(&dir).len() as u64;
    }
    bundles_with_files(state, &mut buf, &mut counts);
    stages.mark("files.sandboxes_bundles");

    let table = fs::read(&args.mountinfo).map_err(|e| io_err(&args.mountinfo, e))?;
    counts.bytes += table.len() as u64;
    counts.mount_lines = table.iter().filter(|&&b| b == b'\n').count() as u64;
    stages.mark("files.mountinfo");

    for name in ["stat", "meminfo", "pressure/io", "swaps"] {
        let _ = read_all(&args.proc_root.join(name), &mut buf, &mut counts);
    }
    stages.mark("files.node");

    if let Some(conf_dir) = conf_dir {
        cni(&conf_dir, &mut buf, &mut counts);
    }
    counts.listed += list(&args.cni_results).len() as u64;
    stages.mark("files.cni");

    if let Some(kubelet) = &args.kubelet_root {
        for pod in list(&kubelet.join("pods")) {
            stat_counted(&kubelet.join("pods").join(pod), &mut counts);
        }
    }
    if let Some(cgroup_fs) = &args.cgroup_fs {
        stat_counted(&cgroup_fs.join("cgroup.controllers"), &mut counts);
        for class in ["kubepods", "kubepods/burstable", "kubepods/besteffort"] {
            let dir = cgroup_fs.join(class);
            for name in list(&dir) {
                if name.to_string_lossy().starts_with("pod") {
                    stat_counted(&dir.join(name), &mut counts);
                }
            }
        }
    }
    stages.mark("files.kubelet_cgroups");

    // CRI's network namespaces: the nsfs mounts in its netns directory
    // (under state: the node's config sets netns_mounts_under_state_dir).
    let netns_dir = state.join("io.containerd.grpc.v1.cri/netns");
    let netns = netns_mounts(&table, &netns_dir, &mut counts);
    stages.mark("files.netns_mounts");
    Ok(FilesRead {
        counts,
        netns,
        stages: stages.out,
    })
}

/// Opens a directory to read relative to.
fn open_dir(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// The names in `dir`, none when it cannot be listed.
fn list(dir: &Path) -> Vec<std::ffi::OsString> {
    match fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| Some(e.ok()?.file_name())).collect(),
        Err(_) => Vec::new(),
    }
}

/// Reads `path` to its end (procfs returns a page at most per read, and a
/// size of 0): open, reads until one returns 0, close.
fn read_all(path: &Path, buf: &mut Vec<u8>, counts: &mut Counts) -> io::Result<usize> {
    read_file(File::open(path)?, buf, counts)
}

/// [`read_all`] of `name` relative to the open directory `dir`.
fn read_at(
    dir: &impl AsFd,
    name: &str,
    buf: &mut Vec<u8>,
    counts: &mut Counts,
) -> io::Result<usize> {
    read_file(
        File::from(open_at(dir, name, OFlag::O_RDONLY)?),
        buf,
        counts,
    )
}

fn read_file(mut file: File, buf: &mut Vec<u8>, counts: &mut Counts) -> io::Result<usize> {
    buf.clear();
    let n = file.read_to_end(buf)?;
    counts.files += 1;
    counts.bytes += n as u64;
    Ok(n)
}

fn open_at(dir: &impl AsFd, name: &str, flags: OFlag) -> io::Result<OwnedFd> {
    nix::fcntl::openat(dir, name, flags | OFlag::O_CLOEXEC, FileMode::empty())
        .map_err(io::Error::from)
}

/// The numbered entries (pids, tids, descriptors) of `name` in `dir`, and
/// the directory, open, to read them relative to.
fn numbered_entries(dir: &impl AsFd, name: &str) -> Option<(Dir, Vec<String>)> {
    let mut listing = Dir::openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        FileMode::empty(),
    )
    .ok()?;
    let names = listing
        .iter()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().ok().map(str::to_owned))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    Some((listing, names))
}

fn stat_counted(path: &Path, counts: &mut Counts) -> Option<fs::Metadata> {
    counts.stats += 1;
    fs::metadata(path).ok()
}

/// The string value of `key = "..."` in a TOML text, without parsing it.
fn toml_string(text: &[u8], key: &[u8]) -> Option<String> {
    let at = text.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &text[at..];
    let open = rest.iter().position(|&b| b == b'"')? + 1;
    let close = open + rest[open..].iter().position(|&b| b == b'"')?;
    String::from_utf8(rest[open..close].to_vec()).ok()
}

/// Each bundle's `config.json` and `shim.pid`.
fn bundles_with_files(state: &Path, buf: &mut Vec<u8>, counts: &mut Counts) {
    let tasks = state.join("io.containerd.runtime.v2.task");
    for namespace in list(&tasks) {
        let dir = tasks.join(namespace);
        let Ok(opened) = open_dir(&dir) else {
            continue;
        };
        for bundle in list(&dir) {
            counts.bundles += 1;
            let Some(bundle) = bundle.to_str() else {
                continue;
            };
            for file in ["config.json", "shim.pid"] {
                let _ = read_at(&opened, &format!("{bundle}/{file}"), buf, counts);
            }
        }
    }
}

/// CNI: the conf_dir's configs; of each network, host-local's store
/// (`dataDir/<name>`): every reservation read.
fn cni(conf_dir: &Path, buf: &mut Vec<u8>, counts: &mut Counts) {
    for name in list(conf_dir) {
        let path = conf_dir.join(&name);
        if read_all(&path, buf, counts).is_err() {
            continue;
        }
        let (Some(network), Some(data_dir)) = (
            json_string(buf, b"\"name\""),
            json_string(buf, b"\"dataDir\""),
        ) else {
            continue;
        };
        let store = Path::new(&data_dir).join(network);
        for entry in list(&store) {
            let _ = read_all(&store.join(entry), buf, counts);
        }
    }
}

/// The string after `"key":` in a JSON text, without parsing the rest.
fn json_string(text: &[u8], key: &[u8]) -> Option<String> {
    let at = text.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &text[at..];
    let open = rest.iter().position(|&b| b == b'"')? + 1;
    let close = open + rest[open..].iter().position(|&b| b == b'"')?;
    String::from_utf8(rest[open..close].to_vec()).ok()
}

/// The nsfs mounts directly in `dir` and their identity (device, inode).
fn netns_mounts(table: &[u8], dir: &Path, counts: &mut Counts) -> Vec<(PathBuf, (u64, u64))> {
    use std::os::unix::fs::MetadataExt;
    let dir_text = dir.to_string_lossy();
    let mut mounts = Vec::new();
    stat_counted(dir, counts);
    for line in table.split(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let mut fields = text.split(' ');
        let Some(point) = fields.nth(4) else {
            continue;
        };
        let nsfs = text
            .split_once(" - ")
            .is_some_and(|(_, rest)| rest.starts_with("nsfs "));
        let path = Path::new(point);
        if !nsfs || path.parent().map(|p| p.to_string_lossy()) != Some(dir_text.clone()) {
            continue;
        }
        if let Some(m) = stat_counted(path, counts) {
            mounts.push((path.to_path_buf(), (m.dev(), m.ino())));
        }
    }
    counts.netns = mounts.len() as u64;
    mounts
}

/// The running containerd's proof, as nodectl reads it: PID 1's and its
/// namespaces, its binary, uids, arguments and working directory, the
/// socket's listener (SO_PEERCRED), its descriptors (the metadata store it
/// holds open under root), root and state through its root and the
/// directories on the way to them, and its binary's build information.
fn prove_daemon(
    args: &Args,
    proc_dir: &File,
    pid: u64,
    socket: &Path,
    state: &Path,
    buf: &mut Vec<u8>,
    counts: &mut Counts,
) {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let pid_dir = pid.to_string();
    for dir in ["1", pid_dir.as_str()] {
        for ns in ["ns/user", "ns/pid", "ns/mnt"] {
            counts.stats += 1;
            let _ =
                nix::sys::stat::fstatat(proc_dir, format!("{dir}/{ns}").as_str(), AtFlags::empty());
        }
    }
    for file in ["stat", "cmdline", "status"] {
        let _ = read_at(proc_dir, &format!("{pid}/{file}"), buf, counts);
    }
    for link in ["exe", "cwd"] {
        counts.stats += 1;
        let _ = nix::fcntl::readlinkat(proc_dir, format!("{pid}/{link}").as_str());
    }
    counts.stats += 1;
    let _ = nix::sys::stat::fstatat(proc_dir, format!("{pid}/exe").as_str(), AtFlags::empty());
    if let Ok(stream) = connect(socket) {
        let _ = getsockopt(&stream, PeerCredentials);
    }
    if let Some((fd_dir, fds)) = numbered_entries(proc_dir, &format!("{pid}/fd")) {
        for fd in fds {
            counts.stats += 1;
            let _ = nix::fcntl::readlinkat(&fd_dir, fd.as_str());
        }
    }
    let root = args.proc_root.join(&pid_dir).join("root");
    for dir in [&args.root, &state.to_path_buf()] {
        stat_counted(&root.join(dir.strip_prefix("/").unwrap_or(dir)), counts);
        // The directories on the way, none another user's to swap.
        for ancestor in dir.ancestors() {
            counts.stats += 1;
            let _ = fs::symlink_metadata(ancestor);
        }
    }
    if let Some(config) = &args.config {
        let _ = read_all(
            &root.join(config.strip_prefix("/").unwrap_or(config)),
            buf,
            counts,
        );
    }
    // The version nodectl reports: the binary's Go build information.
    let _ = read_at(proc_dir, &format!("{pid}/exe"), buf, counts);
}

/// One connection to `socket`, through its open directory (see [`api_wait`]).
fn connect(socket: &Path) -> io::Result<std::os::unix::net::UnixStream> {
    use std::os::fd::AsRawFd;
    let parent = socket.parent().unwrap_or(Path::new("."));
    let dir = File::open(parent)?;
    let short = Path::new(&format!("/proc/self/fd/{}", dir.as_raw_fd()))
        .join(socket.file_name().unwrap_or_default());
    std::os::unix::net::UnixStream::connect(short)
}

/// A shim: its proof (its `stat` again, binary, uids, namespaces, its
/// `-address` resolved in its root), its arguments and working directory,
/// and each thread's `syscall` (`stat` unless it runs or idles in a wait,
/// `wchan` in D), as nodectl reads them on a node without swap. Whether a
/// thread is in `umount2` or D: a suspect for the second look.
fn shim(
    proc_dir: &File,
    pid: u64,
    address: Option<&Path>,
    buf: &mut Vec<u8>,
    counts: &mut Counts,
) -> bool {
    let Ok(dir) = open_at(proc_dir, &pid.to_string(), OFlag::O_DIRECTORY).map(File::from) else {
        return false;
    };
    counts.shims += 1;
    for file in ["stat", "status", "cmdline"] {
        let _ = read_at(&dir, file, buf, counts);
    }
    for link in ["exe", "cwd"] {
        counts.stats += 1;
        let _ = nix::fcntl::readlinkat(&dir, link);
    }
    for name in ["exe", "ns/user", "ns/pid", "ns/mnt"] {
        counts.stats += 1;
        let _ = nix::sys::stat::fstatat(&dir, name, AtFlags::empty());
    }
    if let (Some(address), Ok(root)) = (
        address,
        open_at(&dir, "root", OFlag::O_PATH | OFlag::O_DIRECTORY),
    ) {
        counts.stats += 1;
        let how = nix::fcntl::OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
            .resolve(
                nix::fcntl::ResolveFlag::RESOLVE_IN_ROOT
                    | nix::fcntl::ResolveFlag::RESOLVE_NO_MAGICLINKS,
            );
        if let Ok(socket) = nix::fcntl::openat2(&root, address, how) {
            let _ = nix::sys::stat::fstat(&socket);
        }
    }
    let Some((task, tids)) = numbered_entries(&dir, "task") else {
        return false;
    };
    let leader = pid.to_string();
    let mut suspect = false;
    for tid in tids {
        counts.threads += 1;
        if read_at(&task, &format!("{tid}/syscall"), buf, counts).is_err() {
            continue;
        }
        let number = buf
            .split(|&b| b == b' ')
            .next()
            .unwrap_or_default()
            .to_vec();
        // futex, epoll_pwait, epoll_wait, waitid, nanosleep (x86_64): idle.
        let idle = matches!(&number[..], b"202" | b"281" | b"232" | b"247" | b"35");
        if tid == leader || buf.starts_with(b"running") || idle {
            continue;
        }
        suspect |= number == b"166"; // umount2
        if read_at(&task, &format!("{tid}/stat"), buf, counts).is_ok() {
            let state = buf
                .iter()
                .rposition(|&b| b == b')')
                .and_then(|at| buf.get(at + 2));
            if state == Some(&b'D') {
                suspect = true;
                let _ = read_at(&task, &format!("{tid}/wchan"), buf, counts);
            }
        }
    }
    suspect
}

/// The namespaces of `netns` that a thread of any process is in
/// (`task/<tid>/ns/net`) or a descriptor holds (`fd/<n>`, read as a link,
/// stat'ed when it names a namespace), by identity.
fn holders(
    proc_dir: &File,
    pids: &[u64],
    netns: &[(PathBuf, (u64, u64))],
    counts: &mut Counts,
) -> std::collections::BTreeSet<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let wanted: std::collections::BTreeSet<(u64, u64)> = netns.iter().map(|(_, id)| *id).collect();
    let mut held = std::collections::BTreeSet::new();
    let identity = |dir: &Dir, name: &str, counts: &mut Counts| {
        counts.stats += 1;
        nix::sys::stat::fstatat(dir, name, AtFlags::empty())
            .ok()
            .map(|s| (s.st_dev, s.st_ino))
            .filter(|id| wanted.contains(id))
    };
    for pid in pids {
        let Ok(dir) = open_at(proc_dir, &pid.to_string(), OFlag::O_DIRECTORY).map(File::from)
        else {
            continue;
        };
        for (sub, is_task) in [("task", true), ("fd", false)] {
            let Some((opened, names)) = numbered_entries(&dir, sub) else {
                continue;
            };
            for name in names {
                let found = if is_task {
                    identity(&opened, &format!("{name}/ns/net"), counts)
                } else {
                    counts.stats += 1;
                    match nix::fcntl::readlinkat(&opened, name.as_str()) {
                        Ok(target)
                            if target.as_bytes().starts_with(b"net:[")
                                || netns.iter().any(|(p, _)| p.as_os_str() == target) =>
                        {
                            identity(&opened, &name, counts)
                        }
                        _ => None,
                    }
                };
                held.extend(found);
            }
        }
    }
    held
}

/// The interfaces of the namespace mounted at `path`: a thread of its own
/// joins it (`setns`) and reads `net/dev` (`thread-self` of the proc root).
fn look_at_interfaces(path: &Path, proc_root: &Path, counts: &mut Counts) {
    let (path, net_dev) = (path.to_path_buf(), proc_root.join("thread-self/net/dev"));
    let looked = std::thread::spawn(move || -> io::Result<usize> {
        let namespace = File::open(&path)?;
        nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNET)?;
        Ok(fs::read(net_dev)?.len())
    })
    .join();
    counts.interfaces_looked_at += 1;
    if let Ok(Ok(bytes)) = looked {
        counts.bytes += bytes as u64;
    }
}
