//! containerd's config as the line under test merges it, with that line's
//! own `containerd config dump` as the oracle (issue 43, points 2 and 9).
//!
//! Each shape is a main config with drop-ins, the kinds nodes carry:
//! versionless and version 1 to 4 mains, drop-ins of another version,
//! partial plugin tables, imports of imports, a relative glob, empty
//! values. For each, the line's containerd merges the files
//! (`config dump`: the same `LoadConfig` its daemon runs at start, printed
//! instead of served) and nodectl reads them (`paths::config::read`, what
//! `check` reads before it knows the line). The settings nodectl uses must
//! be containerd's, or nodectl must say it cannot settle them (a problem
//! naming the file, which the report carries as a gap): a silent
//! difference fails. Shapes marked `settled` must agree outright on every
//! line, so that a reading that gives up on everything cannot pass.
//!
//! No daemon starts: the test runs the line's binary only on files it
//! wrote, and nodectl itself executes nothing.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nodectl::paths::config::{read, ConfigPaths};
use support::{Containerd, Line};

/// containerd's defaults where no file sets a value (the same on every
/// line the tests know).
const DEFAULT_ROOT: &str = "/var/lib/containerd";
const DEFAULT_STATE: &str = "/run/containerd";
const DEFAULT_ADDRESS: &str = "/run/containerd/containerd.sock";
const DEFAULT_SNAPSHOTTER: &str = "overlayfs";
const DEFAULT_CNI_CONF_DIR: &str = "/etc/cni/net.d";
const DEFAULT_MAX_CONF_NUM: i64 = 1;

/// The settings nodectl takes from containerd's config.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    root: String,
    state: String,
    address: String,
    snapshotter: String,
    cni_conf_dir: String,
    cni_max_conf_num: i64,
}

/// A config shape: files (relative to the shape's directory, `@` in a
/// file's text standing for that directory) and the main file's name.
struct Shape {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    /// nodectl must agree with every line, no gap allowed.
    settled: bool,
    /// The lines that read this shape apart from nodectl without its
    /// saying so: a difference written down (docs/containerd-lines.md),
    /// asserted so that a change either way is seen.
    silent_on: &'static [Line],
}

/// 1.6 starts with a config of any version: it reads the socket only from
/// `[grpc]`, so a version 4 file's socket is not its. nodectl reads such a
/// file as the 2.x lines that write it do; live, the socket's listener
/// proves the daemon (one that listens elsewhere is no proven daemon, a
/// gap). A version 3 or 4 file's CRI settings, which 1.6 reads only under
/// its own plugin name (`Config.Decode`: `p.URI()` from version 2 on), are
/// a `config` gap until the daemon's line is known, kept on 1.6.
const V1_6_READS_ANY_VERSION: &[Line] = &[Line::V1_6];

