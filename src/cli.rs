//! Command-line interface. Global options work before or after the
//! subcommand; alerting scripts depend on their names.

use std::net::{Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum, ValueHint};

use crate::checks::Settings;
use crate::gather::GatherOptions;
use crate::model::recording::RECORDER_FILE;
use crate::model::{Ask, Reads};
use crate::paths::PathFlags;
use crate::render::Format;

#[derive(Debug, Parser)]
#[command(
    name = "nodectl",
    version,
    about = "Find what containerd got wrong on this node, and clean it up safely",
    after_help = "Exit status: 0 nothing found, 1 findings, 2 could not check (or bad usage)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// containerd root directory [default: the running containerd's, else from its config, else /var/lib/containerd]
    #[arg(long, global = true, value_name = "PATH", value_hint = ValueHint::DirPath)]
    pub root: Option<PathBuf>,
    /// containerd state directory [default: the running containerd's, else from its config, else /run/containerd]
    #[arg(long, global = true, value_name = "PATH", value_hint = ValueHint::DirPath)]
    pub state: Option<PathBuf>,
    /// containerd socket [default: the running containerd's, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one
    #[arg(long, global = true, value_name = "PATH")]
    pub address: Option<PathBuf>,
    /// containerd namespace of the Kubernetes containers
    #[arg(
        short = 'n',
        long,
        global = true,
        value_name = "NS",
        value_hint = ValueHint::Other,
        default_value = "k8s.io",
        value_parser = namespace
    )]
    pub namespace: String,
    /// Output format
    #[arg(short = 'o', long, global = true, value_name = "FORMAT", value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]
    #[arg(long, global = true, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub config: Option<PathBuf>,
    /// procfs to read processes from (a captured or synthetic one, for tests and benchmarks)
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        value_hint = ValueHint::DirPath,
        default_value = "/proc",
        hide = true
    )]
    pub proc_root: PathBuf,
    /// kubelet's root directory (its --root-dir) [default: the running kubelet's, else /var/lib/kubelet]
    #[arg(long, global = true, value_name = "PATH", value_hint = ValueHint::DirPath)]
    pub kubelet_root: Option<PathBuf>,
    /// kubelet's pod log directory, where each pod's <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet's podLogsDir, else /var/log/pods]
    #[arg(long, global = true, value_name = "PATH", value_hint = ValueHint::DirPath)]
    pub kubelet_pod_logs: Option<PathBuf>,
    /// kubelet's cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet's, else /]
    #[arg(long, global = true, value_name = "CGROUP", value_hint = ValueHint::Other)]
    pub kubelet_cgroup_root: Option<PathBuf>,
    /// The cgroup filesystem to read pod cgroups from (a synthetic one, for tests and benchmarks)
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        value_hint = ValueHint::DirPath,
        default_value = "/sys/fs/cgroup",
        hide = true
    )]
    pub cgroup_fs: PathBuf,
    /// Mount table to read [default: the running containerd's, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]
    #[arg(long, global = true, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub mountinfo: Option<PathBuf>,
    /// Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)
    #[arg(short = 'q', long, global = true)]
    pub quiet: bool,
    /// Deadline for each containerd API call (at most 10m)
    #[arg(long, global = true, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "3s", value_parser = at_most::<TEN_MINUTES>)]
    pub timeout: Duration,
}

impl Cli {
    /// `check --textfile`: where the metrics go besides `-o`.
    pub fn textfile(&self) -> Option<&std::path::Path> {
        match &self.command {
            Command::Check(args) => args.textfile.as_deref(),
            _ => None,
        }
    }
}

