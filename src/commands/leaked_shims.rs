//! `nodectl leaked-shims [--kill]`: shims nothing owns; optionally end them.

use std::io::{self, BufRead, IsTerminal, Write};

use anyhow::{bail, Context};

use crate::act::kill;
use crate::checks::{registry, Settings};
use crate::cli::{GlobalArgs, LeakedShimsArgs};
use crate::gather::gather;
use crate::model::{Kind, Reads};
use crate::paths;
use crate::report::Report;

/// What `leaked-shims` runs.
pub const KINDS: &[Kind] = &[Kind::LeakedShim];

/// What `--kill` reads beyond the check: the mounts a killed shim leaves
/// behind under its bundle, reported with the kill.
const KILL_READS: Reads = Reads {
    mounts: true,
    ..Reads::NOTHING
};

pub fn run(global: &GlobalArgs, args: &LeakedShimsArgs) -> anyhow::Result<Report> {
    if args.kill && !nix::unistd::geteuid().is_root() {
        bail!("--kill needs root: shims run as root");
    }
    let (paths, config_gaps) = paths::resolve(&global.path_flags());
    let options = global.gather_options(registry::reads(KINDS).and(KILL_READS));
    let snapshot = gather(&paths, &options, config_gaps.clone());
    let findings = registry::run(KINDS, &snapshot, &snapshot, &Settings::default());

    let regather = super::look_again(global, &options);
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
    let mut report = super::leak_report("leaked-shims", global, findings, snapshot);
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
