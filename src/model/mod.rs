//! The model: every value that travels between the layers, as plain data.
//!
//! Sources fill a [`Snapshot`]; checks read it and return [`Finding`]s;
//! commands, renderers and actions hand these on. The model is the leaf of
//! the crate: it imports nothing of it outside `crate::model` (see
//! `tests/layers.rs`), so every layer can depend on it and it on none.

pub mod action;
pub mod api;
pub mod api_views;
pub mod cgroups;
pub mod cleanup;
pub mod cni;
pub mod cri_status;
pub mod event;
pub mod finding;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod gap;
pub mod kubelet;
pub mod names;
pub mod netns;
pub mod node;
pub mod path_json;
pub mod paths;
pub mod reads;
pub mod recording;
pub mod sample;
pub mod shim;
pub mod shim_row;
pub mod snapshot;
pub mod snapshotter;

pub use action::{Action, Outcome};
pub use api::{Api, ApiCall, Method};
pub use api_views::{
    ContainerdView, CriApiState, CriCondition, CriDirs, CriIndex, CriItem, CriSaid, CriView,
    NamespaceView, StatusProbe, TaskStatus, TaskView, NO_SOCKET,
};
pub use cgroups::{CgroupView, KubeletSetting, PodCgroup};
pub use cleanup::{Cleanup, CleanupAction, CleanupOutcome};
pub use cni::{
    AddressUse, CachedAttachment, CniIndex, CniNetwork, CniView, CriCniConfig, CriNetwork,
    IpReservation, NetworksFrom,
};
pub use cri_status::{CriContainer, CriState, CriStatus, FileVersion};
pub use event::Event;
pub use finding::{Basis, Finding, Kind, Severity};
pub use gap::{Gap, Source};
pub use kubelet::{
    KubeletFacts, KubeletIndex, KubeletView, KubeletWord, KubeletWordSummary, PodDir, PodLogDir,
    PodName,
};
pub use names::{
    name_labels, PodRef, CONTAINER_NAME_LABEL, CRI_NAMESPACE, KIND_LABEL, POD_NAMESPACE_LABEL,
    POD_NAME_LABEL,
};
pub use netns::{HeldBy, NetnsHolder, NetnsMount, NetnsView};
pub use node::NodeContext;
pub use paths::{
    ConfigApart, ContainerdProcess, CriSetting, DaemonDir, DaemonLookup, Located, Origin,
    OtherContainerd, Paths, Untied,
};
pub use reads::{Ask, Reads};
pub use recording::{RecorderFile, Recording};
pub use sample::{
    ExitReading, ExitsToRead, Observation, ProcessKey, Sample, SampleBasis, ZombieTarget,
};
pub use shim::{FileId, Identity, NamespaceIds, ProofReference, Shim, ShimProof, ThreadSample};
pub use shim_row::ShimRow;
pub use snapshot::*;
pub use snapshotter::{
    ContainerSnapshot, Lease, LeaseResource, SnapshotInfo, SnapshotKind, SnapshotterView,
};
