//! What a source could not read: data beside the findings, never a failure
//! of the whole run.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a gap came from: each source of evidence, plus nodectl itself (for
/// the note that gaps were left out of a report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The containerd config file.
    Config,
    /// CRI's on-disk store: container status files and sandbox directories.
    CriStore,
    /// The runtime's task bundle directories.
    Bundles,
    Procfs,
    Mountinfo,
    /// I/O pressure and memory write-back.
    Node,
    ContainerdApi,
    CriApi,
    /// CNI's network configs and host-local's reservations.
    Cni,
    /// kubelet's pod directories (and the mounts below them).
    Kubelet,
    /// nodectl itself: what a report left out.
    Nodectl,
}

impl Source {
    /// Every source, in the order of the schema's enum.
    pub const ALL: [Source; 11] = [
        Source::Config,
        Source::CriStore,
        Source::Bundles,
        Source::Procfs,
        Source::Mountinfo,
        Source::Node,
        Source::ContainerdApi,
        Source::CriApi,
        Source::Cni,
        Source::Kubelet,
        Source::Nodectl,
    ];

    /// The name in JSON, Prometheus labels and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Config => "config",
            Source::CriStore => "cri-store",
            Source::Bundles => "bundles",
            Source::Procfs => "procfs",
            Source::Mountinfo => "mountinfo",
            Source::Node => "node",
            Source::ContainerdApi => "containerd-api",
            Source::CriApi => "cri-api",
            Source::Cni => "cni",
            Source::Kubelet => "kubelet",
            Source::Nodectl => "nodectl",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something a source could not read. Reported beside the findings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct Gap {
    /// The source that hit it.
    pub source: Source,
    /// The file or directory that failed.
    #[serde(with = "crate::model::path_json")]
    pub path: PathBuf,
    pub error: String,
    /// True when the whole source is unavailable, not just one item of it.
    pub source_unavailable: bool,
}

impl Gap {
    pub fn item(source: Source, path: impl Into<PathBuf>, error: impl ToString) -> Gap {
        Gap {
            source,
            path: path.into(),
            error: error.to_string(),
            source_unavailable: false,
        }
    }

    pub fn source(source: Source, path: impl Into<PathBuf>, error: impl ToString) -> Gap {
        Gap {
            source_unavailable: true,
            ..Gap::item(source, path, error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_and_the_readme_name_every_source() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schema/report-v1.schema.json")).unwrap();
        let names: Vec<&str> = schema["$defs"]["gap"]["properties"]["source"]["enum"]
            .as_array()
            .expect("the schema lists the gap sources")
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let ours: Vec<&str> = Source::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ours);
        let readme = include_str!("../../docs/json.md").replace("\n  ", " ");
        let listed = readme
            .split_once("- `gaps`: what a source (")
            .and_then(|(_, rest)| rest.split_once(')'))
            .expect("docs/json.md lists the gap sources")
            .0;
        for source in Source::ALL.iter().filter(|s| **s != Source::Nodectl) {
            assert!(
                listed.contains(&format!("`{source}`")),
                "docs/json.md's gap sources lack {source}: {listed}"
            );
        }
    }

    #[test]
    fn each_source_is_named_in_json_as_as_str_says() {
        for source in Source::ALL {
            assert_eq!(
                serde_json::to_value(source).unwrap(),
                serde_json::Value::from(source.as_str())
            );
        }
    }
}
