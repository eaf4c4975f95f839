//! What nodectl does with hostile input, as a user meets it: flags out of
//! bounds are usage errors (never a panic, never a wrap), `collect` writes a
//! private archive without following links or clobbering its inputs and
//! with only the config keys it keeps (no credential), `check --from`
//! refuses an archive no node could have written before it costs memory,
//! paths of any bytes are reported whole, and tenant strings reach no
//! terminal raw and no output unbounded.
//!
//! Issue 16's cases, and where each is tested: 1 forged shims
//! (`impostor_real`; unit tests in `shim_proof`, `leaked_shim`,
//! `shim_blocked`, `act::kill`), 2 huge tenant strings
//! (`forged_shims_with_huge_arguments_leave_every_output_small`), 3 terminal
//! injection (`tenant_strings_reach_no_terminal_raw_in_any_text_output`),
//! 4 `collect` (`collect_*`), 5 `--address` spelling (`impostor_real`),
//! 6 paths that are not UTF-8 (`a_root_that_is_not_utf8_*`,
//! `a_shim_whose_working_directory_is_not_utf8_*`), 7 durations and
//! 9 identifiers (`out_of_bounds_flags_are_usage_errors_not_panics`; dry
//! run and kill agree: `act::kill`; `TERM=dumb`: `cli`), 8 `--from` memory
//! (`check_from_*`).

mod support;

use std::fs;
use std::io::Write;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Node {
    dir: tempfile::TempDir,
}

/// A containerd config (version 2, with version 3's and 1.x's CRI tables
/// too) holding every place containerd's docs put a credential or a key
/// file (docs/cri/registry.md, docs/cri/config.md, docs/stream_processors.md,
/// docs/man/containerd-config.toml.5.md) and a plugin's own key; each
/// secret value holds `SECRET`. `<dir>` is the node's directory, where the
/// files it names are (each holding `SECRET` too).
const CONFIG_WITH_EVERY_SECRET: &str = r#"version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
imports = ["<dir>imported.toml"]

[grpc]
address = "/run/containerd/containerd.sock"
tcp_address = "0.0.0.0:10010"
tcp_tls_ca = "<dir>ca.crt"
tcp_tls_cert = "<dir>tls.crt"
tcp_tls_key = "<dir>tls.key"

[ttrpc]
address = "/run/containerd/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "registry.k8s.io/pause:3.9"

[plugins."io.containerd.grpc.v1.cri".x509_key_pair_streaming]
tls_cert_file = "<dir>tls.crt"
tls_key_file = "<dir>stream.key"

[plugins."io.containerd.grpc.v1.cri".containerd]
snapshotter = "overlayfs"
default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
SystemdCgroup = true

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
runtime_type = "io.containerd.kata.v2"

[plugins."io.containerd.grpc.v1.cri".registry]
config_path = "/etc/containerd/certs.d"

[plugins."io.containerd.grpc.v1.cri".registry.headers]
Authorization = ["Bearer SECRET-header-bearer"]
X-Custom = ["SECRET-header-custom"]

