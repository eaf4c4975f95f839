//! What the peers' own answers settle after the files were read: which
//! networks CRI loaded, whether a containers directory that is not there is
//! a gap, which line read containerd's config, and whether a root or state
//! not tied to the daemon is its own after all.

use std::path::Path;
use std::time::Instant;

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{
    Bundle, CniView, CriContainer, CriSetting, CriView, DaemonDir, Gap, Mount, NetnsView,
    NetworksFrom, Paths, Shim, Source,
};
use crate::peers::containerd_config::line_of;
use crate::sources::containerd_snapshots::DEFAULT_SNAPSHOTTER;
use crate::sources::{cni, cri_store, netns, SourceThread};

use super::GatherOptions;

/// Settles which networks CRI loads. CRI's own word first: what the
/// proven daemon's CRI says it loaded (`Status(verbose)`); its conf dir and
/// max_conf_num when they are not those read (containerd's config read
/// apart from how CRI merged it) are read again, within the deadline, the
/// first reading's CNI gaps, of a directory CRI does not use, dropped, and
/// they replace the files' reading in `paths` (what the report shows), a
/// note saying so.
/// Without its word, the files as the libcni of containerd's `version`
/// reads them, and the view says why.
pub(super) fn settle_cni(
    read: Option<CniView>,
    cri: Option<&CriView>,
    paths: &mut Paths,
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
        let note = format!(
            "CRI's CNI conf_dir is {} and its max_conf_num {} by its own word (its Status), not \
             {} and {max_conf_num} as containerd's config files read",
            told.conf_dir.display(),
            told.max_conf_num,
            view.conf_dir.display()
        );
        paths.cni_conf_dir = Some(told.conf_dir.clone());
        paths.cni_max_conf_num = Some(told.max_conf_num);
        crate::paths::add_note(&mut paths.note, note);
        let cris = paths.clone();
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

/// Takes CRI's own word (its `Status(verbose)` config, asked only of the
/// proven daemon: see [`crate::peers::cri_dirs`]) on the settings nodectl
/// also reads from containerd's config. Where it says
/// `netnsMountsUnderStateDir` or its snapshotter and the files, read as
/// 2.3 reads them, gave another, CRI's replaces the files' reading and a
/// note says so (gather then reads the netns directory CRI names, see
/// `PodsRead::settle_netns_dir`). Each `config` gap of a reading the lines
/// give apart is dropped once CRI said every setting it is about, whatever
/// the daemon's line (its CNI conf dir and max_conf_num are in its
/// `cniconfig`, taken by [`settle_cni`]). A setting its line does not say
/// (2.x's snapshotter) leaves the files' reading, and such a gap, as they
/// were.
pub(super) fn settle_config_by_cri(cri: Option<&CriView>, paths: &mut Paths, gaps: &mut Vec<Gap>) {
    let Some(cri) = cri else {
        return;
    };
    let said = cri.said.clone().unwrap_or_default();
    if let Some(under) = said.netns_mounts_under_state_dir {
        if under != paths.netns_under_state_dir {
            let files = paths.netns_under_state_dir;
            paths.netns_under_state_dir = under;
            let note = format!(
                "CRI's netns_mounts_under_state_dir is {under} by its own word (its Status), \
                 not {files} as containerd's config files read: pods' network namespaces are \
                 judged in {}",
                netns::dir(paths).display()
            );
            crate::paths::add_note(&mut paths.note, note);
        }
    }
    if let Some(snapshotter) = &said.snapshotter {
        fn effective(s: Option<&str>) -> &str {
            s.filter(|s| !s.is_empty()).unwrap_or(DEFAULT_SNAPSHOTTER)
        }
        let files = effective(paths.snapshotter.as_deref()).to_string();
        let theirs = effective(Some(snapshotter));
        if theirs != files {
            paths.snapshotter = Some(theirs.to_string());
            let note = format!(
                "CRI's snapshotter is {theirs} by its own word (its Status), not {files} as \
                 containerd's config files read"
            );
            crate::paths::add_note(&mut paths.note, note);
        }
    }
    let told = |setting: &CriSetting| match setting {
        CriSetting::Snapshotter => said.snapshotter.is_some(),
        CriSetting::NetnsMountsUnderStateDir => said.netns_mounts_under_state_dir.is_some(),
        CriSetting::CniConfDir | CriSetting::CniMaxConfNum => cri.cni_config.is_some(),
    };
    for apart in &paths.config_apart_by_line {
        if !apart.settings.is_empty() && apart.settings.iter().all(told) {
            let settled = Gap::item(Source::Config, &apart.file, &apart.said);
            gaps.retain(|gap| *gap != settled);
        }
    }
}

/// What an untied root or state keeps from the checks (see [`settle_untied`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Withheld {
    pub(super) root: bool,
    pub(super) state: bool,
}

