//! Whose mount table and whose processes decide a cleanup, on a real
//! containerd (issue 43):
//!
//! - nodectl run in a mount namespace split off (`unshare -m --propagation
//!   private`) before a rootfs leaked in containerd's: the leak is found in
//!   containerd's own table (`/proc/<its pid>/mountinfo`), its bundle is an
//!   orphan with its mount said, and neither `--remove-bundles --yes` nor
//!   `--unmount` (refused with the `nsenter` line to run) touches it; with
//!   `--mountinfo` naming nodectl's own table, which lacks the leak, the
//!   fresh look before acting still reads containerd's and removes nothing.
//!   The mount in containerd's namespace is there afterwards. (Before,
//!   the bundle looked empty, was removed, and the removal detached the
//!   mount in containerd's namespace.)
//! - An unprivileged user's `sleep`, run through a symlink named
//!   `containerd-shim-runc-v2`, beside a leaked mount and its bundle: it is
//!   no shim (listed as an impostor running as that user, no leaked shim),
//!   and `--unmount --remove-bundles --yes` cleans both as if it were not
//!   there. (Before, every cleanup refused: "shim pid N has no -id".)

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{cleanup_rows as cleanups, ids_of_kind, TestBed};

/// Both cleanups of `leaked-mounts`, acting.
const CLEAN: &[&str] = support::LEAKED_MOUNTS_CLEAN;

fn row(action: &str, id: &str, outcome: &str) -> (String, String, String) {
    (action.to_string(), id.to_string(), outcome.to_string())
}

/// Whether `/proc/<pid>/mountinfo` has a mount exactly at `point`.
fn mounted_in(pid: i32, point: &Path) -> bool {
    let table = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let point = point.to_string_lossy();
    table
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(point.as_ref()))
}

/// A process in a mount namespace of its own, split off from this one
/// (private propagation: nothing mounted here later reaches it), for
/// nodectl to run in with `nsenter`. Killed when dropped.
struct SplitNamespace {
    child: Child,
}

impl SplitNamespace {
    fn start() -> SplitNamespace {
        let child = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sleep", "3600"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("unshare: {e}"));
        let split = SplitNamespace { child };
        let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
        let pid = split.pid().to_string();
        assert!(
            support::wait_until(Duration::from_secs(10), || {
                // unshare execs sleep once the namespace is its own.
                ns(&pid).is_some_and(|theirs| Some(theirs) != ns("self"))
                    && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.trim() == "sleep")
            }),
            "the split mount namespace did not start"
        );
        split
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// nodectl with `args` on `bed`, run inside this namespace.
    fn nodectl(&self, bed: &TestBed, args: &[&str]) -> std::process::Output {
        let paths = [bed.root(), bed.state(), bed.address(), bed.config_path()];
        let inner = support::nodectl_command(args, paths);
        let mut command = Command::new("nsenter");
        command
            .args(["-t", &self.pid().to_string(), "-m", "--"])
            .arg(inner.get_program())
            .args(inner.get_args())
            .stdin(Stdio::null());
        support::run_bounded(&mut command, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("nodectl {args:?} in the split namespace: {e}"))
    }
}

impl Drop for SplitNamespace {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rootfs_leaked_in_containerds_namespace_is_seen_and_kept_from_another() {
    let test = "a_rootfs_leaked_in_containerds_namespace_is_seen_and_kept_from_another";
    // nodectl proves the daemon by PID 1's namespaces (the host's); where
    // PID 1 cannot be read (this machine's), by its own, and from a split
    // namespace it then proves none and acts on nothing. So the test runs
    // again as a child of a pid namespace's init, a shell that stands for
    // the host (readable, its mount namespace the bed's).
    if !support::in_own_pid_namespace(test, false) {
        return;
    }
    let Some(bed) = TestBed::start(test).await else {
        return;
    };
    let daemon = bed.containerd_pid();
    let ns = |pid: String| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).unwrap();
    for pid in ["self", "1"] {
        assert_eq!(
            ns(daemon.to_string()),
            ns(pid.to_string()),
            "the bed's containerd runs in the mount namespace of {pid}"
        );
    }
    // A live pod: its shim shares containerd's mount namespace (what
    // nodectl requires of a shim), and none of its mounts is touched.
    let healthy = bed
        .run_pod("healthy", "app", &["/bin/sh", "-c", "sleep 3600"])
        .await;
    let shim = bed.shim_pid(&healthy.sandbox_id);
    assert_eq!(
        ns(shim.to_string()),
        ns(daemon.to_string()),
        "runc's shim runs in containerd's mount namespace"
    );
    let live_mounts = || {
        let mut points = support::mounts_below(bed.state());
        points.retain(|p| p.to_string_lossy().contains(&healthy.sandbox_id));
        points
    };
    let live_before = live_mounts();
    assert!(!live_before.is_empty());
    // Split off first; then the rootfs leaks in containerd's namespace.
    let split = SplitNamespace::start();
    let unknown = support::unknown_id('d');
    let rootfs = bed.leak_rootfs(&unknown);
    let bundle = rootfs.parent().unwrap().to_path_buf();
    assert!(mounted_in(daemon, &rootfs));
    assert!(
        !mounted_in(split.pid(), &rootfs),
        "the split namespace does not see the leak"
    );