impl GlobalArgs {
    /// What to gather for what a command runs (see `checks::registry::reads`):
    /// the sources its checks, views and actions read, each API call bounded
    /// by `--timeout`. An API asked only once something is found is asked
    /// by the command then (`gather::add_containerd_records`).
    pub fn gather_options(&self, reads: Reads) -> GatherOptions {
        GatherOptions {
            namespace: self.namespace.clone(),
            proc_root: self.proc_root.clone(),
            mountinfo: self.mountinfo.clone(),
            api_timeout: (reads.containerd_api == Ask::Always).then_some(self.timeout),
            cri_api: reads.cri_api,
            cri_address: None,
            progress: !self.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()),
            shim_threads: reads.shim_threads,
            bundle_sockets: reads.bundle_sockets,
            snapshots: reads.snapshots,
            mounts: reads.mounts,
            cni: reads.cni,
            kubelet: reads.kubelet,
            kubelet_root: self.kubelet_root.clone(),
            kubelet_pod_logs: self.kubelet_pod_logs.clone(),
            pod_cgroups: reads.pod_cgroups,
            netns: reads.netns,
            kubelet_cgroup_root: self.kubelet_cgroup_root.clone(),
            cgroup_fs: self.cgroup_fs.clone(),
            timeout: self.timeout,
        }
    }

    pub fn path_flags(&self) -> PathFlags {
        PathFlags {
            config: self.config.clone(),
            root: self.root.clone(),
            state: self.state.clone(),
            address: self.address.clone(),
            proc_root: Some(self.proc_root.clone()),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every check in one report: the files, the processes and both APIs cross-checked
    Check(CheckArgs),
    /// Write the evidence `check` works from to a file, for `check --from` elsewhere
    Collect(CollectArgs),
    /// Containers CRI shows as RUNNING whose process is dead, and exits CRI recorded late
    Zombies(ZombiesArgs),
    /// Every containerd shim process: its pod, age, memory and children
    Shims,
    /// Shims that no container record owns and that serve no live process; --kill ends them
    LeakedShims(LeakedShimsArgs),
    /// Rootfs and shm mounts, and bundle directories, that nothing owns any more; --unmount and --remove-bundles clean them
    LeakedMounts(LeakedMountsArgs),
    /// Active snapshots that no container, lease or GC root holds; --remove removes them
    LeakedSnapshots(LeakedSnapshotsArgs),
    /// Pod addresses host-local holds for sandboxes that no longer exist; --release frees them
    LeakedIps(LeakedIpsArgs),
    /// Pod sandboxes left NotReady with no container; --remove stops and removes them through CRI
    LeakedSandboxes(LeakedSandboxesArgs),
    /// kubelet pod cgroups whose pod has no sandbox; --remove removes those nothing runs in
    LeakedPodCgroups(LeakedPodCgroupsArgs),
    /// Pod network namespaces CRI made that no sandbox record names and nothing holds (no thread in it, no descriptor on it, no foreign interface); --remove unmounts and removes them
    LeakedNetns(LeakedNetnsArgs),
    /// Serve `check`'s metrics over HTTP (/metrics, /healthz), checking once per --interval and when containerd's events call for it; never kills
    Serve(ServeArgs),
    /// Tell what `check` finds as it appears and as it clears, looking when containerd's events call for it; never kills
    Watch(WatchArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("cleanup").multiple(true).args(["unmount", "remove_bundles"])))]
pub struct LeakedMountsArgs {
    /// Unmount the leaked mounts (each re-checked first); without --yes only says what it would do
    #[arg(long)]
    pub unmount: bool,
    /// Detach lazily (MNT_DETACH) a mount that is busy; without it a busy mount is left and reported
    #[arg(long, requires = "unmount")]
    pub lazy: bool,
    /// Remove the orphan bundle directories (each re-checked first, only once nothing is mounted below); without --yes only says what it would do
    #[arg(long)]
    pub remove_bundles: bool,
    /// Act: without it, --unmount and --remove-bundles change nothing
    #[arg(long, requires = "cleanup")]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct LeakedSnapshotsArgs {
    /// Remove the leaked snapshots (each re-checked first); without --yes only says what it would do
    #[arg(long)]
    pub remove: bool,
    /// Act: without it, --remove changes nothing
    #[arg(long, requires = "remove")]
    pub yes: bool,
    /// How long since its last change before an unheld active snapshot is called leaked (an unpack or a container being created holds its snapshot within moments)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "10m", value_parser = at_most::<TEN_YEARS>)]
    pub grace: Duration,
}

