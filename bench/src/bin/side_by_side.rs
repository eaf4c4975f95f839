//! Side by side on a real containerd with many pods: how long nodectl takes
//! to answer "which shims are leaked", against the loop people run by hand
//! today (`ctr shim state` for every shim, containerd#8381) and against the
//! physical floor (`cat` of the same files nodectl reads).
//!
//! Run by bench/run; by hand, `cargo build --release --bin nodectl -p
//! nodectl-bench --bin side_by_side`, then `target/release/side_by_side`
//! (root; installs nothing: run scripts/test once first). `NODECTL_BENCH_PODS` sets the pod count (50).

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::TestBed;

const RUNS: usize = 9;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time(mut run: impl FnMut()) -> Duration {
    run(); // warm the page cache and the binaries
    median(
        (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                run();
                start.elapsed()
            })
            .collect(),
    )
}

fn main() {
    // There are no arguments to parse.
    let pods: usize = std::env::var("NODECTL_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let Some(bed) = TestBed::start("side_by_side").await else {
            return;
        };
        let started = Instant::now();
        let mut sandboxes = Vec::new();
        for n in 0..pods {
            let pod = bed
                .run_pod(&format!("pod-{n}"), "app", &["/bin/sh", "-c", "sleep 3600"])
                .await;
            sandboxes.push(pod.sandbox_id);
        }
        eprintln!(
            "{pods} pods running after {:.1} s",
            started.elapsed().as_secs_f64()
        );

        let nodectl = time(|| {
            let output = bed.nodectl(&["leaked-shims", "-o", "json"]);
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stdout)
            );
        });

        // The same without the API: what procfs and the files cost.
        let offline = time(|| {
            let output = bed.nodectl(&["shims", "-o", "json"]);
            assert!(output.status.success());
        });

        let address = bed.address().to_path_buf();
        let hand_loop = time(|| {
            for id in &sandboxes {
                let status = Command::new("ctr")
                    .arg("--address")
                    .arg(&address)
                    .args(["-n", "k8s.io", "shim", "--id", id, "state"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success(), "ctr shim state {id}");
            }
        });

        // The files nodectl reads: CRI status files, bundle specs, and the
        // stat and cmdline of every process.
        let mut files: Vec<PathBuf> = Vec::new();
        let store = bed.root().join("io.containerd.grpc.v1.cri/containers");
        for entry in std::fs::read_dir(&store).unwrap().flatten() {
            files.push(entry.path().join("status"));
        }
        let bundles = bed.state().join("io.containerd.runtime.v2.task/k8s.io");
        for entry in std::fs::read_dir(&bundles).unwrap().flatten() {
            files.push(entry.path().join("config.json"));
        }
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            if entry.file_name().to_string_lossy().parse::<u32>().is_ok() {
                files.push(entry.path().join("stat"));
                files.push(entry.path().join("cmdline"));
            }
        }
        let floor = time(|| {
            // Processes may exit in between; cat's complaints do not matter.
            let _ = Command::new("cat")
                .args(&files)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        });

        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!("| {pods} pods, median of {RUNS} | wall time | vs nodectl |");
        println!("| --- | ---: | ---: |");
        println!(
            "| `nodectl leaked-shims` (procfs + containerd API) | {:.1} ms | 1.0x |",
            ms(nodectl)
        );
        println!(
            "| `nodectl shims` (procfs and files only, no API) | {:.1} ms | {:.2}x |",
            ms(offline),
            ms(offline) / ms(nodectl)
        );
        println!(
            "| hand loop: `ctr shim --id <id> state` per shim | {:.1} ms | {:.1}x |",
            ms(hand_loop),
            ms(hand_loop) / ms(nodectl)
        );
        println!(
            "| floor: `cat` of the same {} files | {:.1} ms | {:.2}x |",
            files.len(),
            ms(floor),
            ms(floor) / ms(nodectl)
        );
    });
}
