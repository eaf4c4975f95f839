//! `nodectl serve` on a hand-made node, scraped over loopback: the metrics
//! are `check -o prometheus`'s plus the loop's own, scrapes are answered
//! from the last run (they never add runs), `/healthz` answers, anything
//! else is 404, a client that never sends its request holds no one else
//! up, and SIGTERM ends it cleanly.

mod support;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use support::serve::{families, series, value, Served};

/// A hand-made node whose socket accepts and never answers: every run has
/// a report, with the API families (the calls time out).
struct Node {
    dir: tempfile::TempDir,
    _listener: std::os::unix::net::UnixListener,
}

impl Node {
    fn new() -> Node {
        let dir = support::hand_made_node();
        let [_, _, socket, _] = support::hand_made_paths(dir.path());
        let _listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
        Node { dir, _listener }
    }

    fn command(&self, args: &[&str]) -> Command {
        let [root, state, socket, config] = support::hand_made_paths(self.dir.path());
        let mut command = support::nodectl_command(args, [&root, &state, &socket, &config]);
        command.args(["--timeout", "300ms"]);
        command
    }

    fn serve(&self, extra: &[&str]) -> Served {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Served::start(self.command(&args))
    }
}

const LOOP_FAMILIES: &[&str] = &["nodectl_check_duration_seconds", "nodectl_checks_total"];

#[test]
fn metrics_are_checks_plus_the_loops_and_scrapes_add_no_runs() {
    let node = Node::new();
    let served = node.serve(&[]);
    let metrics = served.first_metrics(Duration::from_secs(30));

    let checked = support::run_bounded(
        &mut node.command(&["check", "-o", "prometheus"]),
        Duration::from_secs(60),
    )
    .unwrap();
    let checked = String::from_utf8(checked.stdout).unwrap();
    assert!(
        families(&checked).contains(&"nodectl_api_call_duration_seconds".to_string()),
        "{checked}"
    );
    let loop_only = |name: &String| LOOP_FAMILIES.iter().any(|f| name.starts_with(f));
    let served_families: Vec<String> = families(&metrics);
    assert_eq!(
        served_families
            .iter()
            .filter(|f| !loop_only(f))
            .cloned()
            .collect::<Vec<_>>(),
        families(&checked),
        "check's families:\n{metrics}"
    );
    for family in LOOP_FAMILIES {
        assert!(
            served_families.contains(&family.to_string()),
            "{family}:\n{metrics}"
        );
    }
    // The same series too, label for label.
    assert_eq!(
        series(&metrics)
            .into_iter()
            .filter(|s| !loop_only(s))
            .collect::<Vec<_>>(),
        series(&checked)
    );
    let took = value(
        &metrics,
        "nodectl_check_duration_seconds{command=\"check\"}",
    );
    assert!(
        (0.3..30.0).contains(&took),
        "a run waits out the 300ms deadline: {took}"
    );
    support::promtool_accepts(&metrics);

    // A default interval is a minute: 20 scrapes over 2 s (a run here
    // takes 300 ms, so a loop that did not wait would make six more) are
    // answered from the run already made.
    let mut last = String::new();
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        let answer = served.get("/metrics");
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(
            answer.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        last = answer.body;
    }
    let runs = value(&last, "nodectl_checks_total{command=\"check\"}");
    assert!(
        (1.0..=2.0).contains(&runs),
        "{runs} runs for 20 scrapes:\n{last}"
    );
}

#[test]
fn healthz_answers_other_paths_are_404_and_sigterm_ends_it() {
    let node = Node::new();
    let mut served = node.serve(&[]);
    served.first_metrics(Duration::from_secs(30));

    let health = served.get("/healthz");
    assert_eq!(health.status, 200, "{health:?}");
    assert!(health.body.starts_with("ok"), "{health:?}");
    for path in ["/", "/metricsx", "/metrics/", "/favicon.ico", "/../metrics"] {
        let answer = served.get(path);
        assert_eq!(answer.status, 404, "{path}: {answer:?}");
    }
    // A query string does not change the answer.
    assert_eq!(served.get("/metrics?name[]=nodectl_up").status, 200);
    let posted = served.request("POST", "/metrics").unwrap();
    assert_eq!(posted.status, 405, "{posted:?}");
    let head = served.request("HEAD", "/metrics").unwrap();
    assert_eq!(head.status, 200, "{head:?}");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(served.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(
        served.wait_exit(Duration::from_secs(10)),
        Some(Some(0)),
        "SIGTERM ends serve with status 0; stderr:\n{}",
        served.log()
    );
}

/// Connects and sends nothing.
fn silent_client(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
}

/// Whether the server has closed `stream` (EOF or reset), waiting for it.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => {
            e.kind() != std::io::ErrorKind::WouldBlock && e.kind() != std::io::ErrorKind::TimedOut
        }
    }
}

#[test]
fn a_client_that_never_sends_its_request_holds_no_one_up() {
    let node = Node::new();
    let served = node.serve(&[]);
    served.first_metrics(Duration::from_secs(30));

    // One silent client: another scrape is answered at once.
    let mut silent = silent_client(served.address);
    let asked = Instant::now();
    assert_eq!(served.get("/metrics").status, 200);
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "a scrape beside a silent client took {:?}",
        asked.elapsed()
    );
    // And the silent one is cut off after the request-head deadline (5 s).
    let connected = Instant::now();
    assert!(
        closed_by_server(&mut silent),
        "the silent client is dropped"
    );
    let dropped_after = connected.elapsed();
    assert!(
        dropped_after < Duration::from_secs(10),
        "dropped after {dropped_after:?}"
    );

    // More silent clients than are served at once (4): the first four hold
    // their slots until the deadline, no longer, and the scrape behind
    // them is answered then, with the last two.
    let mut crowd: Vec<TcpStream> = (0..6).map(|_| silent_client(served.address)).collect();
    std::thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    assert_eq!(served.get("/metrics").status, 200, "{}", served.log());
    let waited = asked.elapsed();
    assert!(
        waited > Duration::from_secs(4) && waited < Duration::from_secs(9),
        "a scrape behind 6 silent clients, 4 served at once, waits for their 5 s deadline: {waited:?}"
    );
    for stream in &mut crowd {
        assert!(closed_by_server(stream), "every silent client is dropped");
    }
}

#[test]
fn an_address_in_use_is_exit_2_with_the_reason() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let node = Node::new();
    let output = support::run_bounded(
        &mut node.command(&["serve", "--listen", &address]),
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        support::stderr(&output)
    );
    let stderr = support::stderr(&output);
    assert!(
        stderr.contains("cannot listen on") && stderr.contains(&address),
        "{stderr}"
    );
}