#[derive(Debug, Args)]
pub struct LeakedIpsArgs {
    /// Release the leaked addresses, as host-local does, under its lock (each re-checked first); without --yes only says what it would do
    #[arg(long)]
    pub release: bool,
    /// Act: without it, --release changes nothing
    #[arg(long, requires = "release")]
    pub yes: bool,
    /// How long ago an address must have been reserved for a sandbox no API knows to count as leaked (a sandbox being set up has its address before its record; at most 10m)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "5m", value_parser = at_most::<TEN_MINUTES>)]
    pub grace: Duration,
}

#[derive(Debug, Args)]
pub struct LeakedSandboxesArgs {
    /// Stop and remove the leaked sandboxes through CRI, which tears their network down (each re-checked first); without --yes only says what it would do
    #[arg(long)]
    pub remove: bool,
    /// Act: without it, --remove changes nothing
    #[arg(long, requires = "remove")]
    pub yes: bool,
    /// How long after its creation a NotReady sandbox with no container counts as leaked (a pod starting or stopping is so for a moment; at most 10 years)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "10m", value_parser = at_most::<TEN_YEARS>)]
    pub grace: Duration,
    /// CRI socket [default: the containerd socket]
    #[arg(long, value_name = "PATH")]
    pub cri_address: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LeakedPodCgroupsArgs {
    /// Remove the leaked pod cgroups nothing runs in, container cgroups first (each re-checked first); without --yes only says what it would do
    #[arg(long)]
    pub remove: bool,
    /// Act: without it, --remove changes nothing
    #[arg(long, requires = "remove")]
    pub yes: bool,
    /// How long after its creation a pod cgroup with no sandbox counts as leaked (kubelet makes it before the sandbox; at most 10 years)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "10m", value_parser = at_most::<TEN_YEARS>)]
    pub grace: Duration,
    /// CRI socket [default: the containerd socket]
    #[arg(long, value_name = "PATH")]
    pub cri_address: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LeakedNetnsArgs {
    /// Unmount the leaked namespaces and remove their files, as CRI's teardown does (each re-checked first); without --yes only says what it would do
    #[arg(long)]
    pub remove: bool,
    /// Act: without it, --remove changes nothing
    #[arg(long, requires = "remove")]
    pub yes: bool,
    /// How long after its creation a namespace no record names counts as leaked (CRI makes it a moment before the record names it; at most 10 years)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "10m", value_parser = at_most::<TEN_YEARS>)]
    pub grace: Duration,
}

#[derive(Debug, Args)]
pub struct LeakedShimsArgs {
    /// End the leaked shims (after re-checking each one); without it nothing is touched
    #[arg(long)]
    pub kill: bool,
    /// Do not ask before killing (required when stdin is not a terminal)
    #[arg(long, requires = "kill")]
    pub yes: bool,
    /// How long a shim gets to exit after SIGTERM before SIGKILL (at most 10m)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "5s", value_parser = at_most::<TEN_MINUTES>)]
    pub grace: Duration,
}

#[derive(Debug, Clone, Args)]
pub struct LateExitArgs {
    /// An exit recorded this long after it happened is reported as late-exit (at most 10 years)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "30s", value_parser = at_most::<TEN_YEARS>)]
    pub late_after: Duration,
    /// Only report late exits that happened within this window (at most 10 years)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "24h", value_parser = at_most::<TEN_YEARS>)]
    pub since: Duration,
}

/// The second look of every command that confirms what it reports.
#[derive(Debug, Clone, Args)]
pub struct SettleArgs {
    /// Look again this long after the first look before calling a zombie or
    /// a blocked shim one (only when the first shows one; 0s looks again at
    /// once) [default: 1s, or --timeout if shorter] (at most 1m)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, value_parser = at_most::<ONE_MINUTE>)]
    pub settle: Option<Duration>,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub late: LateExitArgs,
    #[command(flatten)]
    pub confirm: SettleArgs,
    /// A CRI call slower than this is reported (kubelet's PLEG gives up at 3 min; at most 10m)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "1s", value_parser = at_most::<TEN_MINUTES>)]
    pub slow: Duration,
    /// An address host-local holds for a sandbox no API knows counts as leaked once reserved this long (a sandbox being set up has its address before its record; at most 10m)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "5m", value_parser = at_most::<TEN_MINUTES>)]
    pub ip_grace: Duration,
    /// A NotReady sandbox with no container counts as leaked this long after its creation (a pod starting or stopping is so for a moment; at most 10 years)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "10m", value_parser = at_most::<TEN_YEARS>)]
    pub sandbox_grace: Duration,
    /// CRI socket [default: the containerd socket]
    #[arg(long, value_name = "PATH")]
    pub cri_address: Option<PathBuf>,
    /// Check an evidence archive written by `nodectl collect` instead of this node
    #[arg(long, value_name = "FILE.tar.gz", value_hint = ValueHint::FilePath)]
    pub from: Option<PathBuf>,
    /// Also write the metrics of `-o prometheus` to PATH for node_exporter's textfile collector, replaced atomically; after a run that fails, the last good series stay, with nodectl_up 0 and the error as a comment
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath)]
    pub textfile: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to serve on: IP:PORT, or :PORT for every address (127.0.0.1:0 picks a free port; the address is printed on stderr)
    #[arg(long, value_name = "ADDR", value_parser = listen_address)]
    pub listen: SocketAddr,
    /// How often the checks run, whatever the scrape rate; scrapes get the last result (1s to 1h)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = interval)]
    pub interval: Duration,
    #[command(flatten)]
    pub look: LookArgs,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The periodic full look, beside the ones containerd's events call for (1s to 1h)
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = interval)]
    pub interval: Duration,
    /// Where the flight recorder's ring is written after each change, for `collect` (in a directory only root can write to, made 0700 if missing; never through a symlink)
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath, default_value = RECORDER_FILE)]
    pub recorder_file: PathBuf,
    #[command(flatten)]
    pub look: LookArgs,
}

