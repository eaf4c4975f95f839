//! What the peers' own answers settle after the files were read: which
//! networks CRI loaded, and whether a containers directory that is not
//! there is a gap.

use std::time::Instant;

use crate::model::{CniView, CriView, Gap, NetworksFrom, Paths};
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