impl Withheld {
    /// Keeps what was read under a withheld root or state from the checks:
    /// CRI's status files and sandbox dirs under root, the bundles, CRI's
    /// sandbox dirs, the mounts and CRI's netns mounts under state.
    pub(super) fn apply(
        &self,
        state: &Path,
        cri_containers: &mut Vec<CriContainer>,
        cri_sandboxes: &mut BTreeSet<String>,
        bundles: &mut BTreeMap<String, Bundle>,
        mounts: &mut Vec<Mount>,
        netns: Option<&mut NetnsView>,
    ) {
        if let Some(view) = netns.filter(|view| self.state && view.dir.starts_with(state)) {
            view.mounts.clear();
        }
        if self.root {
            cri_containers.clear();
        }
        if self.root || self.state {
            cri_sandboxes.clear();
        }
        if self.state {
            bundles.clear();
            mounts.retain(|mount| !mount.path_as_given().starts_with(state));
        }
    }
}

/// Settles each root or state only the daemon's config ties to it
/// (`Paths::by_config_only`: nodectl's reading of a config unchanged since
/// the daemon started) by what the daemon itself did or said. A state is
/// its own when a proven shim of it works in a bundle there: containerd
/// starts every shim in its task's bundle,
/// `<state>/io.containerd.runtime.v2.task/<ns>/<id>` (`cmd.Dir` of the
/// shim command, 1.x runtime/v2/shim and 2.x pkg/shim; the shim's `start`
/// runs the shim it forks in its own working directory), compared by the
/// kernel's identity of that directory. Either is its own when CRI's
/// `Status(verbose)` names it (see [`crate::peers::cri_dirs`]); when CRI
/// names another, it is untied (a reading of the config the daemon does
/// not share: [`settle_untied`] then withholds it, a gap that names CRI's).
/// What neither settles stays, judged, and every action refuses.
pub(super) fn settle_by_config_only(
    cri: Option<&CriView>,
    shims: &[Shim],
    paths: &mut Paths,
    proc_root: &Path,
) {
    use crate::sources::daemon_proof::{file_id, file_id_in};
    let said = cri.and_then(|cri| cri.dirs.as_ref());
    let Some(pid) = paths.process.as_ref().map(|p| p.pid) else {
        return;
    };
    for entry in std::mem::take(&mut paths.by_config_only) {
        let worked_in = || {
            shims
                .iter()
                .filter(|shim| shim.serves(&paths.address.path))
                .find(|shim| {
                    let (Some(namespace), Some(id)) = (&shim.namespace, &shim.id) else {
                        return false;
                    };
                    let bundle = entry
                        .path
                        .join("io.containerd.runtime.v2.task")
                        .join(namespace)
                        .join(id);
                    let cwd = proc_root.join(shim.pid.to_string()).join("cwd");
                    matches!((file_id(&bundle), file_id(&cwd)), (Ok(a), Ok(b)) if a == b)
                })
                .map(|shim| shim.pid)
        };
        if entry.dir == DaemonDir::State && worked_in().is_some() {
            continue;
        }
        let theirs = said.map(|d| match entry.dir {
            DaemonDir::Root => &d.root,
            DaemonDir::State => &d.state,
        });
        match theirs.map(|theirs| {
            (
                theirs,
                file_id(&entry.path),
                file_id_in(proc_root, pid, theirs),
            )
        }) {
            Some((_, Ok(ours), Ok(its))) if ours == its => {}
            Some((theirs, _, _)) => {
                let what = match entry.dir {
                    DaemonDir::Root => "root",
                    DaemonDir::State => "state",
                };
                let why = format!(
                    "{what} {} is named by containerd pid {pid}'s config as nodectl reads it, \
                     but CRI's Status names {}",
                    entry.path.display(),
                    theirs.display()
                );
                paths.unproven.push(why.clone());
                paths.untied.push(crate::model::Untied { why, ..entry });
            }
            None => paths.by_config_only.push(entry),
        }
    }
}