/// What each look of a long-running command (`serve`, `watch`) is: `check`
/// on this node, with `check`'s thresholds.
#[derive(Debug, Clone, Args)]
pub struct LookArgs {
    #[command(flatten)]
    pub late: LateExitArgs,
    #[command(flatten)]
    pub confirm: SettleArgs,
    /// A CRI call slower than this is reported (kubelet's PLEG gives up at 3 min; at most 10m)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = at_most::<TEN_MINUTES>)]
    pub slow: Duration,
    /// An address host-local holds for a sandbox no API knows counts as leaked once reserved this long (a sandbox being set up has its address before its record; at most 10m)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "5m", value_parser = at_most::<TEN_MINUTES>)]
    pub ip_grace: Duration,
    /// A NotReady sandbox with no container counts as leaked this long after its creation (a pod starting or stopping is so for a moment; at most 10 years)
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other, default_value = "10m", value_parser = at_most::<TEN_YEARS>)]
    pub sandbox_grace: Duration,
    /// CRI socket [default: the containerd socket]
    #[arg(long, value_name = "PATH")]
    pub cri_address: Option<PathBuf>,
}

/// The thresholds of the checks, from the command line: each command's
/// flags turned into the checks' settings here, and nowhere else.
impl CheckArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            slow: self.slow,
            ip_grace: self.ip_grace,
            sandbox_grace: self.sandbox_grace,
            ..self.late.settings()
        }
    }
}

impl LateExitArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            late_after: self.late_after,
            since: self.since,
            ..Settings::default()
        }
    }
}

impl ZombiesArgs {
    pub fn settings(&self) -> Settings {
        self.late.settings()
    }
}

