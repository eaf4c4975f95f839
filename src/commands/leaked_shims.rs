//! `nodectl leaked-shims [--kill]`: shims nothing owns; optionally end them.

use std::io::{self, BufRead, IsTerminal, Write};

use anyhow::{bail, Context};

use crate::act::kill;
use crate::checks::{self, leaked_shim};
use crate::cli::{GlobalArgs, LeakedShimsArgs};
use crate::gather::{gather, GatherOptions};
use crate::paths;
use crate::report::Report;

pub fn run(global: &GlobalArgs, args: &LeakedShimsArgs) -> anyhow::Result<Report> {
    if args.kill && !nix::unistd::geteuid().is_root() {
        bail!("--kill needs root: shims run as root");
    }
    let (paths, config_gaps) = paths::resolve(&global.path_flags());
    let options = GatherOptions {
        shim_threads: false,
        ..global.gather_options(true)
    };
    let snapshot = gather(&paths, &options, config_gaps.clone());
    let mut findings = leaked_shim::check(&snapshot);
    checks::sort(&mut findings);

    // The daemon proven again right before acting, not only at the scan
    // (see `act::daemon_proven`).
    let regather = || {
        let (paths, gaps) = paths::resolve(&global.path_flags());
        gather(&paths, &options, gaps)
    };
    let actions = if findings.is_empty() {
        Vec::new()
    } else if !args.kill {
        kill::plan(&snapshot, regather)
    } else {
        if !args.yes {
            confirm(findings.len())?;
        }
        kill::kill(&snapshot, args.grace, regather)
    };
    let mut report = Report::new(
        "leaked-shims",
        &global.namespace,
        paths,
        findings,
        snapshot.gaps,
    )
    .identified(snapshot.containerd_version);
    report.actions = actions;
    Ok(report)
}

/// Asks on the terminal; without one, a kill needs `--yes`.
fn confirm(count: usize) -> anyhow::Result<()> {
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        bail!("refusing to kill without --yes: stdin is not a terminal");
    }
    eprint!("End {count} leaked shim(s)? Each is re-checked first. [y/N] ");
    let _ = io::stderr().flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .context("reading the answer")?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        bail!("not confirmed; nothing was touched")
    }
}
