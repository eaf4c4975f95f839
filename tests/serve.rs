//! `nodectl serve` on a hand-made node, scraped over loopback: the metrics
//! are `check -o prometheus`'s plus the loop's own, scrapes are answered
//! from the last run (they never add runs), `/healthz` answers, anything
//! else is 404, clients that never send their request (hundreds of them,
//! or more than the connection cap) hold no scrape up and are closed, and
//! SIGTERM ends it cleanly.

mod support;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use support::serve::{families, scrapes_at_once, series, value, Served};

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

const LOOP_FAMILIES: &[&str] = &[
    "nodectl_check_duration_seconds",
    "nodectl_checks_total",
    "nodectl_event_stream_up",
    "nodectl_event_stream_reconnects_total",
    "nodectl_events_total",
];

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

/// Whether the server has closed `stream` (EOF or reset), waiting for it
/// as long as its read timeout.
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

/// How long the slowest of `count` scrapes at once took; each must be
/// answered 200 and whole.
fn concurrent_scrapes(served: &Served, count: usize) -> Duration {
    let mut slowest = Duration::ZERO;
    for scrape in scrapes_at_once(served.address, count) {
        let took = scrape.unwrap_or_else(|e| panic!("a scrape: {e}; stderr:\n{}", served.log()));
        slowest = slowest.max(took);
    }
    slowest
}

/// Well before Prometheus's default scrape timeout (10 s), with room for a
/// loaded test machine; the server answers in milliseconds.
const ANSWERED_WITHIN: Duration = Duration::from_secs(3);

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
    // And the silent one is cut off after the request-head deadline (3 s).
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
}

#[test]
fn hundreds_of_silent_connections_delay_no_scrape_and_are_closed() {
    let node = Node::new();
    let served = node.serve(&[]);
    served.first_metrics(Duration::from_secs(30));

    let opened = Instant::now();
    let mut crowd: Vec<TcpStream> = (0..300).map(|_| silent_client(served.address)).collect();
    std::thread::sleep(Duration::from_millis(200));
    // 50 scrapes at once, three times over, while all 300 stay open.
    for round in 0..3 {
        let slowest = concurrent_scrapes(&served, 50);
        assert!(
            slowest < ANSWERED_WITHIN,
            "round {round}: a scrape beside 300 silent connections took {slowest:?}"
        );
    }
    assert!(
        opened.elapsed() < Duration::from_secs(3),
        "the scrapes ended before any silent connection could be cut off (3 s); \
         too slow a machine to tell: {:?}",
        opened.elapsed()
    );
    // Then the server closes every silent one, at its request-head deadline.
    for stream in &mut crowd {
        assert!(closed_by_server(stream), "every silent client is dropped");
    }
    let all_dropped = opened.elapsed();
    assert!(
        all_dropped < Duration::from_secs(10),
        "the silent clients were dropped after {all_dropped:?}"
    );
}

#[test]
fn at_the_connection_cap_the_longest_silent_make_room_for_scrapes() {
    // An open-files limit of 300 (hard too, so serve cannot raise it)
    // leaves room for 44 connections beside the check loop's reserve.
    let node = Node::new();
    let mut command = node.command(&["serve", "--listen", "127.0.0.1:0"]);
    // SAFETY: setrlimit is async-signal-safe and touches no memory of
    // the parent.
    unsafe {
        command.pre_exec(|| {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, 300, 300)
                .map_err(std::io::Error::from)
        });
    }
    let served = Served::start(command);
    served.first_metrics(Duration::from_secs(30));
    assert!(
        served.log().contains("at most 44 connections open at once"),
        "{}",
        served.log()
    );

    // Four times as many silent connections as the cap, then scrapes.
    let mut crowd: Vec<TcpStream> = (0..200).map(|_| silent_client(served.address)).collect();
    std::thread::sleep(Duration::from_millis(200));
    let opened = Instant::now();
    for round in 0..3 {
        let slowest = concurrent_scrapes(&served, 20);
        assert!(
            slowest < ANSWERED_WITHIN,
            "round {round}: a scrape at the cap took {slowest:?}"
        );
    }
    // The oldest silent ones made room, before their deadline: closed
    // already.
    for (n, stream) in crowd.iter_mut().take(100).enumerate() {
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        assert!(
            closed_by_server(stream),
            "silent connection {n} of 200 is still open beside a cap of 44"
        );
    }
    // The newest stay open until their own deadline.
    assert!(
        opened.elapsed() < Duration::from_secs(2),
        "too slow a machine to tell: {:?}",
        opened.elapsed()
    );
    for (n, stream) in crowd.iter_mut().enumerate().skip(190) {
        stream
            .set_read_timeout(Some(Duration::from_millis(10)))
            .unwrap();
        assert!(
            !closed_by_server(stream),
            "silent connection {n} of 200, among the newest, was closed before an older one"
        );
    }
}