impl LeakedSnapshotsArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            snapshot_grace: self.grace,
            ..Settings::default()
        }
    }
}

impl LeakedIpsArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            ip_grace: self.grace,
            ..Settings::default()
        }
    }
}

impl LeakedNetnsArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            sandbox_grace: self.grace,
            ..Settings::default()
        }
    }
}

impl LeakedPodCgroupsArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            sandbox_grace: self.grace,
            ..Settings::default()
        }
    }
}

impl LeakedSandboxesArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            sandbox_grace: self.grace,
            ..Settings::default()
        }
    }
}

impl LookArgs {
    /// What each look is: `check` on this node.
    pub fn check_args(&self) -> CheckArgs {
        CheckArgs {
            late: self.late.clone(),
            confirm: self.confirm.clone(),
            slow: self.slow,
            ip_grace: self.ip_grace,
            sandbox_grace: self.sandbox_grace,
            cri_address: self.cri_address.clone(),
            from: None,
            textfile: None,
        }
    }
}

#[derive(Debug, Args)]
pub struct CollectArgs {
    /// Where to write the archive (gzipped tar, mode 0600); `-o` is the output format, as everywhere
    #[arg(value_name = "FILE.tar.gz", value_hint = ValueHint::FilePath)]
    pub file: PathBuf,
    /// Replace FILE if it exists (never through a symlink, never one of the files collected)
    #[arg(long)]
    pub force: bool,
    /// CRI socket [default: the containerd socket]
    #[arg(long, value_name = "PATH")]
    pub cri_address: Option<PathBuf>,
    /// The flight recorder file `watch` writes, archived when there (never through a symlink; at most its stated size)
    #[arg(long, value_name = "PATH", value_hint = ValueHint::FilePath, default_value = RECORDER_FILE)]
    pub recorder_file: PathBuf,
    #[command(flatten)]
    pub confirm: SettleArgs,
}

#[derive(Debug, Args)]
pub struct ZombiesArgs {
    #[command(flatten)]
    pub late: LateExitArgs,
    #[command(flatten)]
    pub confirm: SettleArgs,
}

const ONE_MINUTE: u64 = 60;
const ONE_HOUR: u64 = 3600;
const TEN_MINUTES: u64 = 600;
const TEN_YEARS: u64 = 10 * 365 * 24 * 3600 + 2 * 24 * 3600;

/// A duration flag with an upper bound: every deadline and window is added
/// to an `Instant` or a nanosecond timestamp, which overflow (a panic, or a
/// wrap to negative) long before `Duration::MAX`; no real use needs more.
fn at_most<const MAX_SECS: u64>(value: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(value).map_err(|e| e.to_string())?;
    let max = Duration::from_secs(MAX_SECS);
    if duration > max {
        let max = if MAX_SECS >= 86400 {
            format!("{}days", MAX_SECS / 86400)
        } else {
            humantime::format_duration(max).to_string()
        };
        return Err(format!("at most {max} (got {value})"));
    }
    Ok(duration)
}

/// `serve --interval`: at least a second (a loop with no pause would keep a
/// core busy and containerd with it), at most an hour.
fn interval(value: &str) -> Result<Duration, String> {
    let duration = at_most::<ONE_HOUR>(value)?;
    if duration < Duration::from_secs(1) {
        return Err(format!("at least 1s (got {value})"));
    }
    Ok(duration)
}

/// `serve --listen`: `IP:PORT` (`[::1]:PORT` for IPv6), or `:PORT` for
/// every address (bound as `[::]`, which takes IPv4 too, or `0.0.0.0` where
/// there is no IPv6). No host names: nothing is resolved.
fn listen_address(value: &str) -> Result<SocketAddr, String> {
    if let Some(port) = value.strip_prefix(':') {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("not a port: {port:?} (IP:PORT or :PORT)"))?;
        return Ok(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)));
    }
    value
        .parse()
        .map_err(|_| format!("not IP:PORT or :PORT: {value:?}"))
}

