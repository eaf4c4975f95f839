//! nodectl: finds what containerd got wrong on a Kubernetes node.
//!
//! Gather → snapshot → checks → render/act:
//! - [`sources`] each read one kind of evidence (CRI store, bundles, procfs),
//!   [`gather`] assembles them into a serialisable [`snapshot::Snapshot`];
//! - [`checks`] are pure functions from a snapshot to findings;
//! - [`render`] prints a [`report::Report`]; [`commands`] wire it per subcommand;
//!   [`exporter`] serves `serve`'s metrics over HTTP.

pub mod act;
pub mod advisories;
pub mod checks;
pub mod cli;
pub mod commands;
pub mod evidence;
pub mod exporter;
pub mod gather;
pub mod path_json;
pub mod paths;
pub mod render;
pub mod report;
pub mod snapshot;
pub mod sources;