const SHAPES: &[Shape] = &[
    Shape {
        name: "versionless main: top-level paths and [grpc]",
        files: &[(
            "config.toml",
            "root = \"@/root\"\nstate = \"@/state\"\n[grpc]\naddress = \"@/c.sock\"\n",
        )],
        settled: true,
        silent_on: &[],
    },
    Shape {
        name: "versionless main with CRI's cni as plugins.cri (the old k3s spelling)",
        files: &[(
            "config.toml",
            "root = \"@/root\"\n[plugins.cri.cni]\nconf_dir = \"/A\"\nmax_conf_num = 3\n",
        )],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 1 main, said so, with CRI's snapshotter and cni under plugins.cri",
        files: &[(
            "config.toml",
            "version = 1\nroot = \"@/root\"\nstate = \"@/state\"\n\
             [plugins.cri.containerd]\nsnapshotter = \"native\"\n\
             [plugins.cri.cni]\nconf_dir = \"/A\"\n",
        )],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 1 main with CRI's cni under its full name",
        files: &[(
            "config.toml",
            "version = 1\nroot = \"@/root\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/A\"\nmax_conf_num = 3\n",
        )],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 1 main with CRI's cni both as plugins.cri and under its full name",
        files: &[(
            "config.toml",
            "version = 1\nroot = \"@/root\"\n\
             [plugins.cri.cni]\nconf_dir = \"/A\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/B\"\n",
        )],
        settled: false,
        silent_on: &[],
    },
    Shape {
        // Agreed as text; live, nodectl resolves them from the daemon's
        // working directory, as the daemon does (src/paths/tie.rs).
        name: "version 2 main with a relative root and state",
        files: &[(
            "config.toml",
            "version = 2\nroot = \"rel/root\"\nstate = \"rel/state\"\n",
        )],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 2 main with CRI's cni, snapshotter and a runtime",
        files: &[(
            "config.toml",
            "version = 2\nroot = \"@/root\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"native\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
             runtime_type = \"io.containerd.runc.v2\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/A\"\nmax_conf_num = 3\n",
        )],
        settled: true,
        silent_on: &[],
    },
    Shape {
        name: "version 2 main with CRI's cni and snapshotter, no runtime",
        files: &[(
            "config.toml",
            "version = 2\nroot = \"@/root\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"native\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/A\"\nmax_conf_num = 3\n",
        )],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 2 main with CRI's cni, version 2 drop-in with only runc's options",
        files: &[
            (
                "config.toml",
                "version = 2\nimports = [\"@/conf.d/*.toml\"]\n\
                 [plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/A\"\nmax_conf_num = 3\n",
            ),
            (
                "conf.d/runc.toml",
                "version = 2\n\
                 [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n\
                 SystemdCgroup = true\n",
            ),
        ],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 2 main with a runtime, version 2 drop-in with only the snapshotter",
        files: &[
            (
                "config.toml",
                "version = 2\nimports = [\"@/conf.d/*.toml\"]\n\
                 [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
                 runtime_type = \"io.containerd.runc.v2\"\n",
            ),
            (
                "conf.d/snapshotter.toml",
                "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\
                 snapshotter = \"native\"\n",
            ),
        ],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 2 main with the snapshotter, version 2 drop-in with only a runtime",
        files: &[
            (
                "config.toml",
                "version = 2\nimports = [\"@/conf.d/*.toml\"]\n\
                 [plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"native\"\n",
            ),
            (
                "conf.d/runc.toml",
                "version = 2\n\
                 [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
                 runtime_type = \"io.containerd.runc.v2\"\n",
            ),
        ],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 3 main with CRI's cni, version 2 drop-in in the old spelling",
        files: &[
            (
                "config.toml",
                "version = 3\nimports = [\"@/conf.d/*.toml\"]\n\
                 [plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = \"/A\"\nmax_conf_num = 3\n",
            ),
            (
                "conf.d/old.toml",
                "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/B\"\n",
            ),
        ],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 3 main with CRI's cni, versionless drop-in in the old spelling",
        files: &[
            (
                "config.toml",
                "version = 3\nimports = [\"@/conf.d/*.toml\"]\n\
                 [plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = \"/A\"\nmax_conf_num = 3\n",
            ),
            (
                "conf.d/old.toml",
                "[plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/B\"\n",
            ),
        ],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 2 main, version 1 drop-in with CRI's cni under plugins.cri",
        files: &[
            (
                "config.toml",
                "version = 2\nroot = \"@/root\"\nimports = [\"@/conf.d/*.toml\"]\n\
                 [plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = \"/A\"\nmax_conf_num = 3\n",
            ),
            (
                "conf.d/v1.toml",
                "version = 1\nstate = \"@/state\"\n[plugins.cri.cni]\nconf_dir = \"/B\"\n",
            ),
        ],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 3 main, version 4 drop-in moving the socket and CRI's cni",
        files: &[
            (
                "config.toml",
                "version = 3\nroot = \"@/root\"\nimports = [\"@/conf.d/*.toml\"]\n\
                 [plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = \"/A\"\n",
            ),
            (
                "conf.d/v4.toml",
                "version = 4\n[plugins.\"io.containerd.server.v1.grpc\"]\naddress = \"@/new.sock\"\n\
                 [plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = \"/B\"\n",
            ),
        ],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 4 main, version 3 drop-in setting state and CRI's snapshotter",
        files: &[
            (
                "config.toml",
                "version = 4\nroot = \"@/root\"\nimports = [\"@/conf.d/*.toml\"]\n\
                 [plugins.\"io.containerd.server.v1.grpc\"]\naddress = \"@/c.sock\"\n",
            ),
            (
                "conf.d/v3.toml",
                "version = 3\nstate = \"@/state\"\n\
                 [plugins.\"io.containerd.cri.v1.images\"]\nsnapshotter = \"native\"\n",
            ),
        ],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 3 main and drop-in, each setting part of CRI's tables",
        silent_on: &[],
        files: &[
            (
                "config.toml",
                "version = 3\nroot = \"@/root\"\nimports = [\"@/conf.d/*.toml\"]\n\
                 [plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = \"/A\"\nmax_conf_num = 3\n",
            ),
            (
                "conf.d/new.toml",
                "version = 3\nstate = \"@/state\"\n\
                 [plugins.\"io.containerd.cri.v1.runtime\".cni]\nconf_dir = \"/B\"\n\
                 [plugins.\"io.containerd.cri.v1.images\"]\nsnapshotter = \"native\"\n",
            ),
        ],
        settled: false,
    },
    Shape {
        name: "version 2 main that sets state, version 3 drop-in",
        files: &[
            (
                "config.toml",
                "version = 2\nstate = \"@/state\"\nimports = [\"@/conf.d/*.toml\"]\n",
            ),
            ("conf.d/new.toml", "version = 3\nroot = \"@/root\"\n"),
        ],
        settled: false,
        silent_on: &[],
    },
    Shape {
        name: "version 4 main: the socket in the grpc server plugin, [grpc] ignored",
        silent_on: V1_6_READS_ANY_VERSION,
        files: &[(
            "config.toml",
            "version = 4\nroot = \"@/root\"\n[grpc]\naddress = \"@/old.sock\"\n\
             [plugins.\"io.containerd.server.v1.grpc\"]\naddress = \"@/new.sock\"\n",
        )],
        settled: false,
    },
    Shape {
        name: "imports of imports, breadth first, an empty value overriding nothing",
        files: &[
            (
                "config.toml",
                "version = 2\nroot = \"@/main-root\"\nstate = \"@/main-state\"\n\
                 imports = [\"@/a.toml\", \"@/c.toml\"]\n",
            ),
            (
                "a.toml",
                "version = 2\nroot = \"@/a-root\"\nimports = [\"@/b.toml\"]\n",
            ),
            ("b.toml", "version = 2\nroot = \"@/b-root\"\nstate = \"\"\n"),
            ("c.toml", "version = 2\nroot = \"@/c-root\"\n"),
        ],
        settled: true,
        silent_on: &[],
    },
    Shape {
        name: "a relative glob import of a drop-in that moves root and state",
        files: &[
            (
                "config.toml",
                "version = 2\nroot = \"@/main-root\"\nimports = [\"conf.d/*.toml\"]\n",
            ),
            (
                "conf.d/paths.toml",
                "version = 2\nroot = \"@/root\"\nstate = \"@/state\"\n",
            ),
        ],
        settled: false,
        silent_on: &[],
    },
];