/// The status line of the answer to a GET of `/healthz` whose head carries
/// a header of `size` bytes.
fn status_of_a_head_with(address: SocketAddr, size: usize) -> String {
    use std::io::Write;
    let mut stream = silent_client(address);
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: {}\r\n\r\n",
        "a".repeat(size)
    );
    // The server may answer and close before reading it all.
    let _ = stream.write_all(head.as_bytes());
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    answer.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_request_head_over_8_kib_is_refused() {
    let node = Node::new();
    let served = node.serve(&[]);
    served.first_metrics(Duration::from_secs(30));
    // A scrape with a long bearer token still fits.
    assert_eq!(
        status_of_a_head_with(served.address, 6000),
        "HTTP/1.1 200 OK"
    );
    for size in [9000, 500_000] {
        assert_eq!(
            status_of_a_head_with(served.address, size),
            "HTTP/1.1 431 Request Header Fields Too Large",
            "a header of {size} bytes"
        );
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

/// Waits up to `limit` for a file in the directory `fd` watches to be
/// opened (inotify's IN_OPEN): true when one was.
fn opened_within(fd: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buffer = [0u8; 4096];
    while Instant::now() < deadline {
        // SAFETY: reads into a buffer of the length given.
        let read = unsafe { nix::libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
        if read > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

#[test]
fn a_store_renamed_away_mid_look_never_reads_as_no_zombie() {
    let node = Node::new();
    let [root, _, _, config] = support::hand_made_paths(node.dir.path());
    std::fs::write(&config, "version = 2\n").unwrap();
    // A container CRI calls running whose process is gone: a zombie.
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let started = chrono::Utc::now().timestamp_nanos_opt().unwrap() - 60_000_000_000;
    let store = root.join("io.containerd.grpc.v1.cri/containers");
    let container = store.join("a".repeat(64));
    std::fs::create_dir_all(&container).unwrap();
    std::fs::write(
        container.join("status"),
        format!(
            r#"{{"Version":"v1","Pid":{pid},"CreatedAt":{},"StartedAt":{started},"FinishedAt":0,"ExitCode":0,"Reason":"","Message":""}}"#,
            started - 100_000_000
        ),
    )
    .unwrap();
    let served = node.serve(&["--interval", "1s", "--settle", "1s"]);
    let zombie = "nodectl_findings{command=\"check\",kind=\"zombie\"}";
    let zombie_ok = "nodectl_check_ok{command=\"check\",kind=\"zombie\"}";
    let runs = "nodectl_checks_total{command=\"check\"}";
    let first = served.first_metrics(Duration::from_secs(30));
    assert_eq!(value(&first, zombie), 1.0, "{first}");

    // The next look's first reading of the status file, then the store
    // moved away (as an unmounted root leaves it) before its second look.
    // SAFETY: plain system calls on a descriptor this test owns.
    let watch = unsafe { nix::libc::inotify_init1(nix::libc::IN_NONBLOCK | nix::libc::IN_CLOEXEC) };
    assert!(watch >= 0);
    let path = std::ffi::CString::new(container.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: as above; the path is a NUL-terminated string.
    assert!(unsafe { nix::libc::inotify_add_watch(watch, path.as_ptr(), nix::libc::IN_OPEN) } >= 0);
    assert!(
        opened_within(watch, Duration::from_secs(30)),
        "no look read the status file; stderr:\n{}",
        served.log()
    );
    std::fs::rename(&store, root.join("moved-away")).unwrap();
    // SAFETY: closes the descriptor this test opened.
    unsafe { nix::libc::close(watch) };
    let runs_before = value(&served.get("/metrics").body, runs);

    // Every scrape until two more looks have ended: never a zombie 0.
    let deadline = Instant::now() + Duration::from_secs(60);
    let last = loop {
        let metrics = served.get("/metrics").body;
        assert!(
            !metrics.lines().any(|l| l == format!("{zombie} 0")),
            "blind, yet all clear:\n{metrics}"
        );
        if value(&metrics, runs) >= runs_before + 2.0 {
            break metrics;
        }
        assert!(Instant::now() < deadline, "{}", served.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(value(&last, zombie_ok), 0.0, "{last}");
}
