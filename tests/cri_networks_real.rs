//! CRI's networks from CRI, on every line: the networks `leaked-ips`
//! judges and releases are the ones the proven daemon's CRI says it loaded
//! (its `Status(verbose)` `cniconfig`), not the ones containerd's config
//! names when nodectl reads it.
//!
//! The config is replaced after containerd started, its time kept (its
//! drop-in's `conf_dir` moved to another directory, containerd not
//! restarted, as a half-done change leaves a node): CRI still loads the
//! bed's network; the
//! files now name another, with an address reserved for an id containerd
//! never had. nodectl finds and releases the leak in CRI's network, leaves
//! the other network's reservation alone, and says whose word it took.
//! Without CRI's answer (another CRI address, which nothing serves) it
//! falls back to the files and says so.

mod support;

use std::fs;

use k8s_cri::v1::StatusRequest;
use serde_json::{json, Value};
use support::{Line, TestBed};

const TEST: &str = "cri_networks_real";
/// The other network's range: nothing else on the machine uses it.
const OTHER_SUBNET: &str = "10.254.9.0/29";
const OTHER_IP: &str = "10.254.9.2";
/// A sandbox id containerd never had.
const OTHER_ID: &str = "0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1ce0ff1";

fn networks_judged(doc: &Value) -> Vec<String> {
    doc["pod_addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["network"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_networks_judged_are_those_cri_loaded_not_those_of_a_config_edited_since() {
    let Some(bed) = TestBed::start_networked(TEST).await else {
        return;
    };
    let _healthy = bed.run_sandbox("healthy").await;
    let leak = bed.leak_pod_ip("leaked").await;
    let cri_dir = bed.cni().conf_dir.clone();
    let network = bed.cni().network.clone();

    // Another conf dir, with a network of its own holding one address.
    let other_dir = bed.scratch("other-cni/conf");
    let other_data = bed.scratch("other-cni/networks");
    let other = format!("{network}-other");
    fs::create_dir_all(&other_dir).unwrap();
    fs::create_dir_all(other_data.join(&other)).unwrap();
    let conflist = json!({
        "cniVersion": "1.0.0",
        "name": other,
        "plugins": [{
            "type": "bridge",
            "bridge": "nodectl9",
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": OTHER_SUBNET}]],
                "dataDir": other_data,
            }
        }]
    });
    fs::write(
        other_dir.join("10-other.conflist"),
        format!("{conflist:#}\n"),
    )
    .unwrap();
    let other_file = other_data.join(&other).join(OTHER_IP);
    fs::write(&other_file, format!("{OTHER_ID}\r\neth0")).unwrap();

    // The drop-in now names the other directory; containerd is not told.
    // Its time is kept, as `cp -p` or `rsync -t` from a config store keeps
    // it: nothing on disk says it changed after containerd started, so
    // containerd's state stays proven by its config.
    let drop_in = bed.dir().join(support::DROP_IN);
    let text = fs::read_to_string(&drop_in).unwrap();
    let written = fs::metadata(&drop_in).unwrap().modified().unwrap();
    let moved = format!("conf_dir = \"{}\"", other_dir.display());
    let edited = text.replace(&format!("conf_dir = \"{}\"", cri_dir.display()), &moved);
    assert_ne!(edited, text, "the drop-in names the bed's conf_dir");
    fs::write(&drop_in, edited).unwrap();
    fs::File::options()
        .write(true)
        .open(&drop_in)
        .and_then(|file| file.set_modified(written))
        .unwrap();

    // The oracle: CRI's own word on the directory it loaded.
    let status = bed
        .cri()
        .await
        .status(StatusRequest { verbose: true })
        .await
        .expect("CRI Status")
        .into_inner();
    let told: Value = serde_json::from_str(&status.info["cniconfig"]).expect("cniconfig JSON");
    assert_eq!(
        told["PluginConfDir"],
        cri_dir.display().to_string(),
        "CRI still loads the bed's conf_dir: {told:#}"
    );

    let output = bed.nodectl(&["leaked-ips", "--grace", "0s", "-o", "json"]);
    let doc = support::report(&output);
    assert_eq!(
        doc["cni_networks_from"],
        json!({"from": "cri", "conf_dir": cri_dir.display().to_string()}),
        "{doc:#}"
    );
    assert_eq!(networks_judged(&doc), [network.as_str()], "{doc:#}");
    // The report's paths say the directory judged, and whose word it is.
    assert_eq!(
        doc["paths"]["cni_conf_dir"],
        cri_dir.display().to_string(),
        "{}",
        doc["paths"]
    );
    let note = doc["paths"]["note"].as_str().unwrap_or_default();
    assert!(
        note.contains(&format!(
            "CRI's CNI conf_dir is {} and its max_conf_num 1 by its own word (its Status), not {}",
            cri_dir.display(),
            other_dir.display()
        )),
        "{}",
        doc["paths"]
    );
    let found = support::findings_of_kind(&doc, "leaked-ip");
    let ids: Vec<&str> = found.iter().filter_map(|f| f["id"].as_str()).collect();
    assert_eq!(ids, [leak.sandbox_id.as_str()], "{doc:#}");
    assert_eq!(output.status.code(), Some(1), "{doc:#}");

    // Acted on on every line: 2.3's state is tied to the daemon by its
    // open files; earlier lines' only by a config unchanged since the start
    // (its ctime, which no copy keeps) or, after the edit, by CRI's own
    // word (its Status' config names the state the daemon runs on).
    assert_eq!(
        doc["paths"]["unproven"],
        json!([]),
        "{:?}: {}",
        bed.line(),
        doc["paths"]
    );
    if bed.line() != Line::V2_3 {
        let note = doc["paths"]["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("by CRI's own word"),
            "{:?}: {}",
            bed.line(),
            doc["paths"]
        );
    }
    let released = bed.nodectl(&["leaked-ips", "--grace", "0s", "--release", "--yes"]);
    let said = String::from_utf8_lossy(&released.stdout);
    assert_eq!(
        released.status.code(),
        Some(1),
        "{said}{}",
        String::from_utf8_lossy(&released.stderr)
    );
    assert!(
        !leak.file.exists(),
        "{:?}: the leak in CRI's network is released: {said}",
        bed.line()
    );
    assert!(
        other_file.exists(),
        "the other network's reservation stays: {said}"
    );

    // Without CRI's word: the files, as the config names them now, and the
    // report says why.
    let unserved = bed.scratch("nobody.sock");
    let output = bed.nodectl(&[
        "check",
        "--settle",
        "0s",
        "--cri-address",
        unserved.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let doc = support::report(&output);
    assert_eq!(doc["cni_networks_from"]["from"], "files", "{doc:#}");
    assert!(
        doc["cni_networks_from"]["why"]
            .as_str()
            .is_some_and(|why| why.contains("did not answer")),
        "{doc:#}"
    );
    assert_eq!(networks_judged(&doc), [other.as_str()], "{doc:#}");
    assert_eq!(
        doc["paths"]["cni_conf_dir"],
        other_dir.display().to_string(),
        "{}",
        doc["paths"]
    );
    assert!(other_file.exists(), "nothing released without --release");
    eprintln!(
        "{TEST}: {}: CRI's networks judged, the edited config's left alone",
        bed.containerd_version()
    );
}