/// What containerd's `config dump` says the line under test runs with, or
/// its refusal.
fn dumped(containerd: &Containerd, main: &Path) -> Result<Settings, String> {
    // From "/": a relative glob import is read from the daemon's working
    // directory by the releases before upstream's fix (1.6.29, 1.7.16).
    let output = support::run_bounded(
        Command::new(containerd.binary("containerd"))
            .arg("--config")
            .arg(main)
            .args(["config", "dump"])
            .current_dir("/"),
        Duration::from_secs(20),
    )?;
    if !output.status.success() {
        return Err(support::stderr(&output).trim().to_string());
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let dump: toml::Table = text
        .parse()
        .map_err(|e| format!("config dump is not TOML: {e}\n{text}"))?;
    let at = |path: &[&str]| -> Option<toml::Value> {
        let (last, tables) = path.split_last()?;
        let mut table = &dump;
        for key in tables {
            table = table.get(*key)?.as_table()?;
        }
        table.get(*last).cloned()
    };
    let string = |path: &[&str], default: &str| -> String {
        at(path)
            .and_then(|v| v.as_str().map(str::to_string))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| default.to_string())
    };
    let version = at(&["version"]).and_then(|v| v.as_integer()).unwrap_or(1);
    let address = if version >= 4 {
        string(
            &["plugins", "io.containerd.server.v1.grpc", "address"],
            DEFAULT_ADDRESS,
        )
    } else {
        string(&["grpc", "address"], DEFAULT_ADDRESS)
    };
    // The dump is in the line's newest version: 1.x's CRI is one plugin,
    // 2.x's is split into images and runtime.
    let (cni, snapshotter): (&[&str], &[&str]) = if containerd.line.is_v2() {
        (
            &["plugins", "io.containerd.cri.v1.runtime", "cni"],
            &["plugins", "io.containerd.cri.v1.images", "snapshotter"],
        )
    } else {
        (
            &["plugins", "io.containerd.grpc.v1.cri", "cni"],
            &[
                "plugins",
                "io.containerd.grpc.v1.cri",
                "containerd",
                "snapshotter",
            ],
        )
    };
    fn under<'a>(table: &[&'a str], key: &'a str) -> Vec<&'a str> {
        table.iter().copied().chain([key]).collect()
    }
    Ok(Settings {
        root: string(&["root"], DEFAULT_ROOT),
        state: string(&["state"], DEFAULT_STATE),
        address,
        snapshotter: string(snapshotter, DEFAULT_SNAPSHOTTER),
        cni_conf_dir: string(&under(cni, "conf_dir"), DEFAULT_CNI_CONF_DIR),
        cni_max_conf_num: at(&under(cni, "max_conf_num"))
            .and_then(|v| v.as_integer())
            .unwrap_or(DEFAULT_MAX_CONF_NUM),
    })
}

