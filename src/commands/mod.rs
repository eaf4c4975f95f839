//! One module per subcommand: gather, check, act if asked, and hand back the
//! report. An `Err` is a reason the command could not run at all.

pub mod check;
pub mod collect;
pub mod leaked_mounts;
pub mod leaked_shims;
pub mod serve;
pub mod shims;
pub mod zombies;

use crate::cli::{Cli, Command};
use crate::report::Report;

/// The report of the command, bounded (see [`Report::bounded`]) before any
/// output sees it.
pub fn run(cli: &Cli) -> Result<Report, String> {
    run_unbounded(cli).map(Report::bounded)
}

fn run_unbounded(cli: &Cli) -> Result<Report, String> {
    match &cli.command {
        Command::Check(args) => check::run(&cli.global, args),
        Command::Collect(args) => collect::run(&cli.global, args),
        Command::Zombies(args) => Ok(zombies::run(&cli.global, args)),
        Command::Shims => Ok(shims::run(&cli.global)),
        Command::LeakedShims(args) => leaked_shims::run(&cli.global, args),
        Command::LeakedMounts(args) => leaked_mounts::run(&cli.global, args),
        // Runs until stopped, with no report: main hands it to serve::run.
        Command::Serve(_) => Err("serve has no report (see commands::serve::run)".into()),
    }
}
