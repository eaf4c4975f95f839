//! The syscall floor of a nodectl command: the least reading its answer
//! needs, done as cheaply as std allows, single-threaded. bench/run measures
//! it beside nodectl in the same run and prints the ratio (docs/benchmarks.md).
//!
//! ```sh
//! floor zombies --root ROOT [--proc-root /proc] [--stages]
//! floor leaked-shims|leaked-mounts|check --root ROOT --state STATE [--proc-root /proc]
//!     [--mountinfo /proc/self/mountinfo] [--with threads,bundle-files] [--stages]
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
//! `check`: the status files as above (without the `stat`: the process table
//! below answers it); list the proc root and read `<pid>/stat` of every
//! process (one open, one read, close); read `<pid>/cmdline` of every shim
//! (`comm` starting with `containerd-shim`); read mountinfo once; list the
//! task bundle directories (`STATE/io.containerd.runtime.v2.task/<namespace>/`).
//! `--with threads` adds, per shim, the listing of `task/` and each thread's
//! `stat` and `syscall`; `--with bundle-files` adds each bundle's
//! `config.json`, `address` and `shim.pid`. Neither is in the floor bench/run
//! measures; they are there to price those sources (docs/benchmarks.md).
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
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: floor zombies|leaked-shims|leaked-mounts|check --root ROOT [--state STATE] [--proc-root DIR] \
                     [--mountinfo FILE] [--with threads,bundle-files] [--api SOCKET --api-timeout MS] [--stages]";

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
}

struct Args {
    mode: Mode,
    root: PathBuf,
    state: Option<PathBuf>,
    proc_root: PathBuf,
    mountinfo: PathBuf,
    threads: bool,
    bundle_files: bool,
    stages: bool,
    /// containerd's socket, waited on last (see the head of this file).
    api: Option<PathBuf>,
    api_timeout: Duration,
}

