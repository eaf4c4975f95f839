//! `leaked-ip` on a real containerd with real CNI (the networked test bed):
//! a pod whose network teardown failed with an error saying "not found"
//! (go-cni takes it for "already deleted", so StopPodSandbox and
//! RemovePodSandbox succeed while host-local's DEL never ran) leaves its
//! address reserved on every line (see tests/cni_real.rs for why, per
//! line). nodectl must find that address, name its sandbox, its network,
//! its file and the range's use, judge it by containerd's records and CRI's
//! list, and leave the live pod's address alone; within the grace it must
//! call nothing leaked.

mod support;

use serde_json::Value;
use support::TestBed;

const TEST: &str = "leaked_ip_real";

fn leaked_ips(doc: &Value) -> Vec<&Value> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "leaked-ip")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_whose_teardown_failed_is_found_and_the_live_pod_s_is_not() {
    let Some(bed) = TestBed::start_networked(TEST).await else {
        return;
    };
    let healthy = bed.run_sandbox("healthy").await;
    let leak = bed.leak_pod_ip("leaked").await;
    let network = bed.cni().network.clone();

    // Reserved a moment ago: within the grace (5 min), nothing is called
    // leaked, as for a sandbox being set up.
    let output = bed.nodectl(&["check", "--settle", "0s", "-o", "json"]);
    let doc = support::report(&output);
    assert!(leaked_ips(&doc).is_empty(), "within the grace: {doc:#}");

    let output = bed.nodectl(&["check", "--settle", "0s", "--ip-grace", "0s", "-o", "json"]);
    let doc = support::report(&output);
    assert_eq!(output.status.code(), Some(1), "{doc:#}");
    let found = leaked_ips(&doc);
    assert_eq!(found.len(), 1, "only the leaked address: {doc:#}");
    let finding = found[0];
    eprintln!("{TEST}: the finding:\n{finding:#}");
    assert_eq!(finding["id"], leak.sandbox_id);
    let evidence = &finding["evidence"];
    assert_eq!(evidence["ip"], leak.ip.to_string());
    assert_eq!(evidence["sandbox_id"], leak.sandbox_id);
    assert_eq!(evidence["network"], network);
    assert_eq!(evidence["file"], leak.file.display().to_string());
    assert_eq!(evidence["ifname"], "eth0");
    assert_eq!(evidence["basis"], "containerd-api");
    // The live pod's address and the leaked one, of the /29's five.
    assert_eq!(evidence["network_reserved"], 2);
    assert_eq!(evidence["network_capacity"], 5);
    let summary = finding["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains(&leak.ip.to_string()) && summary.contains("2 of its 5"),
        "{summary}"
    );
    let remedy = finding["remedy"].as_str().unwrap_or_default();
    assert!(
        remedy.contains(&format!("rm {}", leak.file.display())),
        "{remedy}"
    );
    assert!(
        !found.iter().any(|f| f["id"] == healthy.as_str()),
        "the live pod's address is not leaked"
    );
    // Where the configs came from: the bed's containerd config names its
    // conf_dir.
    assert_eq!(
        doc["paths"]["cni_conf_dir"],
        bed.cni().conf_dir.display().to_string(),
        "{}",
        doc["paths"]
    );

    // The table says it too, with the address and the network.
    let table = bed.nodectl(&["check", "--settle", "0s", "--ip-grace", "0s"]);
    let text = String::from_utf8_lossy(&table.stdout);
    eprintln!("{TEST}: nodectl check:\n{text}");
    assert!(
        text.contains("leaked-ip") && text.contains(&leak.ip.to_string()),
        "{text}"
    );

    // Released as the remedy says (host-local's lock held, the file
    // removed), the next look finds nothing.
    std::fs::remove_file(&leak.file).expect("the reservation file");
    let output = bed.nodectl(&["check", "--settle", "0s", "--ip-grace", "0s", "-o", "json"]);
    let doc = support::report(&output);
    assert!(leaked_ips(&doc).is_empty(), "released: {doc:#}");
}
