//! The containerd config as `collect` archives it: rebuilt from the keys
//! that say where containerd keeps its files, which sockets it serves and
//! how CRI runs containers (an allowlist); every other key is dropped and
//! counted, its value never copied. A config holds credentials in more
//! places than a list of secret keys ever named (registry `auth` tables,
//! `headers`, mirror URLs with a password, stream processors' `env`, any
//! plugin's own keys), so the archive keeps only what it knows is safe.
//!
//! Every layout containerd has read is allowed at once (version 1's
//! `plugins.cri`, version 2's `plugins."io.containerd.grpc.v1.cri"`,
//! version 3's `plugins."io.containerd.cri.v1.images"` and `.runtime`,
//! version 4's server plugins): the kept `version` says which one applies.

/// The rebuilt config and what it left out.
#[derive(Debug, PartialEq)]
pub struct KeptConfig {
    /// TOML: a comment saying what was dropped, then the kept keys.
    pub toml: Vec<u8>,
    /// Keys with a value kept.
    pub kept: usize,
    /// Keys with a value dropped (a table counts the keys below it).
    pub dropped: usize,
}

/// `bytes` (a containerd config) with only the keys of [`kept`] whose value
/// is a plain one (a string with no URL userinfo, a number, a boolean, a
/// date, or an array of those). Parsed, not pattern-matched: a TOML string
/// can span lines or be quoted four ways. A config that is not UTF-8 or
/// does not parse is an error, and none of it is kept.
pub fn keep_config(bytes: &[u8]) -> Result<KeptConfig, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    // `message()`, not the error's Display: that quotes the line, which
    // may hold a secret.
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().to_string())?;
    let mut counts = (0, 0);
    let kept_table = rebuild(&table, &mut Vec::new(), &mut counts);
    let (kept, dropped) = counts;
    let body = toml::to_string(&kept_table).map_err(|e| e.to_string())?;
    let toml = format!(
        "# containerd's config as nodectl collect archives it: only the keys nodectl\n\
         # keeps (paths, sockets, snapshotter, CRI's sandbox image and runtimes).\n\
         # {dropped} other keys were dropped; their values are not in this archive.\n\n\
         {body}"
    );
    Ok(KeptConfig {
        toml: toml.into_bytes(),
        kept,
        dropped,
    })
}

/// The keys of `table` (at `path`) that [`kept`] allows, with a plain
/// value; counts kept and dropped keys into `counts`.
fn rebuild<'a>(
    table: &'a toml::Table,
    path: &mut Vec<&'a str>,
    counts: &mut (usize, usize),
) -> toml::Table {
    let mut out = toml::Table::new();
    for (key, value) in table {
        path.push(key);
        match value {
            toml::Value::Table(inner) => {
                let inner = rebuild(inner, path, counts);
                if !inner.is_empty() {
                    out.insert(key.clone(), toml::Value::Table(inner));
                }
            }
            _ if kept(path) && plain(value) => {
                out.insert(key.clone(), value.clone());
                counts.0 += 1;
            }
            _ => counts.1 += keys_in(value),
        }
        path.pop();
    }
    out
}

/// How many keys with a value `value` stands for: a table (or an array
/// of tables) those below it, anything else one.
fn keys_in(value: &toml::Value) -> usize {
    match value {
        toml::Value::Table(table) => table.values().map(keys_in).sum(),
        toml::Value::Array(items) if items.iter().any(toml::Value::is_table) => {
            items.iter().map(keys_in).sum()
        }
        _ => 1,
    }
}

/// A value kept as it is: no table (a kept key never holds one), and no
/// string carrying a URL's userinfo.
fn plain(value: &toml::Value) -> bool {
    match value {
        toml::Value::String(s) => !has_userinfo(s),
        toml::Value::Array(items) => items.iter().all(|v| !v.is_table() && plain(v)),
        toml::Value::Table(_) => false,
        toml::Value::Integer(_)
        | toml::Value::Float(_)
        | toml::Value::Boolean(_)
        | toml::Value::Datetime(_) => true,
    }
}

