//! One module per subcommand: gather, check, act if asked, and hand back the
//! report. An `Err` is a reason the command could not run at all.

pub mod check;
pub mod collect;
pub mod flight_recorder;
pub mod leaked_ips;
pub mod leaked_mounts;
pub mod leaked_netns;
pub mod leaked_pod_cgroups;
pub mod leaked_sandboxes;
pub mod leaked_shims;
pub mod leaked_snapshots;
pub mod recorder_file;
pub mod serve;
pub mod shims;
pub mod watch;
pub mod watch_state;
pub mod zombies;

use std::path::Path;

use crate::checks::registry;
use crate::cli::{Cli, Command, GlobalArgs, SettleArgs};
use crate::confirm;
use crate::gather::GatherOptions;
use crate::model::{Kind, Reads, Snapshot};
use crate::paths;
use crate::report::Report;

/// The report of the command, capped (see [`Report::within_limits`]) before any
/// output sees it.
pub fn run(cli: &Cli) -> anyhow::Result<Report> {
    run_before_limits(cli).map(Report::within_limits)
}

fn run_before_limits(cli: &Cli) -> anyhow::Result<Report> {
    match &cli.command {
        Command::Check(args) => check::run(&cli.global, args),
        Command::Collect(args) => collect::run(&cli.global, args),
        Command::Zombies(args) => Ok(zombies::run(&cli.global, args)),
        Command::Shims => Ok(shims::run(&cli.global)),
        Command::LeakedShims(args) => leaked_shims::run(&cli.global, args),
        Command::LeakedMounts(args) => leaked_mounts::run(&cli.global, args),
        Command::LeakedSnapshots(args) => leaked_snapshots::run(&cli.global, args),
        Command::LeakedIps(args) => leaked_ips::run(&cli.global, args),
        Command::LeakedSandboxes(args) => leaked_sandboxes::run(&cli.global, args),
        Command::LeakedPodCgroups(args) => leaked_pod_cgroups::run(&cli.global, args),
        Command::LeakedNetns(args) => leaked_netns::run(&cli.global, args),
        // Runs until stopped, with no report: main hands it to serve::run.
        Command::Serve(_) => anyhow::bail!("serve has no report (see commands::serve::run)"),
        Command::Watch(_) => anyhow::bail!("watch has no report (see commands::watch::run)"),
    }
}

/// The CPU this process has used so far (user and system, every thread):
/// what a look of `watch` or `serve` costs, to pace the next one
/// ([`watch_state::LOOK_SHARE`]). Zero if the kernel will not say.
pub fn cpu_used() -> std::time::Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF)
        .map(|usage| {
            let (user, system) = (usage.user_time(), usage.system_time());
            let micros = |t: nix::sys::time::TimeVal| {
                t.tv_sec().max(0) as u64 * 1_000_000 + t.tv_usec().max(0) as u64
            };
            std::time::Duration::from_micros(micros(user) + micros(system))
        })
        .unwrap_or_default()
}

/// Long-running commands (`watch`, `serve`) keep few malloc arenas. glibc
/// gives each new thread an arena of its own, up to 8 per core, and each
/// look runs on threads of its own: measured on the synthetic node of
/// 1,000 containers, `watch`'s peak RSS grew from 24 to 40 MiB over a
/// minute of churn with the default, and stayed at 17 MiB with one arena.
/// Two keep a look and the loop from contending on one lock.
fn few_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets a tunable of glibc's allocator; it is
    // called before the command starts any thread of its own.
    unsafe {
        nix::libc::mallopt(nix::libc::M_ARENA_MAX, 2);
    }
}

/// Frees `value` (snapshots of thousands of records, which take a
/// millisecond or more to free) on a thread of its own once the report is
/// built from them: the answer does not wait for the allocator. A one-shot
/// run exits without waiting for that thread; `serve` frees them meanwhile.
fn free_in_background<T: Send + 'static>(value: T) {
    // A thread that cannot be started drops `value` here, as before.
    let _ = std::thread::Builder::new()
        .name("nodectl-free".into())
        .spawn(move || drop(value));
}