/// Settles each root or state the daemon's open files and config could not
/// tie to it (`Paths::untied`) by its own word: CRI's `Status(verbose)`
/// config names the root and state the running daemon has (see
/// [`crate::peers::cri_dirs`]), compared by identity as the daemon
/// resolves them. One it names is the daemon's: judged, and acted on if
/// nothing else stands in the way. Any other is withheld from the checks,
/// a gap of the source read there: findings from a directory containerd
/// may never have used are what an action would remove (an edited config,
/// a drop-in read by another line's rules, `--state` given wrong).
pub(super) fn settle_untied(
    cri: Option<&CriView>,
    paths: &mut Paths,
    proc_root: &Path,
    gaps: &mut Vec<Gap>,
) -> Withheld {
    use crate::sources::daemon_proof::{file_id, file_id_in};
    let mut withheld = Withheld::default();
    let said = cri.and_then(|cri| cri.dirs.as_ref());
    let pid = paths.process.as_ref().map(|p| p.pid);
    for untied in std::mem::take(&mut paths.untied) {
        let (what, source, theirs) = match untied.dir {
            DaemonDir::Root => ("root", Source::CriStore, said.map(|d| &d.root)),
            DaemonDir::State => ("state", Source::Bundles, said.map(|d| &d.state)),
        };
        let tied = match (theirs, pid) {
            (Some(theirs), Some(pid)) => {
                match (file_id(&untied.path), file_id_in(proc_root, pid, theirs)) {
                    (Ok(ours), Ok(its)) if ours == its => Ok(()),
                    _ => Err(format!(
                        "CRI's Status says containerd's {what} is {}: give --{what} {0}",
                        theirs.display()
                    )),
                }
            }
            _ if cri.is_none() => {
                Err("CRI was not asked which it uses (`nodectl check` asks it)".to_string())
            }
            _ => Err("CRI's Status (verbose) did not say which it uses".to_string()),
        };
        match tied {
            Ok(()) => {
                paths.unproven.retain(|why| *why != untied.why);
                let note = format!(
                    "{what} {} is containerd pid {}'s by CRI's own word (its Status)",
                    untied.path.display(),
                    pid.unwrap_or_default()
                );
                crate::paths::add_note(&mut paths.note, note);
            }
            Err(why) => {
                gaps.push(Gap::source(
                    source,
                    &untied.path,
                    format!("nothing read under it is judged: {}; {why}", untied.why),
                ));
                match untied.dir {
                    DaemonDir::Root => withheld.root = true,
                    DaemonDir::State => withheld.state = true,
                }
                paths.untied.push(untied);
            }
        }
    }
    withheld
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
            settings: vec![CriSetting::Snapshotter],
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

    /// CRI's word on `said` (each only if given), its networks when
    /// `cni` is.
    fn cri_telling(netns: Option<bool>, snapshotter: Option<&str>, cni: bool) -> CriView {
        CriView {
            said: Some(crate::model::CriSaid {
                netns_mounts_under_state_dir: netns,
                snapshotter: snapshotter.map(str::to_string),
            }),
            cni_config: cni.then(crate::model::CriCniConfig::default),
            ..CriView::default()
        }
    }

    #[test]
    fn cris_word_on_its_netns_dir_and_snapshotter_replaces_the_files_reading_with_a_note() {
        let mut paths = paths_of_daemon(Vec::new());
        paths.netns_under_state_dir = true;
        paths.snapshotter = Some("overlayfs".to_string());
        let mut gaps = Vec::new();
        let cri = cri_telling(Some(false), Some("native"), false);
        settle_config_by_cri(Some(&cri), &mut paths, &mut gaps);
        assert!(!paths.netns_under_state_dir);
        assert_eq!(paths.snapshotter.as_deref(), Some("native"));
        let note = paths.note.clone().unwrap();
        assert!(
            note.contains(
                "CRI's netns_mounts_under_state_dir is false by its own word (its Status), not \
                 true as containerd's config files read: pods' network namespaces are judged in \
                 /var/run/netns"
            ),
            "{note}"
        );
        assert!(
            note.contains(
                "CRI's snapshotter is native by its own word (its Status), not overlayfs"
            ),
            "{note}"
        );
        assert!(gaps.is_empty());

        // The same word: nothing replaced, nothing said. An empty
        // snapshotter, or none in the files, is containerd's default.
        let before = paths.clone();
        settle_config_by_cri(Some(&cri), &mut paths, &mut gaps);
        assert_eq!(paths, before);
        let mut default = paths_of_daemon(Vec::new());
        let cri = cri_telling(Some(false), Some(""), false);
        settle_config_by_cri(Some(&cri), &mut default, &mut gaps);
        let cri = cri_telling(Some(false), Some(DEFAULT_SNAPSHOTTER), false);
        settle_config_by_cri(Some(&cri), &mut default, &mut gaps);
        assert_eq!((default.snapshotter, default.note), (None, None));

        // A line that does not say them (2.x's snapshotter), or no CRI
        // asked: the files' reading stays.
        let mut paths = paths_of_daemon(Vec::new());
        paths.snapshotter = Some("native".to_string());
        let before = paths.clone();
        settle_config_by_cri(Some(&cri_telling(None, None, true)), &mut paths, &mut gaps);
        settle_config_by_cri(Some(&CriView::default()), &mut paths, &mut gaps);
        settle_config_by_cri(None, &mut paths, &mut gaps);
        assert_eq!(paths, before);
    }

    #[test]
    fn a_config_read_apart_by_line_is_settled_by_cris_word_on_every_setting_it_is_about() {
        let apart = |said: &str, settings: Vec<CriSetting>| ConfigApart {
            file: "/etc/containerd/config.toml".into(),
            said: said.to_string(),
            right_on: vec![(2, 3)],
            settings,
        };
        use CriSetting::*;
        let paths = paths_of_daemon(vec![
            apart("netns", vec![NetnsMountsUnderStateDir]),
            apart(
                "netns and snapshotter",
                vec![Snapshotter, NetnsMountsUnderStateDir],
            ),
            apart("cni", vec![CniConfDir, CniMaxConfNum]),
        ]);
        let left = |cri: Option<&CriView>| {
            let mut gaps: Vec<Gap> = paths
                .config_apart_by_line
                .iter()
                .map(|a| Gap::item(Source::Config, &a.file, &a.said))
                .collect();
            settle_config_by_cri(cri, &mut paths.clone(), &mut gaps);
            gaps.into_iter().map(|g| g.error).collect::<Vec<_>>()
        };
        // 1.x says both, and its networks.
        let one_x = cri_telling(Some(true), Some("overlayfs"), true);
        assert_eq!(left(Some(&one_x)), Vec::<String>::new());
        // 2.x says no snapshotter.
        let two_x = cri_telling(Some(true), None, true);
        assert_eq!(left(Some(&two_x)), ["netns and snapshotter"]);
        // Its networks unread: CRI did not say its conf dir.
        let no_cni = cri_telling(Some(true), Some("overlayfs"), false);
        assert_eq!(left(Some(&no_cni)), ["cni"]);
        // Not asked (a daemon not proven is not asked to be verbose).
        let all = ["netns", "netns and snapshotter", "cni"];
        assert_eq!(left(Some(&CriView::default())), all);
        assert_eq!(left(None), all);
    }

    /// A node whose daemon (pid 7) sees `/` as nodectl does (its `root`
    /// in a proc root of the test's own is the node's dir), with its root
    /// tied and its state not.
    fn node_with_untied_state() -> (tempfile::TempDir, Paths) {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("node");
        for sub in ["root", "state", "other-state"] {
            std::fs::create_dir_all(node.join(sub)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("proc/7")).unwrap();
        std::os::unix::fs::symlink(&node, dir.path().join("proc/7/root")).unwrap();
        let mut paths = paths_of_daemon(Vec::new());
        paths.root.path = node.join("root");
        paths.state.path = node.join("state");
        let why = format!(
            "state {} could not be tied to containerd pid 7: nothing held",
            node.join("state").display()
        );
        paths.untied.push(crate::model::Untied {
            dir: DaemonDir::State,
            path: node.join("state"),
            why: why.clone(),
        });
        paths.unproven.push(why);
        (dir, paths)
    }

    /// [`node_with_untied_state`] whose state is tied by the daemon's config
    /// alone, and a shim of the daemon (pid 9, of task `k8s.io/abc`) whose
    /// working directory is that task's bundle under `works_in`.
    fn node_with_state_by_config_only(works_in: &str) -> (tempfile::TempDir, Paths, Vec<Shim>) {
        let (dir, mut paths) = node_with_untied_state();
        let entry = paths.untied.pop().unwrap();
        paths.unproven.clear();
        paths.by_config_only.push(entry);
        let node = dir.path().join("node");
        let bundle = |state: &str| {
            node.join(state)
                .join("io.containerd.runtime.v2.task/k8s.io/abc")
        };
        for state in ["state", "other-state"] {
            std::fs::create_dir_all(bundle(state)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("proc/9")).unwrap();
        std::os::unix::fs::symlink(bundle(works_in), dir.path().join("proc/9/cwd")).unwrap();
        let shim = Shim {
            pid: 9,
            namespace: Some("k8s.io".to_string()),
            id: Some("abc".to_string()),
            address: Some(paths.address.path.display().to_string()),
            ..Shim::default()
        };
        (dir, paths, vec![shim])
    }

    #[test]
    fn a_state_only_the_config_ties_is_tied_by_a_shim_working_there_or_by_cri_and_else_stays() {
        let settled = |works_in: &str, cri: Option<CriView>| {
            let (dir, mut paths, shims) = node_with_state_by_config_only(works_in);
            let proc_root = dir.path().join("proc");
            settle_by_config_only(cri.as_ref(), &shims, &mut paths, &proc_root);
            let mut gaps = Vec::new();
            let withheld = settle_untied(cri.as_ref(), &mut paths, &proc_root, &mut gaps);
            (paths, withheld, gaps)
        };
        // A shim of the daemon works in a bundle there; or CRI names it.
        for (works_in, cri) in [("state", None), ("other-state", Some(cri_saying("/state")))] {
            let (paths, withheld, gaps) = settled(works_in, cri);
            assert!(paths.by_config_only.is_empty(), "{works_in}: {paths:?}");
            assert!(
                paths.unproven.is_empty() && paths.untied.is_empty(),
                "{paths:?}"
            );
            assert_eq!(withheld, Withheld::default());
            assert!(gaps.is_empty(), "{gaps:?}");
        }
        // Neither: judged (nothing withheld, no gap), and it stays, so
        // every action refuses.
        for cri in [None, Some(CriView::default())] {
            let (paths, withheld, gaps) = settled("other-state", cri);
            assert_eq!(paths.by_config_only.len(), 1, "{paths:?}");
            assert_eq!(withheld, Withheld::default());
            assert!(gaps.is_empty() && paths.unproven.is_empty(), "{gaps:?}");
        }
        // CRI names another: not the daemon's, withheld with a gap that
        // names CRI's.
        let (paths, withheld, gaps) = settled("other-state", Some(cri_saying("/other-state")));
        assert!(paths.by_config_only.is_empty(), "{paths:?}");
        assert_eq!(paths.untied.len(), 1, "{paths:?}");
        assert!(
            paths.unproven[0].contains("CRI's Status names /other-state"),
            "{paths:?}"
        );
        assert!(withheld.state && !withheld.root);
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        assert!(
            gaps[0].error.contains("give --state /other-state"),
            "{gaps:?}"
        );
    }

    fn cri_saying(state: &str) -> CriView {
        CriView {
            dirs: Some(crate::model::CriDirs {
                root: "/root".into(),
                state: state.into(),
            }),
            ..CriView::default()
        }
    }

    #[test]
    fn a_state_cri_names_is_the_daemons_and_judged() {
        let (dir, mut paths) = node_with_untied_state();
        let mut gaps = Vec::new();
        let withheld = settle_untied(
            Some(&cri_saying("/state")),
            &mut paths,
            &dir.path().join("proc"),
            &mut gaps,
        );
        assert_eq!(withheld, Withheld::default());
        assert!(gaps.is_empty(), "{gaps:?}");
        assert!(
            paths.untied.is_empty() && paths.unproven.is_empty(),
            "{paths:?}"
        );
        assert!(paths.note.unwrap().contains("by CRI's own word"));
    }

    #[test]
    fn a_state_cri_does_not_name_or_does_not_say_is_withheld_with_a_gap() {
        let proc_root = |dir: &tempfile::TempDir| dir.path().join("proc");
        for (cri, says) in [
            (
                Some(cri_saying("/other-state")),
                "CRI's Status says containerd's state is /other-state",
            ),
            (Some(CriView::default()), "did not say which it uses"),
            (None, "was not asked"),
        ] {
            let (dir, mut paths) = node_with_untied_state();
            let mut gaps = Vec::new();
            let withheld = settle_untied(cri.as_ref(), &mut paths, &proc_root(&dir), &mut gaps);
            assert_eq!(
                withheld,
                Withheld {
                    root: false,
                    state: true
                }
            );
            assert_eq!(gaps.len(), 1, "{gaps:?}");
            assert_eq!(gaps[0].source, Source::Bundles);
            assert!(gaps[0].source_unavailable);
            assert_eq!(gaps[0].path, paths.state.path);
            assert!(gaps[0].error.contains(says), "{}", gaps[0].error);
            assert!(
                gaps[0].error.contains("could not be tied"),
                "{}",
                gaps[0].error
            );
            assert_eq!((paths.untied.len(), paths.unproven.len()), (1, 1));
        }
    }

    #[test]
    fn a_withheld_state_keeps_its_bundles_and_mounts_from_the_checks() {
        let mut s = crate::model::fixtures::snapshot();
        let state = s.paths.state.path.clone();
        let mount = |point: std::path::PathBuf| Mount {
            mount_point: point,
            ..Mount::default()
        };
        let mut mounts = vec![
            mount(state.join("io.containerd.runtime.v2.task/k8s.io/a/rootfs")),
            mount("/var/lib/kubelet/pods/x".into()),
        ];
        let mut bundles = BTreeMap::from([("a".to_string(), Bundle::default())]);
        let mut sandboxes = BTreeSet::from(["p".to_string()]);
        let mut netns = NetnsView {
            dir: state.join("io.containerd.grpc.v1.cri/netns"),
            mounts: vec![crate::model::NetnsMount {
                path: state.join("io.containerd.grpc.v1.cri/netns/cni-1"),
                inode: 4026532000,
                device: 4,
                created_at: Default::default(),
                interfaces: None,
            }],
            ..NetnsView::default()
        };
        Withheld::default().apply(
            &state,
            &mut s.cri_containers,
            &mut sandboxes,
            &mut bundles,
            &mut mounts,
            Some(&mut netns),
        );
        assert_eq!(
            (
                bundles.len(),
                sandboxes.len(),
                mounts.len(),
                netns.mounts.len()
            ),
            (1, 1, 2, 1)
        );
        Withheld {
            root: false,
            state: true,
        }
        .apply(
            &state,
            &mut s.cri_containers,
            &mut sandboxes,
            &mut bundles,
            &mut mounts,
            Some(&mut netns),
        );
        assert!(bundles.is_empty() && sandboxes.is_empty() && netns.mounts.is_empty());
        assert_eq!(mounts, [mount("/var/lib/kubelet/pods/x".into())]);
    }
}