/// nodectl's reading, with containerd's defaults for what no file sets.
fn nodectls(paths: &ConfigPaths) -> Settings {
    let path = |p: &Option<PathBuf>, default: &str| {
        p.as_ref()
            .map_or(default.to_string(), |p| p.display().to_string())
    };
    Settings {
        root: path(&paths.root, DEFAULT_ROOT),
        state: path(&paths.state, DEFAULT_STATE),
        address: path(&paths.address, DEFAULT_ADDRESS),
        snapshotter: paths
            .snapshotter
            .clone()
            .unwrap_or_else(|| DEFAULT_SNAPSHOTTER.to_string()),
        cni_conf_dir: path(&paths.cni_conf_dir, DEFAULT_CNI_CONF_DIR),
        cni_max_conf_num: paths.cni_max_conf_num.unwrap_or(DEFAULT_MAX_CONF_NUM),
    }
}

/// How nodectl's reading of a shape met the line's.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// The same settings (or both refused the files).
    Agreed,
    /// The same settings, and yet nodectl said it could not settle them.
    AgreedButSaid(String),
    /// Different, and nodectl says so: its problems, or its refusal.
    Gap(String),
    /// The line refuses to start with these files and nodectl reads them:
    /// no daemon of the line runs them, and one that runs read other files
    /// before these were written (a config changed since the daemon
    /// started is not taken as its own: tests/config_imports_real.rs).
    NotRun(String),
    /// Different, and nodectl says nothing: a finding from directories
    /// containerd does not use.
    Silent { containerd: String, nodectl: String },
}