/// Whether `value` holds a URL's userinfo (`https://user:pass@mirror`): an
/// `@` in an authority, after any `://` or, with no scheme, before the
/// first `/` (`user:pass@mirror/v2`). Paths (`/run/...`) and image
/// references with a registry (`registry.k8s.io/pause@sha256:...`) have
/// none; a bare `pause@sha256:...` is taken for one, and dropped: dropping
/// errs on the safe side.
fn has_userinfo(value: &str) -> bool {
    let authority_has_at = |rest: &str| {
        rest.split(['/', '?', '#'])
            .next()
            .is_some_and(|authority| authority.contains('@'))
    };
    authority_has_at(value)
        || value
            .match_indices("://")
            .any(|(at, _)| authority_has_at(&value[at + 3..]))
}

/// The keys kept: what nodectl reads (version, root, state, the socket,
/// CRI's snapshotter) and what explains a node to whoever reads the
/// archive (the other sockets, CRI's sandbox image, runtimes and where
/// their state is, GC and snapshotter roots). Names, paths, numbers and
/// switches: none holds a credential.
fn kept(path: &[&str]) -> bool {
    match path {
        ["version" | "root" | "state" | "plugin_dir" | "imports" | "oom_score"
        | "disabled_plugins" | "required_plugins"] => true,
        ["grpc", "address" | "tcp_address" | "uid" | "gid"] => true,
        ["ttrpc" | "debug", "address" | "uid" | "gid"] => true,
        ["debug", "level" | "format"] => true,
        ["metrics", "address" | "grpc_histogram"] => true,
        ["cgroup", "path"] => true,
        ["timeouts", _] => true,
        ["proxy_plugins", _, "type" | "address"] => true,
        ["plugins", plugin, rest @ ..] => kept_in_plugin(plugin, rest),
        _ => false,
    }
}

/// [`kept`] below `[plugins."<plugin>"]`.
fn kept_in_plugin(plugin: &str, rest: &[&str]) -> bool {
    // CRI: `cri` in version 1, `io.containerd.grpc.v1.cri` in 2 (and, with
    // only its streaming server, in 3), split into `.images` and
    // `.runtime` from 3.
    const CRI_1_2: [&str; 2] = ["cri", "io.containerd.grpc.v1.cri"];
    match (plugin, rest) {
        // Version 4's servers.
        ("io.containerd.server.v1.grpc" | "io.containerd.server.v1.ttrpc", [key]) => {
            matches!(*key, "address" | "uid" | "gid")
        }
        ("io.containerd.server.v1.debug", [key]) => {
            matches!(*key, "address" | "uid" | "gid" | "level" | "format")
        }
        ("io.containerd.server.v1.metrics", [key]) => {
            matches!(*key, "address" | "grpc_histogram")
        }
        (cri, [key]) if CRI_1_2.contains(&cri) => {
            *key == "sandbox_image" || kept_in_cri_runtime(rest)
        }
        (cri, ["containerd", rest @ ..]) if CRI_1_2.contains(&cri) => kept_in_cri_containerd(rest),
        (cri, ["registry", "config_path"]) if CRI_1_2.contains(&cri) => true,
        ("io.containerd.cri.v1.images", rest) => matches!(
            rest,
            ["snapshotter" | "use_local_image_pull"]
                | ["pinned_images", "sandbox"]
                | ["registry", "config_path"]
        ),
        ("io.containerd.cri.v1.runtime", ["containerd", rest @ ..]) => kept_in_cri_containerd(rest),
        ("io.containerd.cri.v1.runtime", rest) => kept_in_cri_runtime(rest),
        // The v1 shims' runtime (`linux` in version 1).
        ("linux" | "io.containerd.runtime.v1.linux", [key]) => matches!(
            *key,
            "shim" | "runtime" | "runtime_root" | "no_shim" | "shim_debug"
        ),
        ("io.containerd.runtime.v2.task", [key]) => matches!(*key, "platforms" | "sched_core"),
        // Thresholds and delays: when leaked snapshots are collected.
        ("io.containerd.gc.v1.scheduler", [_]) => true,
        (snapshotter, ["root_path"]) => snapshotter.starts_with("io.containerd.snapshotter.v1."),
        _ => false,
    }
}

