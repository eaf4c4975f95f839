//! CNI's network files as the running line's libcni reads them, with CRI
//! as the oracle: after each change to the bed's `conf_dir` (containerd
//! restarted, so CRI loads it afresh), the networks whose addresses
//! nodectl judges (its report's `pod_addresses`) are exactly the
//! host-local networks CRI's `Status(verbose)` reports loaded (its
//! `cniconfig`), and a file CRI refused is named in a gap. nodectl takes
//! CRI's word when it has it (tests/cri_networks_real.rs); here the files
//! are what is tested, read with CRI's word kept from nodectl, and the two
//! readings must agree.
//!
//! - Keys spelt in capitals (`"Type"`, `"IPAM"`, host-local's `"DATADIR"`
//!   and `"Ranges"`): Go's encoding/json matches field names
//!   case-insensitively; CRI loads the network and host-local keeps a
//!   pod's address where `DATADIR` says (nodectl once skipped the network,
//!   silently).
//! - A value of the wrong type for this line's libcni: `"disableCheck":
//!   "true"` (a bool only on 1.x; 2.x's `readBool` takes the string) and
//!   `"cniVersions": ["one"]` (parsed from libcni 1.2, containerd 2.0 on).
//!   Sorted first, a refused file fails go-cni's whole load: CRI has no
//!   network, and nothing is judged.
//! - A list without `plugins` whose plugins are `<conf_dir>/<name>/*.conf`:
//!   libcni 1.3 (containerd 2.1 on) loads it, earlier ones refuse it.
//!
//! Then the files of the unit tests of src/peers/libcni.rs and go_json.rs,
//! one at a time, each sorted before the ones before it (CRI's
//! max_conf_num is 1: go-cni reads only the first), with no restart: CRI's
//! conf syncer reloads the directory on a write (to `reload`, an entry
//! libcni does not list), and its Status' `lastCNILoadStatus` names the
//! file a failed load refused. Each is loaded or refused on the lines the
//! table ([`scenarios`]) says, nodectl judges CRI's network (or none), and
//! a gap names the file exactly when CRI refused it:
//! - a plugin's value of the wrong type (refused everywhere):
//!   `capabilities` `{"portMappings": "yes"}` or a list, `dns.nameservers`
//!   a string, `"DNS": {"Search": [1]}`, `"dnſ"` (U+017F folds to s),
//!   `ipam` a string, `ipam.type` or `type` a number, `type` empty, `name`
//!   a bool, `prevResult` a list;
//! - unknown keys and nulls (loaded everywhere); a lone surrogate escape
//!   and bytes that are not UTF-8 in a string (U+FFFD, loaded: nodectl
//!   refused the surrogates until this test); `1e400` (refused);
//! - a key twice: `capabilities` `"x"` then `{}` in a list's plugin
//!   (decoded into a map: loaded) and in a `.conf` (checked as written:
//!   refused); a `.conf`'s `"type": ""` before `"TYPE": "bridge"` (marshalled
//!   again, sorted: refused) and after it (loaded);
//! - per line: `cni.dev/valid-attachments` a string (1.x only) or typed
//!   (all); a list's `Name` or `Plugins` in capitals, `name` twice the last
//!   a number, `cniVersion` a number (none), `"x"` (all); `cniVersions` a
//!   string, `[]` with `cniVersion` `"x"`, an overflowing number (1.x),
//!   `["1.0.0", "+1.-0", "9.9"]` (all); `disableCheck` `"FALSE"` (2.x),
//!   `"yes"` or null (none); `disableGC` `"nope"` (1.x);
//!   `loadOnlyInlinedPlugins` 1 (not 2.3);
//! - the extension picks the reader: single plugins in `.conf` and `.json`
//!   (loaded), a list in either or a plugin in a `.conflist`, invalid JSON,
//!   an empty file (refused);
//! - libcni 1.3's plugin directory holding a plugin it refuses: the list
//!   refused on 2.3, loaded before, and everywhere with
//!   `"loadOnlyInlinedPlugins": "TRUE"`;
//! - a symlink to a list (loaded), to a directory (refused); a file named
//!   `.conf` (its extension: loaded); entries libcni does not list
//!   (`.conflist.bak`, `.CONF`, a directory named `*.conflist`), sorted
//!   first all along, never read nor named;
//! - last, a directory holding no file libcni lists: no network.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_cri::v1::StatusRequest;
use serde_json::{json, Value};
use support::{Line, TestBed};