/// What a pair of looks is taken for: `check` reads what its checks use;
/// an archive keeps what `shims` shows too (each bundle's socket).
#[derive(Debug, Clone, Copy, PartialEq)]
enum PairFor {
    Checks,
    Archive,
}

/// The two snapshots `check` and `collect` compare (see
/// [`confirm::gather_pair`]): the first asks both APIs (bounded by
/// `--timeout`), the second comes `--settle` later.
fn gather_pair(
    global: &GlobalArgs,
    cri_address: Option<&Path>,
    settle: &SettleArgs,
    purpose: PairFor,
) -> (Snapshot, Option<Snapshot>) {
    // Every look is gather's: it can find the running containerd itself.
    let (paths, config_gaps) = paths::resolve_for_gather(&global.path_flags());
    let options = pair_options(global, cri_address, purpose);
    let settle = confirm::settle(settle.settle, global.timeout);
    confirm::gather_pair(&paths, &options, config_gaps, settle)
}

/// CNI, read beside a leak command's own checks only to name what they
/// find (libcni's cache names a pod; host-local's store a sandbox's
/// addresses): it judges nothing, and a CNI gap leaves them checkable.
pub const NAMING_READS: Reads = Reads {
    cni: true,
    ..Reads::NOTHING
};

/// `check` is every check, so it reads what every check reads, both APIs
/// within one deadline (a silent containerd flags nothing, it is a gap); an
/// archive keeps what `shims` shows too.
fn pair_options(
    global: &GlobalArgs,
    cri_address: Option<&Path>,
    purpose: PairFor,
) -> GatherOptions {
    let mut reads = registry::reads(Kind::ALL);
    if purpose == PairFor::Archive {
        reads = reads.and(shims::READS);
    }
    GatherOptions {
        cri_address: cri_address.map(Path::to_path_buf),
        ..global.gather_options(reads)
    }
}

/// The options of the fresh look a cleanup takes right before acting: the
/// scan's, but the mount table is always the daemon's own, whatever
/// `--mountinfo` named (a copy, nodectl's own table in another mount
/// namespace): what is mounted where containerd and its shims mount (the
/// proven shims share its mount namespace, see `model::shim`) decides
/// whether a bundle, a netns or a mount may go; a removal in another
/// namespace detaches what the daemon's has mounted there.
fn acting(options: &GatherOptions) -> GatherOptions {
    GatherOptions {
        mountinfo: None,
        ..options.clone()
    }
}

/// The fresh look a cleanup takes right before acting: the paths resolved
/// again, so the daemon is proven again on that look (see
/// `act::daemon_proven`), and the node gathered as the scan gathered it
/// (with [`acting`]'s options).
fn look_again<'a>(
    global: &'a GlobalArgs,
    options: &'a GatherOptions,
) -> impl Fn() -> Snapshot + Copy + 'a {
    move || {
        let (paths, gaps) = paths::resolve(&global.path_flags());
        crate::gather::gather(&paths, options, gaps)
    }
}

/// What a leak command with a cleanup does: one look with `options`, the
/// checks of `kinds`, and, when `clean` is given, the cleanup of what that
/// look found, handed a fresh look to take right before acting.
fn scan_and_clean(
    command: &str,
    global: &GlobalArgs,
    kinds: &[Kind],
    options: &GatherOptions,
    settings: &crate::checks::Settings,
    clean: Option<impl FnOnce(&Snapshot, &dyn Fn() -> Snapshot) -> Vec<crate::model::Cleanup>>,
) -> Report {
    let (paths, config_gaps) = paths::resolve(&global.path_flags());
    let snapshot = crate::gather::gather(&paths, options, config_gaps);
    let findings = registry::run(kinds, &snapshot, &snapshot, settings);
    let cleanups = match clean {
        Some(clean) => {
            pause_for_tests();
            clean(&snapshot, &look_again(global, &acting(options)))
        }
        None => Vec::new(),
    };
    let mut report = leak_report(command, global, findings, snapshot);
    report.cleanups = cleanups;
    report
}

