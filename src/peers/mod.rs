//! How each peer reads its own files, as data beside the upstream function
//! each rule cites: containerd's config by release line, kubelet's flags and
//! config files, libcni's network files, and what CRI's own answer says of
//! its networks and its daemon's root and state.
//!
//! Pure rules over text already read (no file, process or socket is opened
//! here): `paths/` and `sources/` read the bytes, bounded, and hand them to
//! these rules, so that a peer's reading lives in one place rather than as
//! branches spread through the readers. Where a rule differs between a
//! peer's releases, the difference is a table keyed by the release, not an
//! `if` in a reader.
pub mod containerd_config;
pub mod containerd_cri;
pub mod cri_cni;
pub mod cri_dirs;
pub mod go_json;
pub mod host_local;
pub mod kubelet;
pub mod libcni;
