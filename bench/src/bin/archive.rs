//! Writes a generated `check --from` archive (the integration tests'
//! generators, tests/support): bench/run's `check --from` row, and the
//! figures of docs/performance.md.
//!
//! ```sh
//! archive --out FILE --orphan-bundles N
//! archive --out FILE --lost-records N [--parts drift,snapshot,old-sandbox,pod-dir,duplicate]
//! ```
//!
//! `--orphan-bundles`: N orphan bundles, each with its rootfs mounted
//! (tests/support/orphan_archive.rs). `--lost-records`: N pods whose
//! records containerd lost, with the parts named (all by default), each
//! giving N findings of one kind (tests/support/lost_records_archive.rs).

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::path::PathBuf;

use clap::Parser;
use support::Part;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    out: PathBuf,
    #[arg(long, conflicts_with = "lost_records")]
    orphan_bundles: Option<usize>,
    #[arg(long)]
    lost_records: Option<usize>,
    /// Comma-separated parts of `--lost-records` (default: all).
    #[arg(long, requires = "lost_records", value_delimiter = ',', value_parser = part)]
    parts: Vec<Part>,
}

fn part(name: &str) -> Result<Part, String> {
    Part::ALL
        .into_iter()
        .find(|p| p.name() == name)
        .ok_or_else(|| format!("no part {name:?}"))
}

fn main() {
    let args = Args::parse();
    match (args.orphan_bundles, args.lost_records) {
        (Some(n), None) => support::write_orphan_archive(&args.out, n),
        (None, Some(n)) => {
            let parts = if args.parts.is_empty() {
                Part::ALL.to_vec()
            } else {
                args.parts
            };
            support::write_lost_records_archive(&args.out, n, &parts)
        }
        _ => {
            eprintln!("archive: --orphan-bundles N or --lost-records N");
            std::process::exit(2);
        }
    }
}
