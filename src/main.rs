use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

use nodectl::cli::{Cli, Command};
use nodectl::exit_codes::{exit, COULD_NOT_CHECK};
use nodectl::{commands, inert, render};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Serve(args) => return commands::serve::run(&cli.global, args),
        Command::Watch(args) => return commands::watch::run(&cli.global, args),
        _ => {}
    }
    let textfile = cli.textfile();
    let report = match commands::run(&cli) {
        Ok(report) => report,
        Err(reason) => {
            // `{:#}`: the error with each context it went through.
            let reason = format!("{reason:#}");
            let _ = writeln!(io::stderr(), "nodectl: {}", inert::shown(&reason));
            if let Some(path) = textfile {
                if let Err(err) = render::textfile::keep_last_good(path, "check", &reason) {
                    let _ = writeln!(io::stderr(), "nodectl: --textfile: {err}");
                }
            }
            return exit(COULD_NOT_CHECK);
        }
    };
    if let Some(path) = textfile {
        if let Err(err) = render::textfile::write_report(path, &report) {
            let _ = writeln!(io::stderr(), "nodectl: --textfile: {err}");
            return exit(COULD_NOT_CHECK);
        }
    }
    let status = render::exit_code(&report, cli.global.output);
    if cli.global.quiet {
        return status;
    }
    // Buffered: a report is many small writes, and the node is already busy.
    // 64 KiB: a JSON report of 10,000 containers went out in 155 writes of
    // the default 8 KiB.
    let mut stdout = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
    match render::render(&report, cli.global.output, &mut stdout) {
        Ok(()) => status,
        // Piped into `head` and the like: the reader has what it wanted.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => status,
        Err(err) => {
            let _ = writeln!(io::stderr(), "nodectl: writing the report: {err}");
            exit(COULD_NOT_CHECK)
        }
    }
}
