use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

use nodectl::cli::Cli;
use nodectl::{commands, inert, render};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let report = match commands::run(&cli) {
        Ok(report) => report,
        Err(reason) => {
            // `{:#}`: the error with each context it went through.
            let reason = format!("{reason:#}");
            let _ = writeln!(io::stderr(), "nodectl: {}", inert::shown(&reason));
            return ExitCode::from(2);
        }
    };
    if cli.global.quiet {
        return report.exit_code();
    }
    // Buffered: a report is many small writes, and the node is already busy.
    let mut stdout = io::BufWriter::new(io::stdout().lock());
    match render::render(&report, cli.global.output, &mut stdout) {
        Ok(()) => report.exit_code(),
        // Piped into `head` and the like: the reader has what it wanted.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => report.exit_code(),
        Err(err) => {
            let _ = writeln!(io::stderr(), "nodectl: writing the report: {err}");
            ExitCode::from(2)
        }
    }
}