const TEST: &str = "cni_libcni_real";

/// CRI's last load of its `conf_dir`, as its Status(verbose) reports it.
#[derive(Debug)]
struct CriLoad {
    /// `lastCNILoadStatus`: "OK", or go-cni's error (naming the file it
    /// refused) when the conf syncer's last reload failed.
    status: String,
    /// Every network loaded, in go-cni's order (its loopback aside).
    networks: Vec<String>,
    /// Those with host-local IPAM, sorted.
    host_local: Vec<String>,
}

async fn cri_load(bed: &TestBed) -> CriLoad {
    let request = StatusRequest { verbose: true };
    let status = bed
        .cri()
        .await
        .status(request)
        .await
        .expect("CRI Status")
        .into_inner();
    let config: Value = serde_json::from_str(&status.info["cniconfig"]).expect("cniconfig JSON");
    let configs: Vec<&Value> = config["Networks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["IFName"] != "lo")
        .map(|n| &n["Config"])
        .collect();
    let name = |c: &&Value| c["Name"].as_str().map(str::to_string);
    let mut host_local: Vec<String> = configs
        .iter()
        .filter(|c| {
            c["Plugins"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["Network"]["ipam"]["type"] == "host-local")
        })
        .filter_map(name)
        .collect();
    host_local.sort();
    CriLoad {
        status: status
            .info
            .get("lastCNILoadStatus")
            .cloned()
            .unwrap_or_default(),
        networks: configs.iter().filter_map(name).collect(),
        host_local,
    }
}

/// CRI's networks with host-local IPAM, by name, as its Status(verbose)
/// reports them loaded (go-cni's `GetConfig`: its loopback aside).
async fn cri_host_local_networks(bed: &TestBed) -> Vec<String> {
    cri_load(bed).await.host_local
}

/// CRI's load once its conf syncer has reloaded the directory after a
/// write to `conf_dir/reload` (an entry libcni does not list; a write, not
/// a create, is what the syncer reloads on): the first load whose status
/// says `named` (a failed load names the file it refused) or whose first
/// network is `network`.
async fn reloaded(bed: &TestBed, step: usize, named: &str, network: &str) -> CriLoad {
    let trigger = bed.cni().conf_dir.join("reload");
    std::fs::write(&trigger, format!("{step}\n")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let load = cri_load(bed).await;
        let refused = load.status.contains(named);
        let loaded =
            load.status == "OK" && load.networks.first().map(String::as_str) == Some(network);
        if refused || loaded {
            return load;
        }
        assert!(
            Instant::now() < deadline,
            "CRI did not reload {named} (network {network}): {load:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The networks whose addresses nodectl judges, and its gaps, read from
/// the files: CRI's word kept from it (its address given as a socket
/// nothing serves), so the files are read as the line's libcni reads them.
/// With CRI's word (the default), nodectl judges the same networks.
fn nodectl_judges(bed: &TestBed) -> (Vec<String>, Vec<Value>) {
    let judged = |extra: &[&str]| {
        let mut args = vec!["check", "--settle", "0s", "-o", "json"];
        args.extend_from_slice(extra);
        let started = Instant::now();
        let output = bed.nodectl(&args);
        eprintln!("{TEST}: nodectl {args:?} took {:?}", started.elapsed());
        let doc = support::report(&output);
        let mut names: Vec<String> = doc["pod_addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["network"].as_str().map(str::to_string))
            .collect();
        names.sort();
        (names, doc)
    };
    let unserved = bed.scratch("no-cri.sock");
    let (from_files, doc) = judged(&["--cri-address", unserved.to_str().unwrap()]);
    assert_eq!(doc["cni_networks_from"]["from"], "files", "{doc:#}");
    let gaps = doc["gaps"].as_array().cloned().unwrap_or_default();
    let (from_cri, doc) = judged(&[]);
    assert_eq!(doc["cni_networks_from"]["from"], "cri", "{doc:#}");
    assert_eq!(
        from_cri, from_files,
        "CRI's word and the files agree: {doc:#}"
    );
    (from_files, gaps)
}

/// Whether a gap is for `file` (its last components).
fn names_file(gaps: &[Value], file: &str) -> bool {
    gaps.iter().any(|g| {
        g["path"]
            .as_str()
            .is_some_and(|p| Path::new(p).ends_with(file))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodectl_judges_the_networks_cri_loaded_from_the_same_files() {
    let Some(mut bed) = TestBed::start_networked(TEST).await else {
        return;
    };
    let conf_dir = bed.cni().conf_dir.clone();
    let network = bed.cni().network.clone();
    let data_dir = bed.cni().data_dir.clone();
    let v2 = bed.line().is_v2();

    // The bed's own network, its keys in capitals.
    let ours = conf_dir.join("10-nodectl.conflist");
    let list: Value = serde_json::from_str(&std::fs::read_to_string(&ours).unwrap()).unwrap();
    let mut bridge = list["plugins"][0].clone();
    let bridge_map = bridge.as_object_mut().unwrap();
    let kind = bridge_map.remove("type").unwrap();
    let mut ipam = bridge_map.remove("ipam").unwrap();
    // host-local's own keys in capitals too: it decodes with encoding/json.
    let ipam_map = ipam.as_object_mut().unwrap();
    for (key, spelt) in [
        ("type", "TYPE"),
        ("dataDir", "DATADIR"),
        ("ranges", "Ranges"),
    ] {
        let value = ipam_map
            .remove(key)
            .unwrap_or_else(|| panic!("the bed's ipam {key}"));
        ipam_map.insert(spelt.to_string(), value);
    }
    bridge["Type"] = kind;
    bridge["IPAM"] = ipam;
    let mut caps = list.clone();
    caps["plugins"][0] = bridge;
    std::fs::write(&ours, format!("{caps:#}\n")).unwrap();
    bed.restart_containerd().await;
    let cri = cri_host_local_networks(&bed).await;
    assert_eq!(
        cri,
        std::slice::from_ref(&network),
        "CRI loads the network spelt in capitals"
    );
    // A pod on it: host-local keeps its address where its DATADIR says,
    // and nodectl counts it there, in the range its Ranges give.
    bed.run_sandbox("caps").await;
    assert_eq!(bed.ip_files().len(), 1, "host-local's reservation");
    let (judged, gaps) = nodectl_judges(&bed);
    assert_eq!(judged, cri, "nodectl judges what CRI loaded: {gaps:#?}");
    assert!(!names_file(&gaps, "10-nodectl.conflist"), "{gaps:#?}");
    let output = bed.nodectl(&["check", "--settle", "0s", "-o", "json"]);
    assert_eq!(
        support::report(&output)["pod_addresses"],
        json!([{"network": network, "reserved": 1, "capacity": 5}])
    );

    // Sorted first, a network whose list has a value of the wrong type
    // for this line's libcni.
    let typed = |extra: Value| {
        let mut list = json!({"cniVersion": "1.0.0", "name": "typed", "plugins": [{
            "type": "bridge", "bridge": "nodectl-typed",
            "ipam": {"type": "host-local", "dataDir": data_dir,
                "ranges": [[{"subnet": "10.252.0.0/29"}]]}}]});
        list.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        format!("{list:#}\n")
    };
    let first = conf_dir.join("05-typed.conflist");
    let refused_here = if v2 {
        json!({"cniVersions": ["one"]})
    } else {
        json!({"disableCheck": "true"})
    };
    std::fs::write(&first, typed(refused_here)).unwrap();
    bed.restart_containerd().await;
    let cri = cri_host_local_networks(&bed).await;
    assert_eq!(cri, Vec::<String>::new(), "CRI refuses the typed file");
    let (judged, gaps) = nodectl_judges(&bed);
    assert_eq!(judged, cri, "nodectl judges none: {gaps:#?}");
    assert!(names_file(&gaps, "05-typed.conflist"), "{gaps:#?}");

    // disableCheck as a string: 2.x's libcni takes it, 1.x's does not.
    std::fs::write(&first, typed(json!({"disableCheck": "true"}))).unwrap();
    bed.restart_containerd().await;
    let cri = cri_host_local_networks(&bed).await;
    let expected: Vec<String> = if v2 {
        vec!["typed".to_string()]
    } else {
        Vec::new()
    };
    assert_eq!(cri, expected, "CRI on {:?}", bed.line());
    let (judged, gaps) = nodectl_judges(&bed);
    assert_eq!(judged, cri, "nodectl judges what CRI loaded: {gaps:#?}");
    assert_eq!(names_file(&gaps, "05-typed.conflist"), !v2, "{gaps:#?}");

    // libcni 1.3 (2.1 on): a list without `plugins` whose plugins are
    // `<conf_dir>/<name>/*.conf`; refused before.
    std::fs::remove_file(&first).unwrap();
    let split = conf_dir.join("05-split.conflist");
    std::fs::write(&split, r#"{"cniVersion": "1.0.0", "name": "split"}"#).unwrap();
    std::fs::create_dir(conf_dir.join("split")).unwrap();
    let plugin = json!({"type": "bridge", "bridge": "nodectl-split",
        "ipam": {"type": "host-local", "dataDir": data_dir, "ranges": [[{"subnet": "10.253.0.0/29"}]]}});
    std::fs::write(conf_dir.join("split/10-bridge.conf"), plugin.to_string()).unwrap();
    bed.restart_containerd().await;
    let cri = cri_host_local_networks(&bed).await;
    let expected: Vec<String> = match bed.line() {
        support::Line::V2_3 => vec!["split".to_string()],
        _ => Vec::new(),
    };
    assert_eq!(cri, expected, "CRI on {:?}", bed.line());
    let (judged, gaps) = nodectl_judges(&bed);
    assert_eq!(judged, cri, "nodectl judges what CRI loaded: {gaps:#?}");

    // One file at a time, sorted before every other (CRI's max_conf_num is
    // 1: go-cni reads only the first), no restart: CRI's conf syncer
    // reloads the directory on a write, and its Status says which file a
    // failed load refused.
    let entries = [
        // Entries libcni does not list, sorted before all: read, they
        // would be the network loaded.
        "00-ignored.conflist.bak",
        "00-ignored.CONF",
        "00-ignored.conflist/10-a.conflist",
    ];
    let ignored = one_bridge("s-ignored", &data_dir);
    for entry in entries {
        let path = conf_dir.join(entry);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &ignored).unwrap();
    }
    let elsewhere = bed.scratch("elsewhere.conflist");
    std::fs::write(&elsewhere, one_bridge("s-linked", &data_dir)).unwrap();
    let line = bed.line();
    let started = Instant::now();
    for (step, scenario) in scenarios(&data_dir, &elsewhere).into_iter().enumerate() {
        for (path, bytes) in &scenario.also {
            let path = conf_dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        let file = conf_dir.join(&scenario.file);
        match &scenario.content {
            Content::Bytes(bytes) => std::fs::write(&file, bytes).unwrap(),
            Content::Link(target) => std::os::unix::fs::symlink(target, &file).unwrap(),
        }
        let network = format!("s-{}", scenario.name);
        let load = reloaded(&bed, step, &file.display().to_string(), &network).await;
        let refused = load.status != "OK";
        eprintln!("{TEST}: {line:?}: {}: {}", scenario.file, load.status);
        assert_eq!(
            !refused,
            scenario.loads.contains(&line),
            "CRI on {line:?}: {}: {load:#?}",
            scenario.file
        );
        let loaded = if refused { vec![] } else { vec![network] };
        assert_eq!(load.host_local, loaded, "{}: {load:#?}", scenario.file);
        let (judged, gaps) = nodectl_judges(&bed);
        assert_eq!(
            judged, load.host_local,
            "{}: nodectl judges what CRI loaded: {gaps:#?}",
            scenario.file
        );
        assert_eq!(
            names_file(&gaps, &scenario.file),
            refused,
            "{}: a file CRI refused is named in a gap, one it loaded is not: {gaps:#?}",
            scenario.file
        );
        for entry in entries {
            assert!(!names_file(&gaps, entry), "{entry}: {gaps:#?}");
        }
    }
    eprintln!("{TEST}: scenarios took {:?}", started.elapsed());

    // No file libcni lists (directories only): go-cni loads nothing ("no
    // network config found").
    for entry in std::fs::read_dir(&conf_dir).unwrap().flatten() {
        let path = entry.path();
        if !path.is_dir() || path.is_symlink() {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let load = reloaded(&bed, usize::MAX, "no network config found", "").await;
    assert!(load.networks.is_empty(), "{load:#?}");
    let (judged, gaps) = nodectl_judges(&bed);
    assert_eq!(judged, Vec::<String>::new(), "{gaps:#?}");
}

/// A list of one bridge plugin with host-local IPAM, named `name`.
fn one_bridge(name: &str, data_dir: &Path) -> String {
    json!({"cniVersion": "1.0.0", "name": name, "plugins": [bridge(data_dir, json!({}))]})
        .to_string()
}

/// A bridge plugin with host-local IPAM, `extra`'s keys set over its own.
fn bridge(data_dir: &Path, extra: Value) -> Value {
    let mut plugin = json!({"type": "bridge",
        "ipam": {"type": "host-local", "dataDir": data_dir, "ranges": [[{"subnet": "10.252.0.0/29"}]]}});
    plugin
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    plugin
}

enum Content {
    Bytes(Vec<u8>),
    /// A symlink to this path.
    Link(std::path::PathBuf),
}

/// A file in `conf_dir` and the lines whose libcni loads it (as the
/// network `s-<name>`).
struct Scenario {
    name: &'static str,
    /// Its file name: each sorts before the ones before it.
    file: String,
    content: Content,
    /// Files written first, by their path in `conf_dir`.
    also: Vec<(String, Vec<u8>)>,
    loads: &'static [Line],
}

const EVERY: &[Line] = &[Line::V1_6, Line::V1_7, Line::V2_0, Line::V2_3];
const NONE: &[Line] = &[];
const ONE_X: &[Line] = &[Line::V1_6, Line::V1_7];
const TWO_X: &[Line] = &[Line::V2_0, Line::V2_3];
const BEFORE_2_1: &[Line] = &[Line::V1_6, Line::V1_7, Line::V2_0];

/// The files of the unit tests of src/peers/libcni.rs and go_json.rs (and
/// of go_json's doc), and the lines each says load them.
fn scenarios(data_dir: &Path, elsewhere: &Path) -> Vec<Scenario> {
    let plugin = |extra: Value| bridge(data_dir, extra);
    let one = || plugin(json!({}));
    // A list of one plugin, `top`'s keys set over its own.
    let list = |name: &str, top: Value, plugin: Value| {
        let mut list =
            json!({"cniVersion": "1.0.0", "name": format!("s-{name}"), "plugins": [plugin]});
        list.as_object_mut()
            .unwrap()
            .extend(top.as_object().unwrap().clone());
        list.to_string()
    };
    // A single plugin's file: the plugin, named.
    let single = |name: &str, extra: Value| {
        let mut conf = plugin(extra);
        conf["cniVersion"] = json!("1.0.0");
        conf["name"] = json!(format!("s-{name}"));
        conf.to_string()
    };
    let ipam = one()["ipam"].to_string();
    let mut all: Vec<Scenario> = Vec::new();
    /// The next scenario, its file named to sort before every earlier one.
    fn add_content<'a>(
        all: &'a mut Vec<Scenario>,
        name: &'static str,
        ext: &str,
        content: Content,
        loads: &'static [Line],
    ) -> &'a mut Scenario {
        all.push(Scenario {
            name,
            file: format!("01-{:03}-{name}.{ext}", 999 - all.len()),
            content,
            also: Vec::new(),
            loads,
        });
        all.last_mut().unwrap()
    }
    fn add<'a>(
        all: &'a mut Vec<Scenario>,
        name: &'static str,
        ext: &str,
        text: &[u8],
        loads: &'static [Line],
    ) -> &'a mut Scenario {
        add_content(all, name, ext, Content::Bytes(text.to_vec()), loads)
    }
    // A plugin's value of the wrong type for types.NetConf: every line.
    for (name, extra) in [
        (
            "caps-string",
            json!({"capabilities": {"portMappings": "yes"}}),
        ),
        ("caps-list", json!({"capabilities": ["portMappings"]})),
        ("dns-string", json!({"dns": {"nameservers": "8.8.8.8"}})),
        ("dns-folded", json!({"DNS": {"Search": [1]}})),
        // Go folds U+017F (long s) to s: this key is `dns`.
        (
            "dns-long-s",
            json!({"dn\u{17f}": {"nameservers": "8.8.8.8"}}),
        ),
        ("ipam-string", json!({"ipam": "host-local"})),
        ("ipam-type-number", json!({"ipam": {"type": 5}})),
        ("type-number", json!({"type": 5})),
        ("type-empty", json!({"type": ""})),
        ("name-bool", json!({"name": true})),
        ("prev-result-list", json!({"prevResult": []})),
    ] {
        add(
            &mut all,
            name,
            "conflist",
            list(name, json!({}), plugin(extra)).as_bytes(),
            NONE,
        );
    }
    // Unknown keys are skipped, null fits every type.
    let nulls = json!({"nodectlUnknown": [1, {}], "dns": {"nameservers": null},
        "capabilities": {"portMappings": null}, "prevResult": null, "name": null});
    let unknown = list("unknown-and-nulls", json!({}), plugin(nulls));
    add(
        &mut all,
        "unknown-and-nulls",
        "conflist",
        unknown.as_bytes(),
        EVERY,
    );
    // Strings as Go reads them: a lone surrogate escape, bytes that are not
    // UTF-8 (each U+FFFD); a number past float64's range fails the map.
    let note = |name: &str, raw: &[u8]| {
        let text = list(name, json!({}), plugin(json!({"nodectlNote": "@"})));
        let (before, after) = text.split_once('@').unwrap();
        [before.as_bytes(), raw, after.as_bytes()].concat()
    };
    add(
        &mut all,
        "surrogate",
        "conflist",
        &note("surrogate", br"\ud800 \udc00x"),
        EVERY,
    );
    add(
        &mut all,
        "not-utf8",
        "conflist",
        &note("not-utf8", b"\xff\xfe"),
        EVERY,
    );
    let far = list(
        "number-range",
        json!({}),
        plugin(json!({"nodectlNote": "@"})),
    )
    .replace(r#""@""#, "1e400");
    add(&mut all, "number-range", "conflist", far.as_bytes(), NONE);
    // A key twice: a list's plugin is decoded into a map first (the last
    // wins), a single plugin's file as written (each checked).
    let twice = |text: String| {
        let twice = text.replacen(
            r#""ipam":"#,
            r#""capabilities": "x", "capabilities": {}, "ipam":"#,
            1,
        );
        assert_ne!(twice, text);
        twice
    };
    let dup = twice(list("dup-list", json!({}), one()));
    add(&mut all, "dup-list", "conflist", dup.as_bytes(), EVERY);
    let dup = twice(single("dup-conf", json!({})));
    add(&mut all, "dup-conf", "conf", dup.as_bytes(), NONE);
    // A single plugin's file is marshalled again, its keys sorted: "TYPE"
    // before "type", the later one wins.
    let typed = |name: &str, empty: &str, bridge: &str| {
        format!(
            r#"{{"cniVersion": "1.0.0", "name": "s-{name}", "{empty}": "", "{bridge}": "bridge", "ipam": {ipam}}}"#
        )
    };
    add(
        &mut all,
        "type-sorted",
        "conf",
        typed("type-sorted", "type", "TYPE").as_bytes(),
        NONE,
    );
    add(
        &mut all,
        "type-written",
        "conf",
        typed("type-written", "TYPE", "type").as_bytes(),
        EVERY,
    );
    // GC attachments: typed from libcni 1.2 (containerd 2.0).
    let attachments = |value: Value| plugin(json!({"cni.dev/valid-attachments": value}));
    let untyped = list("attachments-string", json!({}), attachments(json!("all")));
    add(
        &mut all,
        "attachments-string",
        "conflist",
        untyped.as_bytes(),
        ONE_X,
    );
    let typed = attachments(json!([{"containerID": "c", "IFNAME": "eth0"}]));
    let typed = list("attachments-typed", json!({}), typed);
    add(
        &mut all,
        "attachments-typed",
        "conflist",
        typed.as_bytes(),
        EVERY,
    );
    // A list's own keys: exact (a map), typed by hand, per libcni.
    let caps = json!({"cniVersion": "1.0.0", "Name": "s-list-name-caps", "plugins": [one()]});
    add(
        &mut all,
        "list-name-caps",
        "conflist",
        caps.to_string().as_bytes(),
        NONE,
    );
    let caps = json!({"cniVersion": "1.0.0", "name": "s-list-plugins-caps", "Plugins": [one()]});
    add(
        &mut all,
        "list-plugins-caps",
        "conflist",
        caps.to_string().as_bytes(),
        NONE,
    );
    let twice = format!(
        r#"{{"cniVersion": "1.0.0", "name": "s-list-name-twice", "name": 5, "plugins": [{}]}}"#,
        one()
    );
    add(
        &mut all,
        "list-name-twice",
        "conflist",
        twice.as_bytes(),
        NONE,
    );
    for (name, top, loads) in [
        ("cni-version-number", json!({"cniVersion": 1}), NONE),
        ("cni-version-x", json!({"cniVersion": "x"}), EVERY),
        (
            "cni-versions-string",
            json!({"cniVersions": "1.0.0"}),
            ONE_X,
        ),
        (
            "cni-versions-empty-version-x",
            json!({"cniVersions": [], "cniVersion": "x"}),
            ONE_X,
        ),
        (
            "cni-versions-edge",
            json!({"cniVersions": ["1.0.0", "+1.-0", "9.9"]}),
            EVERY,
        ),
        (
            "cni-versions-overflow",
            json!({"cniVersions": ["99999999999999999999"]}),
            ONE_X,
        ),
        (
            "disable-check-upper",
            json!({"disableCheck": "FALSE"}),
            TWO_X,
        ),
        ("disable-check-yes", json!({"disableCheck": "yes"}), NONE),
        ("disable-check-null", json!({"disableCheck": null}), NONE),
        ("disable-gc", json!({"disableGC": "nope"}), ONE_X),
        (
            "inlined-number",
            json!({"loadOnlyInlinedPlugins": 1}),
            BEFORE_2_1,
        ),
    ] {
        add(
            &mut all,
            name,
            "conflist",
            list(name, top, one()).as_bytes(),
            loads,
        );
    }
    // The extension picks the reader: a list in a plugin's file, a plugin
    // in a list's; `.conf` and `.json` single plugins.
    add(
        &mut all,
        "conf-single",
        "conf",
        single("conf-single", json!({})).as_bytes(),
        EVERY,
    );
    add(
        &mut all,
        "json-single",
        "json",
        single("json-single", json!({})).as_bytes(),
        EVERY,
    );
    add(
        &mut all,
        "conf-list",
        "conf",
        list("conf-list", json!({}), one()).as_bytes(),
        NONE,
    );
    add(
        &mut all,
        "json-list",
        "json",
        list("json-list", json!({}), one()).as_bytes(),
        NONE,
    );
    let misplaced = single("conflist-single", json!({}));
    add(
        &mut all,
        "conflist-single",
        "conflist",
        misplaced.as_bytes(),
        NONE,
    );
    add(&mut all, "invalid-json", "conflist", b"{not json", NONE);
    add(&mut all, "empty", "conflist", b"", NONE);
    // libcni 1.3 (2.1 on) appends `<conf_dir>/<name>/*.conf` to a list's
    // plugins: one it refuses refuses the list, unless only the inline
    // plugins are loaded.
    let refused_plugin = br#"{"type": "bridge", "dns": []}"#.to_vec();
    for (name, top, loads) in [
        ("plugin-dir", json!({}), BEFORE_2_1),
        (
            "plugin-dir-inlined",
            json!({"loadOnlyInlinedPlugins": "TRUE"}),
            EVERY,
        ),
    ] {
        let dir = format!("s-{name}/10-refused.conf");
        add(
            &mut all,
            name,
            "conflist",
            list(name, top, one()).as_bytes(),
            loads,
        )
        .also = vec![(dir, refused_plugin.clone())];
    }
    // Linked: followed to a file, refused when it leads to a directory.
    for (name, target, loads) in [("linked", elsewhere, EVERY), ("linked-dir", data_dir, NONE)] {
        add_content(
            &mut all,
            name,
            "conflist",
            Content::Link(target.to_path_buf()),
            loads,
        );
    }
    // A file named `.conf` has that extension (Go's filepath.Ext), and
    // sorts before every other.
    all.push(Scenario {
        name: "hidden",
        file: ".conf".to_string(),
        content: Content::Bytes(single("hidden", json!({})).into_bytes()),
        also: Vec::new(),
        loads: EVERY,
    });
    all
}
