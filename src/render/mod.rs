//! Renderers: the report for people (a table) or for programs (JSON).

pub mod json;
pub mod npd;
pub mod prometheus;
pub mod table;

use std::io::{self, Write};

use clap::ValueEnum;

use crate::report::Report;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people: tables
    Table,
    /// One JSON document (schema/report-v1.schema.json)
    Json,
    /// node_exporter textfile-collector metrics
    Prometheus,
    /// node-problem-detector custom plugin: one line, exit 0/1/2
    Npd,
}

pub fn render(report: &Report, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => table::render(report, out),
        Format::Json => json::render(report, out),
        Format::Prometheus => prometheus::render(report, out),
        Format::Npd => npd::render(report, out),
    }?;
    out.flush()
}
