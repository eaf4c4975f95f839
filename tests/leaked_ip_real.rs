//! `leaked-ip` on a real containerd with real CNI (the networked test bed):
//! a pod whose network teardown failed with an error saying "not found"
//! (go-cni takes it for "already deleted", so StopPodSandbox and
//! RemovePodSandbox succeed while host-local's DEL never ran) leaves its
//! address reserved on every line (see tests/cni_real.rs for why, per
//! line). nodectl must find that address, name its sandbox, its network,
//! its file and the range's use, judge it by containerd's records and CRI's
//! list, and leave the live pod's address alone; within the grace it must
//! call nothing leaked. Beside CRI's network the bed has podman's
//! (`87-podman.conflist`, which CRI does not load) with a live process's
//! address that containerd never knew: never reported, never released. `leaked-ips --release` plans, refuses an address
//! host-local gave to a new pod between its scan and its release, releases
//! the other under host-local's lock, and the node whose range was used up
//! starts a pod again. The DaemonSet's view of a leaked IP (and of CNI's
//! directories hidden) is tests/daemonset_view_real.rs's.

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
    // The neighbour (podman's network beside CRI's, sorted after it): a
    // live process's address, reserved for an id containerd never had.
    let neighbour = bed.neighbours();
    let neighbours_address = |when: &str| {
        let held = std::fs::read_to_string(&neighbour.podman_file).unwrap_or_default();
        assert!(
            held.starts_with(support::NEIGHBOUR_ID),
            "{when}: podman's reservation {} stays: {held:?}",
            neighbour.podman_file.display()
        );
        let configured = neighbour.live_addresses();
        assert!(
            configured.contains(&format!("{}/29", neighbour.podman_ip)),
            "{when}: the live process keeps its address: {configured}"
        );
    };
    neighbours_address("at the start");

    // Reserved a moment ago: within the grace (5 min), nothing is called
    // leaked, as for a sandbox being set up.
    let output = bed.nodectl(&["check", "--settle", "0s", "-o", "json"]);
    let doc = support::report(&output);
    assert!(leaked_ips(&doc).is_empty(), "within the grace: {doc:#}");

    let output = bed.nodectl(&["check", "--settle", "0s", "--ip-grace", "0s", "-o", "json"]);
    let doc = support::report(&output);
    assert_eq!(output.status.code(), Some(1), "{doc:#}");
    let found = leaked_ips(&doc);
    assert!(
        !found
            .iter()
            .any(|f| f["evidence"]["network"] == support::NEIGHBOUR_NETWORK),
        "another network's address is never leaked: {doc:#}"
    );
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
    // The range's use, in the report and the metrics.
    assert_eq!(
        doc["pod_addresses"],
        serde_json::json!([{"network": network, "reserved": 2, "capacity": 5}]),
        "{doc:#}"
    );
    let metrics = bed.nodectl(&["check", "--settle", "0s", "-o", "prometheus"]);
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    assert!(
        metrics.contains(&format!(
            "nodectl_pod_addresses_reserved{{command=\"check\",network=\"{network}\"}} 2"
        )) && metrics.contains(&format!(
            "nodectl_pod_addresses_capacity{{command=\"check\",network=\"{network}\"}} 5"
        )),
        "{metrics}"
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

    // `leaked-ips --release` on a node whose range is used up: a second
    // leak, the rest of the /29 taken, and the next pod starved.
    let second = bed.leak_pod_ip("leaked-too").await;
    for n in 0..2 {
        bed.run_sandbox(&format!("filler-{n}")).await;
    }
    let starved = bed.try_run_sandbox("starved").await;
    let error = format!("{:?}", starved.expect_err("the range is used up"));
    assert!(error.contains(support::EXHAUSTED), "{error}");

    // The plan touches nothing.
    let output = bed.nodectl(&["leaked-ips", "--grace", "0s", "--release", "-o", "json"]);
    let doc = support::report(&output);
    assert_eq!(output.status.code(), Some(1), "{doc:#}");
    let outcomes: Vec<&Value> = doc["cleanups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["outcome"])
        .collect();
    assert_eq!(outcomes, ["would-remove", "would-remove"], "{doc:#}");
    assert!(leak.file.exists() && second.file.exists());

    // Between the scan and the release, the second address is released by
    // someone else and host-local gives it to a new pod: refused, with the
    // pod that holds it now; the first is released.
    let pause = bed.scratch("pause");
    let child = support::spawn_paused_before_act(
        &[
            "leaked-ips",
            "--grace",
            "0s",
            "--release",
            "--yes",
            "-o",
            "json",
        ],
        [bed.root(), bed.state(), bed.address(), bed.config_path()],
        &pause,
    );
    std::fs::remove_file(&second.file).expect("the second reservation");
    let took_it = bed.run_sandbox("took-it").await;
    let holder = std::fs::read_to_string(&second.file).unwrap_or_default();
    assert!(holder.starts_with(&took_it), "{holder}");
    std::fs::remove_file(&pause).unwrap();
    let output = child.wait_with_output().unwrap();
    let doc = support::report(&output);
    eprintln!("{TEST}: released: {:#}", doc["cleanups"]);
    let cleanups = doc["cleanups"].as_array().cloned().unwrap_or_default();
    assert!(
        !cleanups.iter().any(|c| c["id"] == support::NEIGHBOUR_ID),
        "podman's address is not CRI's to release: {doc:#}"
    );
    neighbours_address("after leaked-ips --release --yes");
    assert_eq!(cleanups.len(), 2, "{doc:#}");
    let row = |file: &std::path::Path| {
        cleanups
            .iter()
            .find(|c| c["path"] == file.display().to_string())
            .unwrap_or_else(|| panic!("no cleanup of {}: {doc:#}", file.display()))
    };
    assert_eq!(row(&leak.file)["action"], "release-ip");
    assert_eq!(row(&leak.file)["outcome"], "removed", "{doc:#}");
    assert_eq!(row(&second.file)["outcome"], "refused", "{doc:#}");
    let detail = row(&second.file)["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(&took_it), "{detail}");
    assert!(!leak.file.exists(), "released");
    assert!(second.file.exists(), "the new pod's address stays");

    // The node that was out of addresses starts a pod again, on the
    // address released.
    let next = bed.run_sandbox("after-release").await;
    let holder = std::fs::read_to_string(&leak.file).unwrap_or_default();
    assert!(holder.starts_with(&next), "{holder}");
    let output = bed.nodectl(&["check", "--settle", "0s", "--ip-grace", "0s", "-o", "json"]);
    let doc = support::report(&output);
    assert!(
        leaked_ips(&doc).is_empty(),
        "nothing leaked any more: {doc:#}"
    );
}
