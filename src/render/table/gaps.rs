//! `Could not check:`, last: what nodectl could not read, and why, so no
//! one takes a short list of findings for a clean node.

use std::io::{self, Write};

use super::lines::write_wrapped;
use super::Layout;
use crate::inert::{inert_path, shown};
use crate::model::Gap;

/// Each gap: its source, the path it could not read (if any) and the error.
pub(super) fn write_gaps(gaps: &[Gap], layout: Layout, out: &mut dyn Write) -> io::Result<()> {
    if gaps.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nCould not check:")?;
    for gap in gaps {
        let path = inert_path(&gap.path);
        let line = if path.is_empty() {
            format!("{}: {}", gap.source, shown(&gap.error))
        } else {
            format!("{} {path}: {}", gap.source, shown(&gap.error))
        };
        write_wrapped(out, layout, &line, "  ")?;
    }
    Ok(())
}