/// containerd's identifier rule (pkg/identifiers: `Validate`): letters and
/// digits in runs joined by single `.`, `_` or `-`, at most 76 characters.
/// containerd refuses anything else, and the namespace becomes a path
/// component under the state directory (`-n ../../etc` would walk out).
fn namespace(value: &str) -> Result<String, String> {
    const MAX: usize = 76;
    let valid = value.len() <= MAX
        && value
            .split(['.', '_', '-'])
            .all(|run| !run.is_empty() && run.bytes().all(|b| b.is_ascii_alphanumeric()));
    if valid {
        Ok(value.to_string())
    } else {
        Err(format!(
            "not a containerd namespace: letters and digits joined by single '.', '_' or '-', at most {MAX} characters"
        ))
    }
}

/// `-o`'s names and help: the command line's words for [`Format`], kept
/// here so that the renderers know nothing of clap.
impl ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            Format::Table,
            Format::Wide,
            Format::Json,
            Format::Prometheus,
            Format::Npd,
            Format::NpdEvent,
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let (name, help) = match self {
            Format::Table => ("table", "For people: a list that fits the terminal (80 columns into a pipe)"),
            Format::Wide => ("wide", "For people: the list, then each finding's evidence, cause and remedy"),
            Format::Json => ("json", "One JSON document (schema/report-v1.schema.json)"),
            Format::Prometheus => ("prometheus", "node_exporter textfile-collector metrics"),
            Format::Npd => ("npd", "node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check"),
            Format::NpdEvent => ("npd-event", "node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings"),
        };
        Some(PossibleValue::new(name).help(help))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_work_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "nodectl",
            "zombies",
            "--root",
            "/r",
            "-n",
            "moby",
            "-o",
            "json",
            "--late-after",
            "1m",
        ])
        .unwrap();
        assert_eq!(cli.global.root, Some(PathBuf::from("/r")));
        assert_eq!(cli.global.namespace, "moby");
        assert_eq!(cli.global.output, Format::Json);
        let Command::Zombies(args) = cli.command else {
            panic!("not zombies")
        };
        assert_eq!(args.late.late_after, Duration::from_secs(60));
        assert_eq!(args.late.since, Duration::from_secs(24 * 3600));
    }

    #[test]
    fn cleanup_acts_only_when_asked_and_lazy_only_with_unmount() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["nodectl", "leaked-mounts"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv).map(|cli| match cli.command {
                Command::LeakedMounts(args) => args,
                _ => panic!("not leaked-mounts"),
            })
        };
        let plain = parse(&[]).unwrap();
        assert!(!plain.unmount && !plain.remove_bundles && !plain.yes);
        let both = parse(&["--unmount", "--remove-bundles", "--yes", "--lazy"]).unwrap();
        assert!(both.unmount && both.remove_bundles && both.yes && both.lazy);
        assert!(parse(&["--remove-bundles", "--yes"]).unwrap().yes);
        for bad in [&["--yes"][..], &["--lazy"], &["--remove-bundles", "--lazy"]] {
            let err = parse(bad).map(|_| ()).unwrap_err();
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn snapshots_are_removed_only_when_asked_with_a_grace_of_ten_minutes() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["nodectl", "leaked-snapshots"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv).map(|cli| match cli.command {
                Command::LeakedSnapshots(args) => args,
                _ => panic!("not leaked-snapshots"),
            })
        };
        let plain = parse(&[]).unwrap();
        assert!(!plain.remove && !plain.yes);
        assert_eq!(plain.grace, Duration::from_secs(600));
        let both = parse(&["--remove", "--yes", "--grace", "0s"]).unwrap();
        assert!(both.remove && both.yes && both.grace.is_zero());
        let err = parse(&["--yes"]).map(|_| ()).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn namespaces_follow_containerds_identifier_rule() {
        for good in ["k8s.io", "moby", "a", "a-b_c.d9", &"a".repeat(76)] {
            assert_eq!(namespace(good).as_deref(), Ok(good), "{good}");
        }
        for bad in [
            "",
            "../../../../etc",
            "k8s.io/",
            ".hidden",
            "trailing-",
            "a..b",
            "a b",
            "é",
            "a\x1b",
            &"a".repeat(77),
        ] {
            assert!(namespace(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn every_duration_flag_has_an_upper_bound_and_accepts_it() {
        let parse = |args: &[&str]| {
            let mut argv = vec!["nodectl"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv).map(|_| ())
        };
        for (flag, max, over) in [
            (&["check", "--timeout"][..], "10m", "601s"),
            (&["check", "--slow"], "10m", "601s"),
            (&["check", "--late-after"], "3652days", "3653days"),
            (&["check", "--since"], "3652days", "3653days"),
            (&["zombies", "--settle"], "1m", "61s"),
            (&["check", "--settle"], "1m", "61s"),
            (&["collect", "f.tar.gz", "--settle"], "1m", "61s"),
            (&["serve", "--listen", ":9101", "--settle"], "1m", "61s"),
            (&["leaked-shims", "--kill", "--grace"], "10m", "601s"),
            (&["leaked-snapshots", "--grace"], "3652days", "3653days"),
            (&["serve", "--listen", ":9101", "--interval"], "1h", "3601s"),
            (&["serve", "--listen", ":9101", "--slow"], "10m", "601s"),
        ] {
            assert!(parse(&[flag, &[max]].concat()).is_ok(), "{flag:?} {max}");
            let err = parse(&[flag, &[over]].concat()).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
            assert!(err.to_string().contains("at most"), "{err}");
        }
        assert!(parse(&["check", "--timeout", "9223372036854775807s"]).is_err());
        let below = parse(&["serve", "--listen", ":9101", "--interval", "999ms"]).unwrap_err();
        assert!(below.to_string().contains("at least 1s"), "{below}");
    }

    #[test]
    fn serve_listens_on_an_ip_and_port_or_on_every_address() {
        let listen = |value: &str| {
            Cli::try_parse_from(["nodectl", "serve", "--listen", value]).map(|cli| {
                match cli.command {
                    Command::Serve(args) => args.listen,
                    _ => panic!("not serve"),
                }
            })
        };
        assert_eq!(
            listen("127.0.0.1:9101").unwrap(),
            "127.0.0.1:9101".parse().unwrap()
        );
        assert_eq!(listen("[::1]:0").unwrap(), "[::1]:0".parse().unwrap());
        assert_eq!(listen(":9101").unwrap(), "[::]:9101".parse().unwrap());
        for bad in ["localhost:9101", "9101", ":", ":65536", "127.0.0.1"] {
            assert!(listen(bad).is_err(), "{bad} accepted");
        }
        assert!(
            Cli::try_parse_from(["nodectl", "serve"]).is_err(),
            "--listen is required"
        );
    }

    #[test]
    fn every_command_that_confirms_takes_the_one_settle_option() {
        let settle = |args: &[&str]| {
            let mut argv = vec!["nodectl"];
            argv.extend_from_slice(args);
            match Cli::try_parse_from(argv).unwrap().command {
                Command::Check(args) => args.confirm.settle,
                Command::Collect(args) => args.confirm.settle,
                Command::Zombies(args) => args.confirm.settle,
                // What each of serve's runs of check is given.
                Command::Serve(args) => args.look.confirm.settle,
                _ => panic!("no second look"),
            }
        };
        for command in [
            &["check"][..],
            &["collect", "f.tar.gz"],
            &["zombies"],
            &["serve", "--listen", ":9101"],
        ] {
            assert_eq!(settle(command), None, "{command:?}");
            let given = [command, &["--settle", "250ms"]].concat();
            assert_eq!(
                settle(&given),
                Some(Duration::from_millis(250)),
                "{command:?}"
            );
        }
    }
}