impl Args {
    fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
        let mode = match argv.next().as_deref() {
            Some("zombies") => Mode::Zombies,
            Some("leaked-shims") => Mode::LeakedShims,
            Some("leaked-mounts") => Mode::LeakedMounts,
            Some("check") => Mode::Check,
            other => return Err(format!("unknown mode {other:?}")),
        };
        let mut args = Args {
            mode,
            root: PathBuf::new(),
            state: None,
            proc_root: PathBuf::from("/proc"),
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
            threads: false,
            bundle_files: false,
            stages: false,
            api: None,
            api_timeout: Duration::from_millis(200),
        };
        let mut root = None;
        while let Some(flag) = argv.next() {
            let mut value = || argv.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--root" => root = Some(PathBuf::from(value()?)),
                "--state" => args.state = Some(PathBuf::from(value()?)),
                "--proc-root" => args.proc_root = PathBuf::from(value()?),
                "--mountinfo" => args.mountinfo = PathBuf::from(value()?),
                "--with" => {
                    for part in value()?.split(',') {
                        match part {
                            "threads" => args.threads = true,
                            "bundle-files" => args.bundle_files = true,
                            "" => {}
                            other => return Err(format!("--with: unknown {other:?}")),
                        }
                    }
                }
                "--stages" => args.stages = true,
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
    /// With `--api`: whether a first byte came within the wait.
    api_answered: Option<bool>,
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

/// The pids of the status files without `FinishedAt`.
fn status_files(root: &Path, counts: &mut Counts) -> Result<Vec<u64>, String> {
    let dir = root.join("io.containerd.grpc.v1.cri/containers");
    let mut buf = vec![0u8; STATUS_BUFFER];
    let mut pids = Vec::new();
    let mut path = dir.clone();
    for entry in fs::read_dir(&dir).map_err(|e| io_err(&dir, e))? {
        let entry = entry.map_err(|e| io_err(&dir, e))?;
        path.push(entry.file_name());
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
    counts.unfinished = pids.len() as u64;
    Ok(pids)
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
            proc_scan(&args.proc_root, &mut procs, &mut counts)?;
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
        Mode::Check => {
            let pids = status_files(&args.root, &mut counts)?;
            stages.mark("status_files");
            proc_scan(&args.proc_root, &mut procs, &mut counts)?;
            counts.running_absent = pids
                .iter()
                .filter(|pid| procs.live.binary_search(pid).is_err())
                .count() as u64;
            stages.mark("proc_stat_all");
            shim_cmdlines(args, &procs, &mut counts, &mut stages);
            if args.threads {
                shim_threads(args, &procs, &mut counts);
                stages.mark("shim_threads");
            }
            mountinfo(args, &mut counts, &mut stages)?;
            bundles(args, &mut counts, &mut stages);
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

/// The processes seen: every pid (sorted) and the shims'.
#[derive(Default)]
struct Procs {
    live: Vec<u64>,
    shims: Vec<u64>,
}

/// Lists the proc root and reads `<pid>/stat` of every process.
fn proc_scan(proc_root: &Path, procs: &mut Procs, counts: &mut Counts) -> Result<(), String> {
    let mut buf = vec![0u8; 4096];
    let mut path = proc_root.to_path_buf();
    for entry in fs::read_dir(proc_root).map_err(|e| io_err(proc_root, e))? {
        let entry = entry.map_err(|e| io_err(proc_root, e))?;
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        path.push(&name);
        path.push("stat");
        if let Ok(n) = read_once(&path, &mut buf) {
            counts.processes += 1;
            counts.bytes += n as u64;
            procs.live.push(pid);
            // comm is between the first '(' and the last ')'.
            let text = &buf[..n];
            if let Some(open) = text.iter().position(|&b| b == b'(') {
                if text[open + 1..].starts_with(b"containerd-shim") {
                    procs.shims.push(pid);
                }
            }
        }
        path.pop();
        path.pop();
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

/// Per shim, lists `task/` and reads each thread's `stat` and `syscall`.
fn shim_threads(args: &Args, procs: &Procs, counts: &mut Counts) {
    let mut buf = vec![0u8; 4096];
    let mut path = args.proc_root.clone();
    for pid in &procs.shims {
        path.push(pid.to_string());
        path.push("task");
        let tids: Vec<_> = match fs::read_dir(&path) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name())
                .collect(),
            Err(_) => Vec::new(),
        };
        for tid in tids {
            path.push(&tid);
            for file in ["stat", "syscall"] {
                path.push(file);
                if let Ok(n) = read_once(&path, &mut buf) {
                    counts.bytes += n as u64;
                }
                path.pop();
            }
            counts.threads += 1;
            path.pop();
        }
        path.pop();
        path.pop();
    }
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

/// Lists the task bundles (`STATE/io.containerd.runtime.v2.task/<ns>/<id>`),
/// and with `--with bundle-files` reads each one's three files.
fn bundles(args: &Args, counts: &mut Counts, stages: &mut Stages) {
    let state = args.state.as_deref().expect("checked in Args::parse");
    let tasks = state.join("io.containerd.runtime.v2.task");
    let mut buf = vec![0u8; 64 * 1024];
    if let Ok(namespaces) = fs::read_dir(&tasks) {
        for namespace in namespaces.filter_map(|e| e.ok()) {
            let Ok(bundles) = fs::read_dir(namespace.path()) else {
                continue;
            };
            for bundle in bundles.filter_map(|e| e.ok()) {
                counts.bundles += 1;
                if args.bundle_files {
                    let mut dir = bundle.path();
                    for file in ["config.json", "address", "shim.pid"] {
                        dir.push(file);
                        if let Ok(n) = read_once(&dir, &mut buf) {
                            counts.bytes += n as u64;
                        }
                        dir.pop();
                    }
                }
            }
        }
    }
    stages.mark(if args.bundle_files {
        "bundles_with_files"
    } else {
        "bundle_dirs"
    });
}