/// `line`: the (major, minor) of the line under test. What nodectl says a
/// line reads apart is settled once the daemon's line is known (gather
/// drops the gap where nodectl's reading is that line's): so here, and a
/// reading claimed right on this line must be the line's.
fn outcome(
    containerd: &Result<Settings, String>,
    nodectl: &std::io::Result<ConfigPaths>,
    line: (u32, u32),
) -> Outcome {
    let said = |paths: &ConfigPaths| {
        let mut said: Vec<String> = paths
            .problems
            .iter()
            .map(|(file, problem)| format!("{}: {problem}", file.display()))
            .collect();
        said.extend(
            paths
                .apart_by_line
                .iter()
                .filter(|apart| !apart.right_on.contains(&line))
                .map(|apart| format!("{}: {}", apart.file.display(), apart.said)),
        );
        if paths.relative_globs {
            said.push("a relative glob import, read where the line reads it".to_string());
        }
        said.join("; ")
    };
    match (containerd, nodectl) {
        (Err(_), Err(_)) => Outcome::Agreed,
        (Ok(_), Err(refused)) => Outcome::Gap(format!("nodectl refused the files: {refused}")),
        (Err(refused), Ok(paths)) if !said(paths).is_empty() => Outcome::Gap(format!(
            "containerd refused ({refused}); nodectl: {}",
            said(paths)
        )),
        (Err(refused), Ok(_)) => Outcome::NotRun(refused.clone()),
        (Ok(settings), Ok(paths)) if *settings == nodectls(paths) => match said(paths) {
            said if said.is_empty() => Outcome::Agreed,
            said => Outcome::AgreedButSaid(said),
        },
        (Ok(_), Ok(paths)) if !said(paths).is_empty() => Outcome::Gap(said(paths)),
        (Ok(settings), Ok(paths)) => Outcome::Silent {
            containerd: format!("{settings:?}"),
            nodectl: format!("{:?}", nodectls(paths)),
        },
    }
}

#[test]
fn nodectl_reads_each_config_shape_as_the_line_merges_it_or_says_it_cannot() {
    const TEST: &str = "nodectl_reads_each_config_shape_as_the_line_merges_it_or_says_it_cannot";
    let containerd = match Containerd::from_env() {
        Ok(containerd) => containerd,
        Err(why) if support::in_ci() => panic!("{TEST}: {why}"),
        Err(why) => return support::skip(TEST, &why),
    };
    let line = containerd.line;
    let (major, minor) = containerd.version.split_once('.').unwrap();
    let minor = minor.split(['.', '~', '-']).next().unwrap();
    let major_minor = (major.parse().unwrap(), minor.parse().unwrap());
    let scratch = tempfile::tempdir().unwrap();
    let mut outcomes = Vec::new();
    for (number, shape) in SHAPES.iter().enumerate() {
        let dir = scratch.path().join(number.to_string());
        for (name, text) in shape.files {
            let path = dir.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, text.replace('@', &dir.display().to_string())).unwrap();
        }
        let main = dir.join(shape.files[0].0);
        let theirs = dumped(&containerd, &main);
        let ours = read(&main);
        let seen = outcome(&theirs, &ours, major_minor);
        eprintln!(
            "{line:?} {}: {:?}\n  containerd: {theirs:?}\n  {seen:?}",
            shape.name, containerd.version_output
        );
        outcomes.push((shape, seen));
    }
    let silent: Vec<String> = outcomes
        .iter()
        .filter(|(shape, seen)| {
            matches!(seen, Outcome::Silent { .. }) != shape.silent_on.contains(&line)
        })
        .map(|(shape, seen)| format!("{}: {seen:?}", shape.name))
        .collect();
    assert!(
        silent.is_empty(),
        "on {line:?}, nodectl reads these shapes apart from containerd without a word, \
         or no longer does where that is written down:\n{}",
        silent.join("\n")
    );
    let unsettled: Vec<String> = outcomes
        .iter()
        .filter(|(shape, seen)| shape.settled && *seen != Outcome::Agreed)
        .map(|(shape, seen)| format!("{}: {seen:?}", shape.name))
        .collect();
    assert!(
        unsettled.is_empty(),
        "on {line:?}, shapes every line reads alike that nodectl did not settle:\n{}",
        unsettled.join("\n")
    );
}
