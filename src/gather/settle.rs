//! What the peers' own answers settle after the files were read: which
//! networks CRI loaded, whether a containers directory that is not there is
//! a gap, and which line read containerd's config.

use std::time::Instant;

use crate::model::{CniView, CriView, Gap, NetworksFrom, Paths, Source};
use crate::peers::containerd_config::line_of;
use crate::sources::{cni, cri_store, SourceThread};

use super::GatherOptions;

/// Settles which networks CRI loads. CRI's own word first: what the
/// proven daemon's CRI says it loaded (`Status(verbose)`); its conf dir and
/// max_conf_num when they are not those read (containerd's config read
/// apart from how CRI merged it) are read again, within the deadline, and
/// the first reading's CNI gaps, of a directory CRI does not use, dropped.
/// Without its word, the files as the libcni of containerd's `version`
/// reads them, and the view says why.
pub(super) fn settle_cni(
    read: Option<CniView>,
    cri: Option<&CriView>,
    paths: &Paths,
    options: &GatherOptions,
    version: Option<&str>,
    (deadline, started): (Instant, Instant),
    gaps: &mut Vec<Gap>,
) -> Option<CniView> {
    let mut view = read?;
    // CRI's word is the daemon's own whether or not its root and state are
    // proven (those decide what may be acted on, not what CRI loaded).
    let told = match cri {
        Some(cri) => cri.cni_config.as_ref().ok_or_else(|| {
            cri.cni_config_unread
                .clone()
                .unwrap_or_else(|| "CRI did not say".to_string())
        }),
        None => Err("CRI was not asked".to_string()),
    };
    let told = match told {
        Ok(told) => told,
        Err(why) => {
            cni::settle(&mut view, version, gaps);
            view.networks_from = NetworksFrom::Files { why };
            return Some(view);
        }
    };
    let max_conf_num = paths.cni_max_conf_num.unwrap_or(cni::DEFAULT_MAX_CONF_NUM);
    if view.conf_dir != told.conf_dir || max_conf_num != told.max_conf_num {
        let mut cris = paths.clone();
        cris.cni_conf_dir = Some(told.conf_dir.clone());
        cris.cni_max_conf_num = Some(told.max_conf_num);
        let proc_root = options.proc_root.clone();
        let again = SourceThread::spawn(cni::SOURCE, &told.conf_dir, move |gaps| {
            cni::read_configured(&cris, &proc_root, gaps)
        });
        gaps.retain(|gap| gap.source != cni::SOURCE);
        view = again.wait(deadline, started, gaps)?;
    }
    cni::settle_by_cri(&mut view, told, gaps);
    Some(view)
}

/// Drops the gap of a containers directory that does not exist under a
/// root proven the daemon's: CRI has made no container there yet (see
/// [`cri_store::is_missing_containers_dir`]), or runs no CRI at all. CRI
/// listing a container keeps it (the directory must be there), as does a
/// root or state not proven (it may be the wrong one).
pub(super) fn settle_cri_store(cri: Option<&CriView>, paths: &Paths, gaps: &mut Vec<Gap>) {
    let some_listed = cri
        .and_then(|cri| cri.containers.as_ref())
        .is_some_and(|containers| !containers.is_empty());
    if some_listed || !paths.unproven.is_empty() {
        return;
    }
    let dir = paths.cri_containers_dir();
    gaps.retain(|gap| !cri_store::is_missing_containers_dir(gap, &dir));
}

/// Drops the `config` gap of each setting containerd's lines read apart
/// where nodectl's reading is the line of the daemon it read the config of
/// (its version, the API's or its binary's). Kept when that line is not
/// known, or the config or its paths are not proven the daemon's: then
/// another line may have read it.
pub(super) fn settle_config_by_line(paths: &Paths, version: Option<&str>, gaps: &mut Vec<Gap>) {
    let Some(line) = version.and_then(line_of).map(|line| line.major_minor()) else {
        return;
    };
    if paths.process.is_none() || !paths.unproven.is_empty() {
        return;
    }
    for apart in &paths.config_apart_by_line {
        if apart.right_on.contains(&line) {
            let settled = Gap::item(Source::Config, &apart.file, &apart.said);
            gaps.retain(|gap| *gap != settled);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ConfigApart, ContainerdProcess};

    fn paths_of_daemon(apart: Vec<ConfigApart>) -> Paths {
        let mut paths = crate::model::fixtures::snapshot().paths;
        paths.process = Some(ContainerdProcess {
            pid: 7,
            ..ContainerdProcess::default()
        });
        paths.unproven.clear();
        paths.config_apart_by_line = apart;
        paths
    }

    #[test]
    fn a_config_read_apart_by_line_is_a_gap_unless_the_daemons_line_reads_it_as_nodectl_did() {
        let apart = |said: &str, right_on: Vec<(u32, u32)>| ConfigApart {
            file: "/etc/containerd/config.toml".into(),
            said: said.to_string(),
            right_on,
        };
        let paths = paths_of_daemon(vec![
            apart("2.x's", vec![(2, 0), (2, 3)]),
            apart("2.3's", vec![(2, 3)]),
        ]);
        let gaps_before = || {
            paths
                .config_apart_by_line
                .iter()
                .map(|a| Gap::item(Source::Config, &a.file, &a.said))
                .collect::<Vec<_>>()
        };
        let left = |version: Option<&str>, paths: &Paths| {
            let mut gaps = gaps_before();
            settle_config_by_line(paths, version, &mut gaps);
            gaps.into_iter().map(|g| g.error).collect::<Vec<_>>()
        };
        assert_eq!(left(Some("v2.3.4"), &paths), Vec::<String>::new());
        assert_eq!(left(Some("2.0.11"), &paths), ["2.3's"]);
        assert_eq!(left(Some("1.7.34"), &paths), ["2.x's", "2.3's"]);
        // A line nodectl does not know, or no version: both kept.
        assert_eq!(left(Some("2.4.0"), &paths), ["2.x's", "2.3's"]);
        assert_eq!(left(None, &paths), ["2.x's", "2.3's"]);
        // The config of no proven daemon: another line may have read it.
        let mut unproven = paths.clone();
        unproven.unproven.push("root not held".to_string());
        assert_eq!(left(Some("v2.3.4"), &unproven), ["2.x's", "2.3's"]);
        let mut no_daemon = paths.clone();
        no_daemon.process = None;
        assert_eq!(left(Some("v2.3.4"), &no_daemon), ["2.x's", "2.3's"]);
    }
}