[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
endpoint = ["https://SECRET-mirror-user:SECRET-mirror-pass@mirror.example"]

[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example".auth]
username = "SECRET-auth-username"
password = "SECRET-auth-password"
auth = """SECRET-auth-line1
SECRET-auth-line2"""
identitytoken = 'SECRET-auth-identitytoken'

[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example".tls]
ca_file = "<dir>ca.crt"
cert_file = "<dir>client.crt"
key_file = "<dir>client.key"
insecure_skip_verify = false

[plugins."io.containerd.grpc.v1.cri".registry.auths."https://gcr.io"]
username = "SECRET-auths-username"
password = "SECRET-auths-password"
auth = "SECRET-auths-auth"
identitytoken = "SECRET-auths-identitytoken"

[plugins."io.containerd.cri.v1.images".registry.configs."gcr.io".auth]
username = "_json_key"
password = 'SECRET-v3-json-key'

[plugins."io.containerd.cri.v1.images".registry.headers]
Authorization = ["Basic SECRET-v3-header"]

[plugins."io.containerd.internal.v1.vendor"]
api_key = "SECRET-vendor-api-key"

[stream_processors."io.containerd.ocicrypt.decoder.v1.tar.gzip"]
accepts = ["application/vnd.oci.image.layer.v1.tar+gzip+encrypted"]
returns = "application/vnd.oci.image.layer.v1.tar+gzip"
path = "ctd-decoder"
args = ["--decryption-keys-path", "SECRET-processor-arg"]
env = ["OCICRYPT_KEYPROVIDER_CONFIG=SECRET-processor-env"]

[proxy_plugins.stargz]
type = "snapshot"
address = "http://SECRET-proxy-user:SECRET-proxy-pass@stargz.example:8080"
"#;

impl Node {
    fn new() -> Node {
        let dir = support::hand_made_node();
        let at = |name: &str| dir.path().join(name).display().to_string();
        // The files a config names: never read, so never archived.
        for name in [
            "tls.crt",
            "tls.key",
            "stream.key",
            "ca.crt",
            "client.crt",
            "client.key",
            "imported.toml",
        ] {
            fs::write(at(name), format!("SECRET-file-{name}\n")).unwrap();
        }
        fs::write(
            dir.path().join("config.toml"),
            CONFIG_WITH_EVERY_SECRET.replace("<dir>", &at("")),
        )
        .unwrap();
        Node { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn run(&self, args: &[&str]) -> Output {
        support::hand_made_command(self.dir.path(), args)
            .output()
            .unwrap()
    }
}

#[test]
fn out_of_bounds_flags_are_usage_errors_not_panics() {
    let node = Node::new();
    for args in [
        &["check", "--timeout", "9223372036854775807s"][..],
        &["check", "--timeout", "11m"],
        &["zombies", "--late-after", "10000000000h"],
        &["zombies", "--since", "11years"],
        &["zombies", "--settle", "2m"],
        &[
            "leaked-shims",
            "--kill",
            "--yes",
            "--grace",
            "1000000000000s",
        ],
        &["zombies", "-n", "../../../../etc"],
        &["zombies", "-n", "k8s.io/../../x"],
    ] {
        let output = node.run(args);
        let err = support::stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("error: invalid value"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // The bounds themselves are accepted.
    let output = node.run(&[
        "zombies",
        "--late-after",
        "3652days",
        "--settle",
        "1m",
        "-n",
        "a",
    ]);
    assert_ne!(
        output.status.code(),
        Some(101),
        "{}",
        support::stderr(&output)
    );
    assert!(
        !support::stderr(&output).contains("invalid value"),
        "{}",
        support::stderr(&output)
    );
}

/// The `snapshots.json` a `collect` archive holds.
fn snapshots_json_in(archive: &Path) -> Vec<u8> {
    support::archive_files(archive)
        .into_iter()
        .find(|(name, ..)| name == "snapshots.json")
        .unwrap_or_else(|| panic!("no snapshots.json in {}", archive.display()))
        .1
}

/// An archive's bytes as the tar stream inside it, every entry and header.
fn unpacked(archive: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(fs::File::open(archive).unwrap()),
        &mut bytes,
    )
    .unwrap();
    bytes
}

#[test]
fn collect_archives_no_secret_of_the_config_only_the_keys_it_keeps_and_exits_0_with_the_api_down() {
    let node = Node::new();
    let out = node.path("evidence.tar.gz");
    let output = node.run(&["collect", out.to_str().unwrap()]);
    let err = support::stderr(&output);
    // containerd is down (nothing listens): the archive is still written,
    // and the gap goes to stderr and into the archive.
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("containerd-api"), "{err}");
    let mode = fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "archive mode {mode:o}");

    // No secret, nor the content of a file the config names, anywhere in
    // the archive (nor on stderr).
    let bytes = unpacked(&out);
    let found: Vec<String> = bytes
        .windows(6)
        .enumerate()
        .filter(|(_, w)| *w == b"SECRET")
        .map(|(at, _)| String::from_utf8_lossy(&bytes[at..(at + 40).min(bytes.len())]).into_owned())
        .collect();
    assert!(found.is_empty(), "archived: {found:#?}");
    assert!(!err.contains("SECRET"), "{err}");

    let files = support::archive_files(&out);
    let (_, config, config_mode) = files
        .iter()
        .find(|(name, ..)| name == "files/containerd-config.toml")
        .expect("config archived");
    assert_eq!(config_mode & 0o077, 0);
    let config = String::from_utf8(config.clone()).unwrap();
    for kept in [
        "version = 2",
        "root = \"/var/lib/containerd\"",
        "state = \"/run/containerd\"",
        "address = \"/run/containerd/containerd.sock\"",
        "address = \"/run/containerd/containerd.sock.ttrpc\"",
        "sandbox_image = \"registry.k8s.io/pause:3.9\"",
        "snapshotter = \"overlayfs\"",
        "default_runtime_name = \"runc\"",
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"",
        "SystemdCgroup = true",
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.kata]\nruntime_type = \"io.containerd.kata.v2\"",
        "config_path = \"/etc/containerd/certs.d\"",
        "[proxy_plugins.stargz]\ntype = \"snapshot\"",
    ] {
        assert!(config.contains(kept), "{kept} not kept:\n{config}");
    }
    // How many keys were dropped, in the archive and on stderr: every key
    // of the config but the 15 kept.
    assert!(
        config.contains("# 30 other keys were dropped; their values are not in this archive."),
        "{config}"
    );
    assert!(
        err.contains("archived with the 15 keys nodectl keeps; 30 other keys dropped"),
        "{err}"
    );
}

#[test]
fn collect_never_replaces_a_file_unless_forced_and_never_follows_a_symlink() {
    let node = Node::new();
    // An existing file is an error without --force.
    let out = node.path("evidence.tar.gz");
    fs::write(&out, b"keep me").unwrap();
    let output = node.run(&["collect", out.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        support::stderr(&output)
    );
    assert!(
        support::stderr(&output).contains("--force"),
        "{}",
        support::stderr(&output)
    );
    assert_eq!(fs::read(&out).unwrap(), b"keep me");

    // A symlink planted at the output path: the target is never written,
    // with or without --force.
    let target = node.path("precious");
    fs::write(&target, b"precious").unwrap();
    let link = node.path("link.tar.gz");
    symlink(&target, &link).unwrap();
    let output = node.run(&["collect", link.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        support::stderr(&output)
    );
    let output = node.run(&["collect", "--force", link.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        support::stderr(&output)
    );
    assert_eq!(fs::read(&target).unwrap(), b"precious");
    assert!(!fs::symlink_metadata(&link).unwrap().is_symlink());

    // The config it collects is never the output, even with --force, nor
    // through a link to it.
    let config = node.path("config.toml");
    let before = fs::read(&config).unwrap();
    let output = node.run(&["collect", "--force", config.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        support::stderr(&output)
    );
    assert!(
        support::stderr(&output).contains("collected"),
        "{}",
        support::stderr(&output)
    );
    let hard = node.path("hard.tar.gz");
    fs::hard_link(&config, &hard).unwrap();
    let output = node.run(&["collect", "--force", hard.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        support::stderr(&output)
    );
    assert_eq!(fs::read(&config).unwrap(), before);
    // Nothing half-written is left behind.
    let leftovers: Vec<_> = fs::read_dir(node.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn archive_with(path: &Path, snapshots: impl std::io::Read, size: u64) {
    let file = fs::File::create(path).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    let mut header = tar::Header::new_gnu();
    header.set_size(size);
    header.set_mode(0o600);
    tar.append_data(&mut header, "snapshots.json", snapshots)
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap().flush().unwrap();
}

/// Runs `check --from`; with its peak RSS (KiB) where it can be measured.
fn check_from(path: &Path) -> (Output, Option<u64>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nodectl"));
    command.args(["check", "--from"]).arg(path);
    support::output_and_peak_rss(&command)
}

#[test]
fn check_from_refuses_what_no_node_writes_before_it_costs_memory() {
    let dir = tempfile::tempdir().unwrap();
    // A gzip bomb: 600 MiB of spaces inflating from a few hundred KB; the
    // header claims 600 MiB. And one whose header lies (claims 1 KB).
    let big: u64 = 600 << 20;
    let bomb = dir.path().join("bomb.tar.gz");
    archive_with(&bomb, std::io::repeat(b' ').take_bytes(big), big);
    let (output, _) = check_from(&bomb);
    let err = support::stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("snapshots.json is larger than 256 MiB")
            && err.contains("not a nodectl evidence archive"),
        "{err}"
    );

    // Millions of tiny values: each costs far more parsed than as text.
    let values = dir.path().join("values.tar.gz");
    let mut json = b"{\"junk\": [".to_vec();
    json.extend(std::iter::repeat_n(&b"\"\","[..], 6_000_000).flatten());
    json.extend_from_slice(b"\"\"]}");
    let len = json.len() as u64;
    archive_with(&values, &json[..], len);
    let (output, rss_kib) = check_from(&values);
    let err = support::stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("not a nodectl evidence archive"), "{err}");
    if let Some(rss_kib) = rss_kib {
        eprintln!("millions of tiny values refused at {rss_kib} KiB peak RSS");
        assert!(rss_kib < 100 << 10, "peak RSS {rss_kib} KiB");
    }
}

trait TakeBytes: std::io::Read + Sized {
    fn take_bytes(self, n: u64) -> std::io::Take<Self> {
        std::io::Read::take(self, n)
    }
}
impl<R: std::io::Read> TakeBytes for R {}

#[test]
fn check_from_stops_inflating_an_archive_that_hides_its_snapshots_behind_a_bomb() {
    let node = Node::new();
    let real = node.path("real.tar.gz");
    let output = node.run(&["collect", real.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        support::stderr(&output)
    );
    let snapshots = snapshots_json_in(&real);

    // Valid snapshots behind 400 MiB of zeros (a few hundred KB of gzip):
    // nodectl writes snapshots.json first, so whatever inflates this far
    // before it is no evidence, and inflating it all is only time lost.
    let bomb = node.path("front-bomb.tar.gz");
    let file = fs::File::create(&bomb).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    let padding: u64 = 400 << 20;
    let mut header = tar::Header::new_gnu();
    header.set_size(padding);
    header.set_mode(0o600);
    tar.append_data(
        &mut header,
        "files/padding",
        std::io::repeat(0).take_bytes(padding),
    )
    .unwrap();
    let mut header = tar::Header::new_gnu();
    header.set_size(snapshots.len() as u64);
    header.set_mode(0o600);
    tar.append_data(&mut header, "snapshots.json", &snapshots[..])
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap().flush().unwrap();

    let started = std::time::Instant::now();
    let (output, rss_kib) = check_from(&bomb);
    let took = started.elapsed();
    if let Some(rss_kib) = rss_kib {
        assert!(rss_kib < 100 << 10, "peak RSS {rss_kib} KiB");
    }
    let err = support::stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no snapshots.json within its first 257 MiB")
            && err.contains("not a nodectl evidence"),
        "{err}"
    );
    eprintln!("front bomb refused in {took:.2?}, peak RSS {rss_kib:?} KiB");
}

#[test]
fn check_from_refuses_a_link_or_device_named_snapshots_json() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, entry_type) in [
        ("symlink", tar::EntryType::Symlink),
        ("link", tar::EntryType::Link),
        ("char", tar::EntryType::Char),
        ("fifo", tar::EntryType::Fifo),
    ] {
        let path = dir.path().join(format!("{kind}.tar.gz"));
        let file = fs::File::create(&path).unwrap();
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::fast(),
        ));
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(entry_type);
        header.set_size(0);
        header.set_mode(0o644);
        if entry_type.is_symlink() || entry_type.is_hard_link() {
            tar.append_link(&mut header, "snapshots.json", "/etc/passwd")
                .unwrap();
        } else {
            tar.append_data(&mut header, "snapshots.json", std::io::empty())
                .unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap().flush().unwrap();
        let (output, _) = check_from(&path);
        let err = support::stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{kind}: {err}");
        assert!(
            err.contains(&format!("snapshots.json is a {kind} entry, not a file")),
            "{kind}: {err}"
        );
    }
}

#[test]
fn check_from_ends_at_its_deadline_whatever_the_archive_costs() {
    use nodectl::archive::Archived;
    use nodectl::model::{Located, Mount, Origin, Paths, Snapshot};
    let dir = tempfile::tempdir().unwrap();
    // An archive that costs to read and check: 100,000 mounts, each a
    // rootfs of a task nothing knows of (a finding each).
    let at = |path: &str| Located {
        path: path.into(),
        origin: Origin::Default,
    };
    let paths = Paths::at(
        at("/var/lib/containerd"),
        at("/run/containerd"),
        at("/run/containerd/containerd.sock"),
    );
    let mut first = Snapshot::empty(1, paths, "k8s.io".into());
    first.mounts_read = true;
    first.mounts = (0..100_000)
        .map(|n| Mount {
            mount_point: format!(
                "/run/containerd/io.containerd.runtime.v2.task/k8s.io/{n:064x}/rootfs"
            )
            .into(),
            fs_type: "overlay".into(),
            ..Mount::default()
        })
        .collect();
    let evidence = Archived {
        nodectl_version: env!("CARGO_PKG_VERSION").into(),
        hostname: None,
        first,
        second: None,
        copies_left_out: Vec::new(),
    };
    let json = serde_json::to_vec(&evidence).unwrap();
    let path = dir.path().join("costly.tar.gz");
    archive_with(&path, &json[..], json.len() as u64);
    // Under a deadline of 20 × 5 ms: given up at it, with exit 2.
    let started = std::time::Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(["check", "--timeout", "5ms", "--from"])
        .arg(&path)
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = support::stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("deadline passed (100ms"), "{err}");
    assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
    // With the default (1 min), the same archive is read and checked.
    let (output, _) = check_from(&path);
    let err = support::stderr(&output);
    assert!(!err.contains("deadline"), "{err}");
    assert!(matches!(output.status.code(), Some(0 | 1)), "{err}");
}

/// `bytes` as a path (Linux paths are bytes, not text).
fn bytes_path(dir: &Path, name: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    dir.join(std::ffi::OsStr::from_bytes(name))
}

fn check_from_json(archive: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodectl"))
        .args(["check", "-o", "json", "--from"])
        .arg(archive)
        .output()
        .unwrap()
}

fn hex(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_root_that_is_not_utf8_is_reported_whole_in_json_and_escaped_in_text() {
    let node = Node::new();
    let root = bytes_path(node.dir.path(), b"root\xff");
    fs::rename(node.path("root"), &root).unwrap();
    let [_, state, address, config] = support::hand_made_paths(node.dir.path());
    let run = |args: &[&str]| {
        support::nodectl_command(
            args,
            [&root, &state, &address, &config].map(PathBuf::as_path),
        )
        .args(["--timeout", "1s"])
        .output()
        .unwrap()
    };

    // Was: 199 bytes of JSON ending in `"path": `, exit 2. Now the whole
    // report (no containerd here: exit 2 with its gap), the path exact.
    let output = run(&["check", "-o", "json"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        support::stderr(&output)
    );
    let doc = support::report(&output);
    let path = &doc["paths"]["root"]["path"];
    assert_eq!(path["bytes_hex"], hex(&root), "{path}");
    assert!(
        path["lossy"].as_str().unwrap().ends_with("root\u{FFFD}"),
        "{path}"
    );

    // Table and npd show it escaped, never the raw byte.
    for args in [&["check"][..], &["check", "-o", "npd"]] {
        let output = run(args);
        let shown = String::from_utf8(output.stdout.clone())
            .unwrap_or_else(|_| panic!("{args:?}: raw bytes on stdout: {output:?}"));
        if args.len() == 1 {
            assert!(shown.contains("root\\xff"), "{args:?}: {shown}");
        }
    }

    // Was: "path contains invalid UTF-8 characters" and a 35-byte corrupt
    // archive. Now the archive is whole and reads back with the same bytes.
    let archive = node.path("evidence.tar.gz");
    let output = run(&["collect", archive.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        support::stderr(&output)
    );
    let output = check_from_json(&archive);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        support::stderr(&output)
    );
    let doc = support::report(&output);
    assert_eq!(doc["paths"]["root"]["path"]["bytes_hex"], hex(&root));
}

#[test]
fn a_shim_whose_working_directory_is_not_utf8_is_collected_whole() {
    let node = Node::new();
    // A process named like a shim, started from a directory whose name is
    // not UTF-8 (a tenant can make one anywhere it can write).
    let cwd = bytes_path(node.dir.path(), b"\xff\xfe cwd");
    fs::create_dir(&cwd).unwrap();
    let exe = node.path("containerd-shim-runc-v2");
    fs::copy("/bin/sh", &exe).unwrap();
    let mut shim = support::spawn_fresh_executable(
        Command::new(&exe)
            .args(["-c", "read line", "-namespace", "k8s.io", "-id", "fake"])
            .arg("-address")
            .arg(node.path("nothing-listens.sock"))
            .current_dir(&cwd)
            .stdin(std::process::Stdio::piped()),
    );
    // Until the shell has exec'd and reads its pipe: its cwd is what we set.
    let pid = shim.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fs::read_link(format!("/proc/{pid}/cwd")).ok().as_deref() != Some(cwd.as_path()) {
        assert!(std::time::Instant::now() < deadline, "shim never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    let archive = node.path("evidence.tar.gz");
    let output = node.run(&["collect", archive.to_str().unwrap()]);
    let _ = shim.kill();
    let _ = shim.wait();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        support::stderr(&output)
    );
    let snapshots = snapshots_json_in(&archive);
    let snapshots: serde_json::Value = serde_json::from_slice(&snapshots).unwrap();
    let shim = snapshots["first"]["shims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["pid"] == pid)
        .unwrap_or_else(|| panic!("shim {pid} not collected: {snapshots}"));
    assert_eq!(shim["cwd"]["bytes_hex"], hex(&cwd), "{shim}");
    // Read whole: a report on stdout (exit 2 here is the hand-made node's
    // missing containerd, a gap; an unreadable archive prints no report).
    let output = check_from_json(&archive);
    assert_ne!(
        output.status.code(),
        Some(101),
        "{}",
        support::stderr(&output)
    );
    support::report(&output);
}

/// Processes that look like shims (a copy of sh named
/// `containerd-shim-runc-v2`, reading a pipe), each with the arguments
/// given after `-c 'read line'`; ended on drop.
struct FakeShims {
    children: Vec<std::process::Child>,
}

impl FakeShims {
    fn start(node: &Node, argvs: impl IntoIterator<Item = Vec<String>>) -> FakeShims {
        let exe = node.path("containerd-shim-runc-v2");
        if !exe.exists() {
            fs::copy("/bin/sh", &exe).unwrap();
        }
        // spawn returns once the exec is done: the argv is in procfs.
        let children = argvs
            .into_iter()
            .map(|argv| {
                support::spawn_fresh_executable(
                    Command::new(&exe)
                        .args(["-c", "read line"])
                        .args(argv)
                        .stdin(std::process::Stdio::piped()),
                )
            })
            .collect();
        FakeShims { children }
    }
}

impl Drop for FakeShims {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What a tenant wrote to a terminal it does not own: a title change, a
/// screen clear, a carriage return, a right-to-left override, Unicode's line
/// and paragraph separators and NEL (each a new line to a terminal, a log
/// viewer or kubectl's events), and a zero-width space (hides a difference).
const INJECTION: &str = "\x1b]0;owned\x07\x1b[2J\r\u{202e}\u{2028}\u{2029}\u{85}\u{200b}";

/// Every character of `text` a terminal acts on or that hides text: a
/// control (but the newline between lines), a format character (bidi, zero
/// width), a line or paragraph separator.
fn raw_controls(text: &[u8]) -> Vec<char> {
    use unicode_general_category::{get_general_category, GeneralCategory};
    String::from_utf8_lossy(text)
        .chars()
        .filter(|&c| {
            c != '\n'
                && matches!(
                    get_general_category(c),
                    GeneralCategory::Control
                        | GeneralCategory::Format
                        | GeneralCategory::LineSeparator
                        | GeneralCategory::ParagraphSeparator
                )
        })
        .collect()
}

#[test]
fn tenant_strings_reach_no_terminal_raw_in_any_text_output() {
    // Issue 16, case 3: in a shim's `-id`, a bundle annotation and a
    // status `Reason`, shown in the table header, Evidence cell, `shims`
    // table and npd line.
    let node = Node::new();
    let id = "7".repeat(64);
    let container = node.path(support::HAND_MADE_CONTAINERS).join(&id);
    fs::create_dir_all(&container).unwrap();
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let status = serde_json::json!({
        "Version": "v1", "Pid": dead, "CreatedAt": now - 61_000_000_000_i64,
        "StartedAt": now - 60_000_000_000_i64, "FinishedAt": 0, "ExitCode": 0,
        "Reason": INJECTION, "Message": INJECTION,
    });
    fs::write(container.join("status"), status.to_string()).unwrap();
    let bundle = node.path(support::HAND_MADE_BUNDLES).join(&id);
    fs::create_dir_all(&bundle).unwrap();
    let spec = serde_json::json!({"annotations": {
        "io.kubernetes.cri.sandbox-namespace": INJECTION,
        "io.kubernetes.cri.sandbox-name": INJECTION,
        "io.kubernetes.cri.container-name": INJECTION,
    }});
    fs::write(bundle.join("config.json"), spec.to_string()).unwrap();
    let _shims = FakeShims::start(
        &node,
        [vec![
            "-namespace".to_string(),
            format!("k8s.io{INJECTION}"),
            "-id".to_string(),
            format!("{id}{INJECTION}"),
            "-address".to_string(),
            node.path("nothing-listens.sock").display().to_string(),
        ]],
    );
    for args in [
        &["zombies", "--settle", "100ms"][..],
        &["check"],
        &["check", "-o", "wide"],
        &["check", "-o", "npd"],
        &["shims"],
        &["shims", "-o", "wide"],
        &["leaked-shims"],
    ] {
        let output = node.run(args);
        for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
            assert_eq!(
                raw_controls(bytes),
                Vec::<char>::new(),
                "{args:?} {stream}: {}",
                String::from_utf8_lossy(bytes)
            );
        }
        let shown = String::from_utf8_lossy(&output.stdout);
        assert!(
            // The narrow shims list has no namespace column: `-o wide` has.
            shown.contains("\\x1b")
                || args == ["leaked-shims"]
                || args == ["check", "-o", "npd"]
                || args == ["shims"],
            "{args:?}: the tenant's string is shown escaped: {shown}"
        );
    }
}

#[test]
fn forged_shims_with_huge_arguments_leave_every_output_small() {
    // Issue 16, case 2: 70 processes named like shims, each with 128 KB
    // `-namespace` and `-id` (the most a single argument may hold).
    let node = Node::new();
    let huge = |c: char, i: usize| format!("{i}-{}", c.to_string().repeat(128 * 1024 - 8));
    let _shims = FakeShims::start(
        &node,
        (0..70).map(|i| {
            vec![
                "-namespace".to_string(),
                huge('n', i),
                "-id".to_string(),
                huge('i', i),
                "-address".to_string(),
                node.path("nothing-listens.sock").display().to_string(),
            ]
        }),
    );
    let tenant = "n".repeat(64);
    let mut peak_rss_kib = Some(0);
    for (args, limit) in [
        (&["check"][..], 64 << 10),
        (&["check", "-o", "json"], 64 << 10),
        (&["check", "-o", "prometheus"], 16 << 10),
        (&["check", "-o", "npd"], 4 << 10),
        // One row per shim, each string cut at 4096 bytes.
        (&["shims", "-o", "json"], 1 << 20),
        (&["shims"], 1 << 20),
    ] {
        let started = std::time::Instant::now();
        let (output, rss_kib) =
            support::output_and_peak_rss(&support::hand_made_command(node.dir.path(), args));
        let took = started.elapsed();
        peak_rss_kib = peak_rss_kib.zip(rss_kib).map(|(a, b)| a.max(b));
        assert_ne!(
            output.status.code(),
            Some(101),
            "{}",
            support::stderr(&output)
        );
        let size = output.stdout.len();
        eprintln!("{args:?}: {size} bytes in {took:.2?}");
        assert!(size < limit, "{args:?}: {size} bytes");
        if args.contains(&"prometheus") {
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(!text.contains(&tenant), "a label holds the tenant's string");
        }
    }
    // Under the DaemonSet's 128 MiB limit, with room to spare.
    if let Some(peak_rss_kib) = peak_rss_kib {
        eprintln!("peak RSS of the largest nodectl run: {peak_rss_kib} KiB");
        assert!(peak_rss_kib < 96 << 10, "peak RSS {peak_rss_kib} KiB");
    }
}

#[test]
fn collect_archives_the_flight_recorder_as_nodectl_writes_it_and_says_when_there_is_none() {
    let node = Node::new();
    let recorder = node.path("flight-recorder.json");
    let run_collect = |name: &str, recorder: &Path| {
        let out = node.path(name);
        let output = node.run(&[
            "collect",
            out.to_str().unwrap(),
            "--recorder-file",
            recorder.to_str().unwrap(),
        ]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            support::stderr(&output)
        );
        (out, support::stderr(&output))
    };
    let recorded = |archive: &Path| {
        support::archive_files(archive)
            .into_iter()
            .find(|(name, ..)| name == "flight-recorder.json")
    };

    // No watch ran: normal, and said.
    let (out, err) = run_collect("none.tar.gz", &recorder);
    assert!(err.contains("no flight recorder file"), "{err}");
    assert!(recorded(&out).is_none());

    // What watch writes, with what it never writes beside it.
    let id = "a".repeat(64);
    fs::write(
        &recorder,
        format!(
            r#"{{"nodectl_version":"0.1.0","written_at":"2026-01-01T00:00:00.000Z","ring":256,
            "bytes_at_most":394496,"recordings":[{{"container_id":"{id}","samples":8,
            "shim_pid":4123,"samples_in_umount2":8,"in_umount2_for_at_least_seconds":38.0,
            "wchans_seen":["rwsem_down_write_slowpath"],"io_pressure_full_avg10_max":41.0,
            "token":"SECRET"}}],"SECRET":"SECRET"}}"#
        ),
    )
    .unwrap();
    let (out, err) = run_collect("recorded.tar.gz", &recorder);
    assert!(!err.contains("flight recorder"), "{err}");
    let (_, bytes, mode) = recorded(&out).expect("the ring archived");
    assert_eq!(mode & 0o077, 0);
    let ring: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let recording = &ring["recordings"][0];
    assert_eq!(recording["container_id"], id.as_str());
    assert_eq!(recording["in_umount2_for_at_least_seconds"], 38.0);
    assert_eq!(recording["wchans_seen"][0], "rwsem_down_write_slowpath");
    let unpacked = unpacked(&out);
    assert!(
        !unpacked.windows(6).any(|w| w == b"SECRET"),
        "only what nodectl writes is archived"
    );

    // Through a symlink: not read, and said.
    let link = node.path("link.json");
    symlink(&recorder, &link).unwrap();
    let (out, err) = run_collect("link.tar.gz", &link);
    assert!(err.contains("link.json: not archived"), "{err}");
    assert!(recorded(&out).is_none());
}
