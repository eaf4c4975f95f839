//! Renderers: the report for people (a list, `wide` with the details) or
//! for programs (JSON, Prometheus, node-problem-detector).

pub mod json;
pub mod npd;
pub mod prometheus;
pub mod table;
pub mod textfile;

use std::io::{self, Write};

use crate::report::Report;

/// How a report is printed (`-o`; the command line's names and help for
/// each are in `cli`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A list that fits the terminal.
    Table,
    /// The list, then each finding's evidence, cause and remedy.
    Wide,
    /// One JSON document (schema/report-v1.schema.json).
    Json,
    /// node_exporter textfile-collector metrics.
    Prometheus,
    /// node-problem-detector's permanent rule (the condition).
    Npd,
    /// node-problem-detector's temporary rule (events).
    NpdEvent,
}

pub fn render(report: &Report, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => table::render(report, out),
        Format::Wide => table::render_wide(report, out),
        Format::Json => json::render(report, out),
        Format::Prometheus => prometheus::render(report, out),
        Format::Npd => npd::render(report, out),
        Format::NpdEvent => npd::render_for(report, npd::Rule::Event, out),
    }?;
    out.flush()
}

/// The exit status: the report's (0 nothing found, 1 findings, 2 could not
/// check), but node-problem-detector's for its formats (see [`npd`]).
pub fn exit_code(report: &Report, format: Format) -> std::process::ExitCode {
    match format {
        Format::Npd => npd::exit_code(report, npd::Rule::Condition),
        Format::NpdEvent => npd::exit_code(report, npd::Rule::Event),
        _ => report.exit_code(),
    }
}
