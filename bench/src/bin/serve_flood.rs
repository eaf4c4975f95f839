//! `nodectl serve` under a connection flood (issue 26, point 6): how long a
//! scrape takes while a client holds a thousand connections open without
//! sending a request, and how much memory `serve` takes for it.
//!
//! Run by bench/run; by hand, `cargo build --release --bin nodectl -p
//! nodectl-bench --bin serve_flood`, then `target/release/serve_flood` (any
//! user; loopback only, about half a minute). Three floods, each against a fresh `serve` on a hand-made node:
//!
//! - 1,000 silent connections (connect, send nothing), under the default
//!   open-files limit: below the connection cap, every one held open;
//! - the same with an open-files limit of 1,024 (soft and hard, as a
//!   container may get): a cap of 768, so the flood is over it and its
//!   oldest connections are closed to make room;
//! - 2,500 connections that send the start of a request line and stop (a
//!   slow-loris), over the cap of 2,048: the most memory connections can
//!   take, as each has hyper's buffers.
//!
//! Each flood comes in 4 waves (a silent connection is closed after 3 s):
//! the wave's connections are opened, then 5 rounds of 50 scrapes at once,
//! each on its own connection, timed from connecting to the last byte of
//! the answer; then the wave is closed. 1,000 scrapes per flood. The table
//! gives the median, 99th percentile and slowest scrape, and `serve`'s peak
//! RSS (VmHWM) before the flood and after it. Target: every scrape within
//! 1 s; the bench exits 1 when one is slower or fails.

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::time::Duration;

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use support::serve::{scrapes_at_once, Served};

const WAVES: usize = 4;
const ROUNDS: usize = 5;
const AT_ONCE: usize = 50;
const TARGET: Duration = Duration::from_secs(1);

struct Flood {
    name: &'static str,
    connections: usize,
    /// What each flood connection sends before going quiet.
    sends: &'static [u8],
    /// serve's open-files limit (soft and hard), if not the bench's own.
    open_files: Option<u64>,
}

struct Measured {
    latencies: Vec<Duration>,
    failures: Vec<String>,
    rss_before_kib: u64,
    rss_peak_kib: u64,
}

fn main() {
    // The flood's connections are the bench's descriptors too.
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let floods = [
        Flood {
            name: "1,000 silent connections",
            connections: 1000,
            sends: b"",
            open_files: None,
        },
        Flood {
            name: "1,000 silent connections, open files 1,024 (cap 768)",
            connections: 1000,
            sends: b"",
            open_files: Some(1024),
        },
        Flood {
            name: "2,500 slow request heads (cap 2,048)",
            connections: 2500,
            sends: b"GET /metrics HTTP/1.1\r\nHost: x\r\n",
            open_files: None,
        },
    ];
    println!(
        "| flood, with {AT_ONCE} scrapes at once | scrapes | median | p99 | slowest | failed | serve peak RSS before | after |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut missed = false;
    for flood in &floods {
        let measured = measure(flood);
        let mut sorted = measured.latencies.clone();
        sorted.sort();
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            flood.name,
            sorted.len() + measured.failures.len(),
            ms(at(0.5)),
            ms(at(0.99)),
            ms(at(1.0)),
            measured.failures.len(),
            mib(measured.rss_before_kib),
            mib(measured.rss_peak_kib),
        );
        for failure in measured.failures.iter().take(5) {
            eprintln!("  a scrape failed: {failure}");
        }
        missed |= !measured.failures.is_empty() || at(1.0) > TARGET;
    }
    if missed {
        eprintln!("serve_flood: a scrape failed or took longer than {TARGET:?}");
        std::process::exit(1);
    }
}

fn measure(flood: &Flood) -> Measured {
    let node = support::hand_made_node();
    let [root, state, socket, config] = support::hand_made_paths(node.path());
    let mut command = support::nodectl_command(
        &["serve", "--listen", "127.0.0.1:0", "--timeout", "300ms"],
        [&root, &state, &socket, &config],
    );
    if let Some(limit) = flood.open_files {
        // SAFETY: setrlimit is async-signal-safe and touches no memory of
        // the parent.
        unsafe {
            command.pre_exec(move || {
                setrlimit(Resource::RLIMIT_NOFILE, limit, limit).map_err(std::io::Error::from)
            });
        }
    }
    let served = Served::start(command);
    served.first_metrics(Duration::from_secs(30));
    let rss_before_kib = peak_rss_kib(served.pid());

    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    for _ in 0..WAVES {
        let wave: Vec<TcpStream> = (0..flood.connections)
            .map(|_| {
                let mut stream = TcpStream::connect(served.address).unwrap();
                stream.write_all(flood.sends).unwrap();
                stream
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        for _ in 0..ROUNDS {
            for scrape in scrapes_at_once(served.address, AT_ONCE) {
                match scrape {
                    Ok(took) => latencies.push(took),
                    Err(failure) => failures.push(failure),
                }
            }
        }
        // The wave's newest connection is still open: the scrapes ran
        // beside the whole flood (below the cap) or its newest part.
        let newest = wave.last().unwrap();
        newest.set_nonblocking(true).unwrap();
        let still_open = matches!(
            newest.peek(&mut [0u8; 1]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        );
        assert!(
            still_open,
            "{}: the flood was closed under the scrapes",
            flood.name
        );
        drop(wave);
        std::thread::sleep(Duration::from_millis(200));
    }
    Measured {
        latencies,
        failures,
        rss_before_kib,
        rss_peak_kib: peak_rss_kib(served.pid()),
    }
}

/// A process's peak resident set (VmHWM), in KiB.
fn peak_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}