    // Found through containerd's own table; its bundle's mount said.
    let output = split.nodectl(&bed, &["leaked-mounts", "-o", "json"]);
    let doc = support::report(&output);
    eprintln!(
        "{test}: {}: findings {:#}, gaps {:#}, paths {:#}",
        bed.containerd_version(),
        doc["findings"],
        doc["gaps"],
        doc["paths"]
    );
    support::assert_matches_schema(&doc);
    assert_eq!(output.status.code(), Some(1), "{doc:#}");
    assert_eq!(
        ids_of_kind(&doc, "leaked-mount"),
        std::slice::from_ref(&unknown),
        "{doc:#}"
    );
    let bundles = support::findings_of_kind(&doc, "orphan-bundle");
    assert_eq!(bundles.len(), 1, "{doc:#}");
    assert_eq!(bundles[0]["evidence"]["has_mounts"], true, "{doc:#}");
    // So does `check`, which finds the daemon within its look.
    let output = split.nodectl(&bed, &["check", "--settle", "0s", "-o", "json"]);
    let doc = support::report(&output);
    assert_eq!(
        ids_of_kind(&doc, "leaked-mount"),
        std::slice::from_ref(&unknown),
        "{doc:#}"
    );

    // Removing bundles: refused while the rootfs is mounted in
    // containerd's namespace. Unmounting: refused from another namespace,
    // with the line that runs nodectl in containerd's.
    let output = split.nodectl(
        &bed,
        &["leaked-mounts", "--remove-bundles", "--yes", "-o", "json"],
    );
    let doc = support::report(&output);
    assert_eq!(
        cleanups(&doc),
        [row("remove-bundle", &unknown, "refused")],
        "{doc:#}"
    );
    let detail = doc["cleanups"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("still mounted below it"), "{detail}");
    let output = split.nodectl(&bed, CLEAN);
    let doc = support::report(&output);
    assert_eq!(
        cleanups(&doc),
        [
            row("unmount", &unknown, "refused"),
            row("remove-bundle", &unknown, "refused"),
        ],
        "{doc:#}"
    );
    let detail = doc["cleanups"][0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("another mount namespace")
            && detail.contains(&format!("nsenter -t {daemon} -m")),
        "{detail}"
    );

    // Given nodectl's own table, which lacks the leak, the bundle looks
    // empty to the scan; the look before acting reads containerd's.
    let output = split.nodectl(
        &bed,
        &[
            "leaked-mounts",
            "--remove-bundles",
            "--yes",
            "--mountinfo",
            "/proc/self/mountinfo",
            "-o",
            "json",
        ],
    );
    let doc = support::report(&output);
    assert!(ids_of_kind(&doc, "leaked-mount").is_empty(), "{doc:#}");
    assert_eq!(
        cleanups(&doc),
        [row("remove-bundle", &unknown, "refused")],
        "{doc:#}"
    );
    assert!(
        mounted_in(daemon, &rootfs) && bundle.is_dir(),
        "the mount in containerd's namespace and its bundle stay"
    );

    // From containerd's namespace, both are cleaned.
    let output = bed.nodectl(CLEAN);
    let doc = support::report(&output);
    assert_eq!(
        cleanups(&doc),
        [
            row("unmount", &unknown, "unmounted"),
            row("remove-bundle", &unknown, "removed"),
        ],
        "{doc:#}"
    );
    assert!(!mounted_in(daemon, &rootfs) && !bundle.exists());
    assert_eq!(live_mounts(), live_before, "the live pod's mounts stay");
}

/// What runs through the symlink named like runc's shim.
#[derive(Clone, Copy)]
enum Named {
    /// root's `sleep`: no socket.
    Sleep,
    /// root's perl, listening on a unix socket in its temp dir (not where
    /// a shim's is).
    Listener,
}

/// A process of `nobody` running root's `sleep` through a symlink named
/// like runc's shim: comm `containerd-shim`, argv[0] the symlink, no `-id`;
/// its executable root's, its namespaces the host's. Killed when dropped.
struct UsersShimNamedSleep {
    child: Child,
    _dir: tempfile::TempDir,
}

