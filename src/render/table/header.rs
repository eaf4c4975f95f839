//! The lines before any list: which containerd was looked at and how each
//! path was found, why it may not be acted on, its known bugs, the node's
//! pressure. A reader checks these first, so they never depend on what
//! was found.

use std::io::{self, Write};

use super::lines::write_wrapped;
use super::Layout;
use crate::inert::{inert_path, shown};
use crate::model::{Located, NodeContext};
use crate::report::Report;

/// The daemon line, then its notes, the containerds that are not it, why
/// nodectl cannot act, the advisories for its version and the node line.
pub(super) fn write_header(report: &Report, layout: Layout, out: &mut dyn Write) -> io::Result<()> {
    let paths = &report.paths;
    let mut config = match &paths.config {
        Some(path) => format!("config {}", inert_path(path)),
        None => "no config file".to_string(),
    };
    if let Some(process) = &paths.process {
        config.push_str(&format!(", running containerd pid {}", process.pid));
    }
    let version = match &report.containerd.version {
        Some(version) => format!("{} [{}]", shown(version), report.containerd.source.as_str()),
        None => "version unknown".to_string(),
    };
    let header = format!(
        "containerd {version}: root {}, state {}, socket {} ({config}); namespace {}",
        located(&paths.root),
        located(&paths.state),
        located(&paths.address),
        shown(&report.namespace)
    );
    write_wrapped(out, layout, &header, "")?;
    if let Some(note) = &paths.note {
        write_wrapped(out, layout, &format!("note: {}", shown(note)), "")?;
    }
    for other in &paths.other_containerds {
        let line = format!(
            "not the daemon: containerd pid {} ({}): {}",
            other.pid,
            inert_path(&other.exe),
            shown(&other.reason)
        );
        write_wrapped(out, layout, &line, "")?;
    }
    for reason in &paths.unproven {
        write_wrapped(out, layout, &format!("cannot act: {}", shown(reason)), "")?;
    }
    for advisory in &report.advisories {
        let line = format!(
            "known bug {}: {}; {}",
            advisory.id, advisory.symptom, advisory.advice
        );
        write_wrapped(out, layout, &line, "")?;
    }
    if let Some(context) = &report.context {
        write_wrapped(out, layout, &format!("node: {}", node_line(context)), "")?;
    }
    Ok(())
}

fn node_line(context: &NodeContext) -> String {
    let pct = |v: Option<f32>| v.map_or("?".to_string(), |v| format!("{v:.1}%"));
    let mib = |v: Option<u64>| {
        v.map_or("?".to_string(), |v| {
            format!("{:.0} MiB", v as f64 / 1048576.0)
        })
    };
    format!(
        "io pressure some {} / full {} (10 s); Dirty {}, Writeback {}; overlay rootfs mounts {} ({} volatile); containerd {}",
        pct(context.io_pressure_some_avg10),
        pct(context.io_pressure_full_avg10),
        mib(context.dirty_bytes),
        mib(context.writeback_bytes),
        context.overlay_rootfs_mounts,
        context.overlay_rootfs_volatile,
        shown(context.containerd_version.as_deref().unwrap_or("?")),
    )
}

fn located(at: &Located) -> String {
    format!("{} [{}]", inert_path(&at.path), at.origin.as_str())
}
