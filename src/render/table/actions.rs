//! What actions and cleanups did: a row each, then the paths they left
//! behind or named, whole, one a line, so that they can be copied.

use std::io::{self, Write};

use super::lines::{list_table, short, write_table, write_wrapped};
use super::Layout;
use crate::inert::{inert_path, shown};
use crate::model::{Action, Cleanup};

/// `Actions:`: each shim acted on and the outcome, then what it left behind.
pub(super) fn write_actions(
    actions: &[Action],
    layout: Layout,
    out: &mut dyn Write,
) -> io::Result<()> {
    if actions.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nActions:")?;
    let mut table = list_table(&["SHIM PID", "ID", "OUTCOME", "DETAIL"], layout.width);
    for action in actions {
        table.add_row(vec![
            action.shim_pid.to_string(),
            short(&action.shim_id),
            serde_json::to_value(&action.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            shown(&action.detail),
        ]);
    }
    write_table(out, &table)?;
    // What each shim left behind, a path per line, whole.
    for action in actions.iter().filter(|a| !a.remains.is_empty()) {
        writeln!(out, "Left behind by shim {}:", action.shim_pid)?;
        for remain in &action.remains {
            write_wrapped(out, layout, &shown(remain), "  ")?;
        }
    }
    Ok(())
}

/// `Cleanup:`: each cleanup and the outcome, then the path it was for.
pub(super) fn write_cleanups(
    cleanups: &[Cleanup],
    layout: Layout,
    out: &mut dyn Write,
) -> io::Result<()> {
    if cleanups.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nCleanup:")?;
    let mut table = list_table(&["ACTION", "ID", "OUTCOME", "DETAIL"], layout.width);
    for cleanup in cleanups {
        table.add_row(vec![
            cleanup.action.as_str().to_string(),
            short(&cleanup.id),
            cleanup.outcome.as_str().to_string(),
            shown(&cleanup.detail),
        ]);
    }
    write_table(out, &table)?;
    // Each one's path on a line of its own, whole.
    for cleanup in cleanups {
        let line = format!(
            "{} {}: {}",
            cleanup.action.as_str(),
            short(&cleanup.id),
            shown(&inert_path(&cleanup.path))
        );
        write_wrapped(out, layout, &line, "  ")?;
    }
    Ok(())
}
