//! The `shims` inventory: one row a shim, in place of the findings. Its
//! own section because its columns (age, memory, whose it is, what it is
//! blocked in) answer a different question than a finding does.

use std::io::{self, Write};

use comfy_table::{Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table};

use super::lines::{list_table, one_line, short, write_table, write_wrapped};
use super::readable::{duration, mebibytes};
use super::Layout;
use crate::inert::shown;
use crate::model::ShimRow;

/// The shims (or that none is running), then how many were left out as
/// not this containerd's.
pub(super) fn write_shims(
    shims: &[ShimRow],
    omitted: usize,
    layout: Layout,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out)?;
    if shims.is_empty() {
        writeln!(out, "No containerd shims are running.")?;
    } else {
        write_table(out, &shims_table(shims, layout))?;
    }
    if omitted > 0 {
        let line = format!("… and {omitted} more shim(s) not this containerd's, not listed");
        write_wrapped(out, layout, &line, "")?;
    }
    Ok(())
}

/// The shims: narrow, what tells a stuck or leaked one (its pod, age,
/// memory, whether it is this containerd's, what it is blocked in); `-o
/// wide` adds its namespace and children, nothing cut.
fn shims_table(shims: &[ShimRow], layout: Layout) -> Table {
    let mut header = vec!["PID", "ID", "POD", "AGE", "RSS", "OURS", "BLOCKED IN"];
    if layout.wide {
        header.extend(["NAMESPACE", "CHILDREN"]);
    }
    let mut table = list_table(&header, layout.width);
    if layout.wide {
        table.set_content_arrangement(ContentArrangement::Disabled);
    }
    for shim in shims {
        let pod = match (&shim.pod.pod_namespace, &shim.pod.pod_name) {
            (Some(ns), Some(name)) => format!("{}/{}", shown(ns), shown(name)),
            _ => "-".to_string(),
        };
        let mut row = vec![
            Cell::new(shim.pid),
            Cell::new(short(shim.id.as_deref().unwrap_or("?"))),
            Cell::new(pod),
            Cell::new(duration(shim.age_seconds)).set_alignment(CellAlignment::Right),
            Cell::new(mebibytes(shim.rss_bytes as f64)).set_alignment(CellAlignment::Right),
            Cell::new(match shim.identity {
                "ours" => "yes",
                "impostor" => "impostor",
                _ => "no",
            }),
            Cell::new(if shim.blocked_in.is_empty() {
                "-".to_string()
            } else {
                shown(&shim.blocked_in.join(", "))
            }),
        ];
        if layout.wide {
            row.push(Cell::new(shown(shim.namespace.as_deref().unwrap_or("-"))));
            row.push(Cell::new(format!(
                "{} live, {} defunct",
                shim.children_live.len(),
                shim.children_defunct.len()
            )));
            table.add_row(row);
        } else {
            table.add_row(one_line(row));
        }
    }
    for index in [0, 1, 3, 4, 5] {
        if let Some(column) = table.column_mut(index) {
            column.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
    table
}