impl UsersShimNamedSleep {
    /// As `uid` (65534: a user; 0: root, in the host's namespaces, where
    /// only its socket, none or one elsewhere, tells it from a shim).
    fn start(uid: u32, named: Named) -> UsersShimNamedSleep {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let link = dir.path().join("containerd-shim-runc-v2");
        let socket = dir.path().join("listening.sock");
        let (program, args) = match named {
            Named::Sleep => (which("sleep"), vec!["3600".to_string()]),
            // perl-base, Essential on Debian: always there, and no
            // launcher script in its place on PATH.
            Named::Listener => (
                PathBuf::from("/usr/bin/perl"),
                vec![
                    "-MIO::Socket::UNIX".to_string(),
                    "-e".to_string(),
                    "my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $ARGV[0], Listen => 1) \
                     or die $!; sleep 3600"
                        .to_string(),
                    socket.display().to_string(),
                ],
            ),
        };
        std::os::unix::fs::symlink(&program, &link).unwrap();
        let id = uid.to_string();
        let child = Command::new("setpriv")
            .args(["--reuid", &id, "--regid", &id, "--clear-groups"])
            .arg(&link)
            .args(&args)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("setpriv: {e}"));
        let pid = child.id();
        let started = support::wait_until(Duration::from_secs(10), || {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "containerd-shim")
                && (matches!(named, Named::Sleep) || socket.exists())
        });
        assert!(started, "the user's shim-named sleep did not start");
        if let Named::Listener = named {
            // Listening, as the kernel says (Flags __SO_ACCEPTCON), or
            // this test proves nothing.
            let listening = support::wait_until(Duration::from_secs(10), || {
                std::fs::read_to_string(format!("/proc/{pid}/net/unix")).is_ok_and(|table| {
                    table.lines().any(|row| {
                        let fields: Vec<&str> = row.split_whitespace().collect();
                        fields.get(3) == Some(&"00010000")
                            && fields.get(7) == Some(&socket.to_str().unwrap())
                    })
                })
            });
            assert!(listening, "root's shim-named perl does not listen");
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(
            status
                .lines()
                .any(|l| l.starts_with(&format!("Uid:\t{uid}\t{uid}"))),
            "{status}"
        );
        UsersShimNamedSleep { child, _dir: dir }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for UsersShimNamedSleep {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(program: &str) -> PathBuf {
    let output = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .unwrap();
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    std::fs::canonicalize(&path).unwrap_or(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_process_named_like_a_shim_blocks_no_cleanup() {
    let test = "a_users_process_named_like_a_shim_blocks_no_cleanup";
    if let Some(bed) = TestBed::start(test).await {
        process_named_like_a_shim_blocks_no_cleanup(test, &bed, 65534, Named::Sleep, 'c');
    }
}

/// Root's own: in the host's namespaces, from root's binary, without `-id`
/// (all a shim has, but the socket it serves on): before, every cleanup
/// refused "shim pid N has no -id" for as long as it ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_process_named_like_a_shim_without_a_socket_blocks_no_cleanup() {
    let test = "roots_process_named_like_a_shim_without_a_socket_blocks_no_cleanup";
    if let Some(bed) = TestBed::start(test).await {
        process_named_like_a_shim_blocks_no_cleanup(test, &bed, 0, Named::Sleep, 'd');
    }
}

/// Root's own, as above, listening on a unix socket of its own (not in
/// `/run/containerd/s/`, where the one shim without `-id`, runtime v1's,
/// serves): before, every cleanup refused "shim pid N has no -id".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_process_named_like_a_shim_listening_elsewhere_blocks_no_cleanup() {
    let test = "roots_process_named_like_a_shim_listening_elsewhere_blocks_no_cleanup";
    if let Some(bed) = TestBed::start(test).await {
        process_named_like_a_shim_blocks_no_cleanup(test, &bed, 0, Named::Listener, 'f');
    }
}

fn process_named_like_a_shim_blocks_no_cleanup(
    test: &str,
    bed: &TestBed,
    uid: u32,
    named: Named,
    fill: char,
) {
    let unknown = support::unknown_id(fill);
    let rootfs = bed.leak_rootfs(&unknown);
    let bundle = rootfs.parent().unwrap().to_path_buf();
    let user = UsersShimNamedSleep::start(uid, named);

    // Not a shim: listed as what it is, never a leaked one.
    let output = bed.nodectl(&["shims", "-o", "json"]);
    let doc = support::report(&output);
    let rows: Vec<&Value> = doc["shims"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["pid"] == user.pid())
        .collect();
    eprintln!("{test}: {}: {rows:#?}", bed.containerd_version());
    assert_eq!(rows.len(), 1, "{doc:#}");
    assert_eq!(rows[0]["identity"], "impostor", "{doc:#}");
    assert_eq!(rows[0]["ours"], false, "{doc:#}");
    let why = rows[0]["reason"].as_str().unwrap_or_default();
    assert!(why.contains("not a containerd-shim binary"), "{why}");
    let doc = support::report(&bed.nodectl(&["leaked-shims", "-o", "json"]));
    assert!(
        !doc["findings"]
            .to_string()
            .contains(&format!("{}", user.pid())),
        "{doc:#}"
    );

    // The cleanup goes on as if it were not there.
    let output = bed.nodectl(CLEAN);
    let doc = support::report(&output);
    eprintln!("{test}: cleaned: {:#}", doc["cleanups"]);
    support::assert_matches_schema(&doc);
    assert_eq!(
        cleanups(&doc),
        [
            row("unmount", &unknown, "unmounted"),
            row("remove-bundle", &unknown, "removed"),
        ],
        "{doc:#}"
    );
    assert!(!bundle.exists());
    assert!(
        support::is_running(user.pid()),
        "the user's process ran all along"
    );
}
