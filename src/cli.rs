//! Command-line interface. Global options work before or after the
//! subcommand; alerting scripts depend on their names.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::gather::GatherOptions;
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

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// containerd root directory [default: the running containerd's, else from its config, else /var/lib/containerd]
    #[arg(long, global = true, value_name = "PATH")]
    pub root: Option<PathBuf>,
    /// containerd state directory [default: the running containerd's, else from its config, else /run/containerd]
    #[arg(long, global = true, value_name = "PATH")]
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
        default_value = "k8s.io",
        value_parser = namespace
    )]
    pub namespace: String,
    /// Output format
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// procfs to read processes from (a captured or synthetic one, for tests and benchmarks)
    #[arg(
        long,
        global = true,
        value_name = "PATH",
        default_value = "/proc",
        hide = true
    )]
    pub proc_root: PathBuf,
    /// mountinfo file to read mounts from [default: <proc-root>/self/mountinfo]
    #[arg(long, global = true, value_name = "PATH", hide = true)]
    pub mountinfo: Option<PathBuf>,
    /// Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)
    #[arg(short = 'q', long, global = true)]
    pub quiet: bool,
    /// Deadline for each containerd API call (at most 10m)
    #[arg(long, global = true, value_name = "DURATION", default_value = "3s", value_parser = at_most::<TEN_MINUTES>)]
    pub timeout: Duration,
}

impl GlobalArgs {
    /// What to gather; `ask_api` adds the containerd API, bounded by `--timeout`.
    pub fn gather_options(&self, ask_api: bool) -> GatherOptions {
        GatherOptions {
            namespace: self.namespace.clone(),
            proc_root: self.proc_root.clone(),
            mountinfo: self
                .mountinfo
                .clone()
                .unwrap_or_else(|| self.proc_root.join("self/mountinfo")),
            api_timeout: ask_api.then_some(self.timeout),
            cri_address: None,
            progress: !self.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()),
            shim_threads: true,
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
    /// Rootfs and shm mounts, and bundle directories, that nothing owns any more
    LeakedMounts,
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
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = at_most::<TEN_MINUTES>)]
    pub grace: Duration,
}

#[derive(Debug, Args)]
pub struct LateExitArgs {
    /// An exit recorded this long after it happened is reported as late-exit (at most 10 years)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = at_most::<TEN_YEARS>)]
    pub late_after: Duration,
    /// Only report late exits that happened within this window (at most 10 years)
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = at_most::<TEN_YEARS>)]
    pub since: Duration,
}

/// The second look of every command that confirms what it reports.
#[derive(Debug, Args)]
pub struct SettleArgs {
    /// Look again this long after the first look before calling a zombie or
    /// a blocked shim one (only when the first shows one; 0s looks again at
    /// once) [default: 1s, or --timeout if shorter] (at most 1m)
    #[arg(long, value_name = "DURATION", value_parser = at_most::<ONE_MINUTE>)]
    pub settle: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub late: LateExitArgs,
    #[command(flatten)]
    pub confirm: SettleArgs,
    /// A CRI call slower than this is reported (kubelet's PLEG gives up at 3 min; at most 10m)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = at_most::<TEN_MINUTES>)]
    pub slow: Duration,
    /// CRI socket [default: the containerd socket]
    #[arg(long, value_name = "PATH")]
    pub cri_address: Option<PathBuf>,
    /// Check an evidence archive written by `nodectl collect` instead of this node
    #[arg(long, value_name = "FILE.tar.gz")]
    pub from: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CollectArgs {
    /// Where to write the archive (gzipped tar, mode 0600); `-o` is the output format, as everywhere
    #[arg(value_name = "FILE.tar.gz")]
    pub file: PathBuf,
    /// Replace FILE if it exists (never through a symlink, never one of the files collected)
    #[arg(long)]
    pub force: bool,
    /// CRI socket [default: the containerd socket]
    #[arg(long, value_name = "PATH")]
    pub cri_address: Option<PathBuf>,
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
            (&["leaked-shims", "--kill", "--grace"], "10m", "601s"),
        ] {
            assert!(parse(&[flag, &[max]].concat()).is_ok(), "{flag:?} {max}");
            let err = parse(&[flag, &[over]].concat()).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
            assert!(err.to_string().contains("at most"), "{err}");
        }
        assert!(parse(&["check", "--timeout", "9223372036854775807s"]).is_err());
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
                _ => panic!("no second look"),
            }
        };
        for command in [&["check"][..], &["collect", "f.tar.gz"], &["zombies"]] {
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
