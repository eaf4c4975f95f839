//! Renderers: the report for people (a table) or for programs (JSON).

pub mod json;
pub mod table;

use std::io::{self, Write};

use clap::ValueEnum;

use crate::report::Report;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

pub fn render(report: &Report, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => table::render(report, out),
        Format::Json => json::render(report, out),
    }?;
    out.flush()
}