/// CRI's own switches that decide where its files and mounts are.
fn kept_in_cri_runtime(rest: &[&str]) -> bool {
    matches!(
        rest,
        ["netns_mounts_under_state_dir" | "enable_cdi" | "disable_cgroup"]
    )
}

/// Below CRI's `containerd` table: the snapshotter and the runtimes.
fn kept_in_cri_containerd(rest: &[&str]) -> bool {
    match rest {
        [key] => matches!(
            *key,
            "snapshotter"
                | "default_runtime_name"
                | "no_pivot"
                | "discard_unpacked_layers"
                | "disable_snapshot_annotations"
        ),
        ["runtimes", _, runtime @ ..]
        | ["default_runtime" | "untrusted_workload_runtime", runtime @ ..] => {
            kept_in_runtime(runtime)
        }
        _ => false,
    }
}

/// Below one CRI runtime (`runtimes.<name>`): what runs its containers and
/// where its state is.
fn kept_in_runtime(rest: &[&str]) -> bool {
    matches!(
        rest,
        ["runtime_type"
            | "runtime_path"
            | "runtime_engine"
            | "runtime_root"
            | "snapshotter"
            | "sandboxer"
            | "sandbox_mode"
            | "io_type"
            | "privileged_without_host_devices"]
            | [
                "options",
                "BinaryName" | "Root" | "SystemdCgroup" | "ShimCgroup" | "NoPivotRoot"
            ]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept_text(config: &str) -> (String, KeptConfig) {
        let kept = keep_config(config.as_bytes()).unwrap();
        (String::from_utf8(kept.toml.clone()).unwrap(), kept)
    }

    #[test]
    fn every_layout_keeps_its_paths_sockets_snapshotter_sandbox_image_and_runtimes() {
        let v1 = r#"
root = "/var/lib/c"
state = "/run/c"
[grpc]
address = "/run/c/c.sock"
[plugins.cri]
sandbox_image = "registry.k8s.io/pause:3.6"
[plugins.cri.containerd]
snapshotter = "overlayfs"
[plugins.cri.containerd.default_runtime]
runtime_type = "io.containerd.runtime.v1.linux"
[plugins.linux]
runtime_root = "/run/runc-v1"
"#;
        let v2 = r#"
version = 2
[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "registry.k8s.io/pause@sha256:1111111111111111111111111111111111111111111111111111111111111111"
[plugins."io.containerd.grpc.v1.cri".containerd]
default_runtime_name = "crun"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]
runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun.options]
BinaryName = "/usr/local/bin/crun"
SystemdCgroup = true
"#;
        let v3 = r#"
version = 3
[plugins.'io.containerd.cri.v1.images']
snapshotter = "zfs"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
sandbox = "registry.k8s.io/pause:3.10"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.kata]
runtime_type = "io.containerd.kata.v2"
[plugins.'io.containerd.snapshotter.v1.zfs']
root_path = "/tank/containerd"
"#;
        let v4 = r#"
version = 4
[plugins."io.containerd.server.v1.grpc"]
address = "/run/k3s/containerd/containerd.sock"
[plugins."io.containerd.server.v1.ttrpc"]
address = "/run/k3s/containerd/containerd.sock.ttrpc"
"#;
        for (config, wanted) in [
            (
                v1,
                &[
                    "/var/lib/c",
                    "/run/c/c.sock",
                    "pause:3.6",
                    "overlayfs",
                    "io.containerd.runtime.v1.linux",
                    "/run/runc-v1",
                ][..],
            ),
            (
                v2,
                &[
                    "version = 2",
                    "pause@sha256:1111",
                    "default_runtime_name = \"crun\"",
                    "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.crun]",
                    "io.containerd.runc.v2",
                    "/usr/local/bin/crun",
                    "SystemdCgroup = true",
                ],
            ),
            (
                v3,
                &[
                    "\"zfs\"",
                    "pause:3.10",
                    "runtimes.kata]",
                    "io.containerd.kata.v2",
                    "/tank/containerd",
                ],
            ),
            (v4, &["containerd.sock\"", "containerd.sock.ttrpc"]),
        ] {
            let (text, kept) = kept_text(config);
            for want in wanted {
                assert!(text.contains(want), "{want} not kept:\n{text}");
            }
            assert_eq!(kept.dropped, 0, "{text}");
            assert!(text.contains("# 0 other keys were dropped"), "{text}");
            // What is kept is a config again.
            text.parse::<toml::Table>().unwrap();
        }
    }

    #[test]
    fn everything_else_is_dropped_and_counted_never_copied() {
        let config = r#"
version = 2
root = "/var/lib/c"
[plugins."io.containerd.grpc.v1.cri".registry.configs."r.example".auth]
username = "u-1"
password = "p-2"
[plugins."io.containerd.grpc.v1.cri".registry.headers]
Authorization = ["Bearer t-3"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
endpoint = ["https://m-4:m-5@mirror.example"]
[stream_processors."io.containerd.ocicrypt.decoder.v1.tar"]
env = ["KEY=e-6"]
[plugins."io.containerd.internal.v1.vendor"]
api_key = "k-7"
[[plugins."io.containerd.internal.v1.vendor".tokens]]
name = "a"
value = "k-8"
[[plugins."io.containerd.internal.v1.vendor".tokens]]
name = "b"
value = "k-9"
"#;
        let (text, kept) = kept_text(config);
        for secret in [
            "u-1", "p-2", "t-3", "m-4", "m-5", "e-6", "k-7", "k-8", "k-9",
        ] {
            assert!(!text.contains(secret), "{secret} kept:\n{text}");
        }
        // Each key of an array of tables counts.
        assert_eq!((kept.kept, kept.dropped), (2, 10), "{text}");
        assert!(text.contains("# 10 other keys were dropped"), "{text}");
        // No table is left empty where all its keys were dropped.
        assert!(!text.contains("registry"), "{text}");
    }

    #[test]
    fn a_kept_key_whose_value_carries_userinfo_or_a_table_is_dropped_too() {
        let config = r#"
sandbox_image = "x"
[grpc]
address = "/run/c/c.sock"
tcp_address = "u-1:p-1@0.0.0.0:1234"
[debug]
address = "/run/c/debug@2.sock"
[proxy_plugins.stargz]
type = "snapshot"
address = "http://u-2:p-2@stargz.example:8080/x"
[proxy_plugins.other]
address = ["unix:///ok.sock", "tcp://u-3@host"]
[timeouts]
"io.containerd.timeout.shim.cleanup" = { nested = "t-4" }
"#;
        let (text, kept) = kept_text(config);
        for secret in ["u-1", "p-2", "u-3", "t-4"] {
            assert!(!text.contains(secret), "{secret} kept:\n{text}");
        }
        // A path with an `@` after its first `/` holds no userinfo.
        assert!(text.contains("/run/c/debug@2.sock"), "{text}");
        assert!(text.contains("type = \"snapshot\""), "{text}");
        // `sandbox_image` is kept below CRI's plugin only.
        assert!(!text.contains("sandbox_image"), "{text}");
        assert_eq!((kept.kept, kept.dropped), (3, 5), "{text}");
    }

    #[test]
    fn userinfo_is_told_from_paths_and_image_references() {
        for (value, carries) in [
            ("https://user:pass@mirror.example", true),
            ("https://user@mirror.example/v2", true),
            ("http://mirror.example/a@b", false),
            ("user:pass@mirror.example/v2", true),
            ("unix:///run/a@b.sock", false),
            ("/run/containerd@1/c.sock", false),
            ("registry.k8s.io/pause@sha256:abc", false),
            ("a://ok, b://u:p@host", true),
            ("", false),
        ] {
            assert_eq!(has_userinfo(value), carries, "{value}");
        }
    }

    #[test]
    fn a_config_that_does_not_parse_is_an_error_that_quotes_none_of_it() {
        let err = keep_config(b"[registry]\npassword = \"s-1\nroot = 1").unwrap_err();
        assert!(!err.contains("s-1"), "{err}");
        assert!(keep_config(b"root = \"\xff\"").is_err());
    }
}
