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

mod support;

use std::time::Instant;

use k8s_cri::v1::StatusRequest;
use serde_json::{json, Value};
use support::TestBed;

const TEST: &str = "cni_libcni_real";

/// CRI's networks with host-local IPAM, by name, as its Status(verbose)
/// reports them loaded (go-cni's `GetConfig`: its loopback aside).
async fn cri_host_local_networks(bed: &TestBed) -> Vec<String> {
    let request = StatusRequest { verbose: true };
    let status = bed
        .cri()
        .await
        .status(request)
        .await
        .expect("CRI Status")
        .into_inner();
    let config: Value = serde_json::from_str(&status.info["cniconfig"]).expect("cniconfig JSON");
    let mut names: Vec<String> = config["Networks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| &n["Config"])
        .filter(|c| {
            c["Plugins"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["Network"]["ipam"]["type"] == "host-local")
        })
        .filter_map(|c| c["Name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
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

fn names_file(gaps: &[Value], file: &str) -> bool {
    gaps.iter()
        .any(|g| g["path"].as_str().is_some_and(|p| p.ends_with(file)))
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
}
