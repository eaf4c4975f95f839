//! nodectl: finds what containerd got wrong on a Kubernetes node.
//!
//! Gather → snapshot → checks → render/act, in layers. A module imports only
//! from layers below its own, never from its own layer or above, so imports
//! run one way (`tests/layers.rs` reads this list and enforces it):
//!
//! 0. [`model`]: the values every layer passes on (the snapshot and its
//!    views, gaps, API calls, findings, inventory rows, actions); [`inert`]:
//!    text made safe to print; [`read`]: the floor for reading the node
//!    (bounded reads of files and `/proc`, threads waited for until a
//!    deadline, work shared by two threads, the atomic write beside a file);
//!    [`exit_codes`]: the exit statuses, named once. None imports anything
//!    of the crate.
//! 1. [`advisories`] know containerd's bugs by version: facts about
//!    releases, which a check uses to tell the story its evidence fits;
//!    [`peers`] read each peer's own files as that peer does (containerd's
//!    config by line, kubelet's flags and config, libcni's networks): pure
//!    rules over text, each beside the upstream function it follows.
//! 2. [`sources`] each read one kind of evidence from the node into the
//!    model; [`checks`] are pure functions from a snapshot to findings.
//! 3. [`paths`] resolves which containerd to look at; [`report`] is what a
//!    command hands to a renderer.
//! 4. [`gather`] runs every source once, within one deadline; [`archive`]
//!    writes and reads the archive of snapshots (`collect`, `check
//!    --from`), reading the node's files through the floor's bounded reader.
//! 5. [`confirm`] takes the second look before a zombie or a blocked shim is
//!    called one; [`act`] is the only code that changes the node.
//! 6. [`render`] prints a report as a table, JSON, Prometheus or NPD text,
//!    or writes it as a node-exporter textfile; [`exporter`] answers
//!    `serve`'s scrapes over HTTP with the bytes it is handed.
//! 7. [`cli`]: the command line.
//! 8. [`commands`] wire it all per subcommand.

pub mod act;
pub mod advisories;
pub mod archive;
pub mod checks;
pub mod cli;
pub mod commands;
pub mod confirm;
pub mod exit_codes;
pub mod exporter;
pub mod gather;
pub mod inert;
pub mod model;
pub mod paths;
pub mod peers;
pub mod read;
pub mod render;
pub mod report;
pub mod sources;