/// A leak command's report: its findings, with the scan's gaps and the
/// version it named.
fn leak_report(
    command: &str,
    global: &GlobalArgs,
    findings: Vec<crate::model::Finding>,
    snapshot: Snapshot,
) -> Report {
    // The look's own paths: what gather settled (the daemon found, a root
    // or state tied by its word or left untied), not those resolved before.
    Report::new(
        command,
        &global.namespace,
        snapshot.paths,
        findings,
        snapshot.gaps,
    )
    .identified(snapshot.containerd_version)
}

/// Test-only, and only in debug builds (a release build has no such code):
/// with `NODECTL_TEST_PAUSE_BEFORE_ACT=FILE`, creates FILE after the scan
/// and waits (at most 2 minutes) until someone removes it before the
/// re-check and the cleanup, so that a test can bring an object back to life
/// in between and see the cleanup refuse it.
pub(crate) fn pause_for_tests() {
    #[cfg(debug_assertions)]
    if let Some(file) = std::env::var_os("NODECTL_TEST_PAUSE_BEFORE_ACT") {
        let file = std::path::Path::new(&file);
        if std::fs::write(file, b"paused\n").is_ok() {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while file.exists() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// What each command reads, as (containerd API asked on every look,
    /// CRI API, shim threads, bundle sockets, snapshots, mount table, CNI).
    fn read_by(options: &GatherOptions) -> (bool, bool, bool, bool, bool, bool, bool) {
        (
            options.api_timeout.is_some(),
            options.cri_api,
            options.shim_threads,
            options.bundle_sockets,
            options.snapshots,
            options.mounts,
            options.cni,
        )
    }

    #[test]
    fn each_command_reads_what_its_checks_declare_and_nothing_more() {
        let cli = Cli::try_parse_from(["nodectl", "check"]).unwrap();
        let global = &cli.global;
        let options = |kinds: &[Kind]| global.gather_options(registry::reads(kinds));
        // check: everything but the bundles' sockets, which only an archive
        // keeps (for `shims` elsewhere) and only `shims` shows.
        let check = pair_options(global, None, PairFor::Checks);
        assert_eq!(read_by(&check), (true, true, true, false, true, true, true));
        assert_eq!(check.cri_address, None, "CRI at containerd's socket");
        let archive = pair_options(global, Some(Path::new("/cri.sock")), PairFor::Archive);
        assert_eq!(
            read_by(&archive),
            (true, true, true, true, true, true, true)
        );
        assert_eq!(archive.cri_address.as_deref(), Some(Path::new("/cri.sock")));
        // zombies: no API until something is found, no mount table.
        let zombies = options(zombies::KINDS);
        assert_eq!(
            read_by(&zombies),
            (false, false, true, false, false, false, false)
        );
        // The leak commands: the API on every look, no shim threads.
        assert_eq!(
            read_by(&options(leaked_shims::KINDS)),
            (true, false, false, false, false, false, false)
        );
        assert_eq!(
            read_by(&options(leaked_mounts::KINDS)),
            (true, false, false, false, false, true, false)
        );
        assert_eq!(
            read_by(&options(leaked_ips::KINDS)),
            (true, true, false, false, false, false, true)
        );
        assert_eq!(
            read_by(&options(leaked_sandboxes::KINDS)),
            (true, true, false, false, false, false, false)
        );
        assert_eq!(
            read_by(&options(leaked_snapshots::KINDS)),
            (true, false, false, false, true, false, false)
        );
        // shims: no API at all, so that it answers when containerd does not.
        assert_eq!(
            read_by(&shims::gather_options(global)),
            (false, false, true, true, false, false, false)
        );
    }
}
