//! Hostile and broken node data, generated: every parser of what the node
//! holds (CRI status files, bundle specs and small files, mountinfo,
//! `/proc/<pid>/stat` and `cmdline`, containerd's config of every version,
//! `check --from` archives) is fed inputs a tenant or a broken disk could
//! write. Whatever it gets, nodectl does not panic and does not hang, what it
//! keeps stays within its caps, valid input reads back as written, and the
//! rest is a gap or an error that names the file.
//!
//! Each parser gets a fixed number of cases so the suite runs in CI in a few
//! seconds (`NODECTL_FUZZ_CASES=<n>` tries n per parser, for a longer hunt);
//! run with `--nocapture` for the inputs tried and the slowest one per parser.

mod support;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nodectl::archive;
use nodectl::model::Gap;
use nodectl::paths::config;
use nodectl::sources::{bundles, containerd_proc, cri_store, mountinfo, proc_scan};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Cases per parser: enough to hit every shape below many times over, few
/// enough that the whole suite stays well under a minute on a shared runner.
const CASES: u32 = 256;
/// No single input may hold a parser this long; a hang fails the suite here
/// instead of holding CI until its own limit.
const HANG: Duration = Duration::from_secs(20);

/// Runs `test` on `cases` inputs from `strategy` (shrinking any failure to a
/// minimal input), prints how many inputs were tried and the slowest, and
/// aborts the test binary if the parser has not come back within [`HANG`].
fn fuzz<S: Strategy>(
    parser: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let cases = std::env::var("NODECTL_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    let (done, watched) = mpsc::channel::<()>();
    let name = parser.to_string();
    let watchdog = std::thread::spawn(move || {
        let limit = HANG * cases.max(1).div_ceil(64);
        if let Err(mpsc::RecvTimeoutError::Timeout) = watched.recv_timeout(limit) {
            eprintln!("{name}: no answer within {limit:?}: a hang");
            std::process::abort();
        }
    });
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let tried = Cell::new(0u64);
    let slowest = Cell::new(Duration::ZERO);
    let started = Instant::now();
    let result = runner.run(&strategy, |input| {
        let began = Instant::now();
        let outcome = test(input);
        let took = began.elapsed();
        tried.set(tried.get() + 1);
        slowest.set(slowest.get().max(took));
        prop_assert!(took < HANG, "one input held {parser} for {took:?}");
        outcome
    });
    done.send(()).unwrap();
    watchdog.join().unwrap();
    eprintln!(
        "fuzz {parser}: {} inputs in {:.2?}, slowest {:.2?}",
        tried.get(),
        started.elapsed(),
        slowest.get()
    );
    if let Err(failure) = result {
        panic!("{parser}: {failure}");
    }
}

/// Pieces that have broken parsers and terminals before: quotes, escapes,
/// parentheses (`comm`), separators, controls, bidi overrides, invalid
/// UTF-8 and path traversal.
const NASTY: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"(",
    b")",
    b") ",
    b" (",
    b" ",
    b"\t",
    b"\n",
    b"\r",
    b"\0",
    b"\x1b]0;",
    b"\x07",
    b"\x1b[2J",
    b"\xe2\x80\xae",
    b"\xff",
    b"\xc3",
    b"\xef\xbf\xbd",
    b"../",
    b"/",
    b"\\040",
    b"\\777",
    b"\\0",
    b"=",
    b",",
    b"-",
    b"-id",
    b"-namespace",
    b"{",
    b"}",
    b"[",
    b"]",
    b"#",
    b"'''",
    b"\"\"\"",
];

fn nasty_bytes(max_pieces: usize) -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(
        prop_oneof![
            proptest::sample::select(NASTY).prop_map(<[u8]>::to_vec),
            proptest::collection::vec(any::<u8>(), 1..8),
            "[a-z0-9]{1,8}".prop_map(String::into_bytes),
        ],
        0..max_pieces,
    )
    .prop_map(|pieces| pieces.concat())
}

fn nasty_text(max_pieces: usize) -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        nasty_bytes(max_pieces).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        any::<String>(),
    ]
}

/// `bytes` cut short, or with bytes flipped: what a torn write or a bad
/// sector leaves of a valid file.
fn damaged(bytes: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = bytes.len().max(1);
    (
        0..=bytes.len(),
        proptest::collection::vec((0..len, any::<u8>()), 0..4),
    )
        .prop_map(move |(cut, flips)| {
            let mut out = bytes.clone();
            for (at, value) in flips {
                if at < out.len() {
                    out[at] = value;
                }
            }
            out.truncate(cut.max(out.len() / 2).min(out.len()));
            if cut < out.len() / 2 {
                out.truncate(cut);
            }
            out
        })
}

fn names_file(gap: &Gap, path: &Path) -> bool {
    gap.path == path
}

// --- CRI status files -------------------------------------------------------

#[derive(Debug, Clone)]
struct Status {
    pid: i64,
    created: i64,
    started: i64,
    finished: i64,
    exit_code: i32,
    reason: String,
    message: String,
}

fn status() -> impl Strategy<Value = Status> {
    (
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i32>(),
        nasty_text(12),
        nasty_text(12),
    )
        .prop_map(
            |(pid, created, started, finished, exit_code, reason, message)| Status {
                pid,
                created,
                started,
                finished,
                exit_code,
                reason,
                message,
            },
        )
}

/// A status file as containerd's CRI plugin writes it (Go field names,
/// fields nodectl does not read included).
fn status_json(s: &Status) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "Version": "v1",
        "Pid": s.pid,
        "CreatedAt": s.created,
        "StartedAt": s.started,
        "FinishedAt": s.finished,
        "ExitCode": s.exit_code,
        "Reason": s.reason,
        "Message": s.message,
        "Resources": {"linux": {"cpu_period": 100000}},
    }))
    .unwrap()
}

#[test]
fn cri_status_files_read_as_written_and_anything_else_is_an_error() {
    fuzz("cri status (valid)", CASES, status(), |s| {
        let parsed = cri_store::parse_status(&status_json(&s)).map_err(TestCaseError::fail)?;
        prop_assert_eq!(
            (parsed.pid, parsed.created_at, parsed.started_at),
            (s.pid, s.created, s.started)
        );
        prop_assert_eq!(
            (parsed.finished_at, parsed.exit_code),
            (s.finished, i64::from(s.exit_code))
        );
        prop_assert_eq!((&parsed.reason, &parsed.message), (&s.reason, &s.message));
        Ok(())
    });
    let broken = prop_oneof![
        status().prop_flat_map(|s| damaged(status_json(&s))),
        nasty_bytes(40),
        // Nesting far past serde_json's recursion limit (a stack overflow
        // would abort the process, not fail the case).
        (1usize..100_000, any::<bool>()).prop_map(|(depth, arrays)| if arrays {
            "["
        } else {
            "{\"a\":"
        }
        .repeat(depth)
        .into_bytes()),
    ];
    fuzz("cri status (broken)", CASES, broken, |bytes| {
        if let Err(err) = cri_store::parse_status(&bytes) {
            prop_assert!(
                err.starts_with("corrupt status file") || err == "empty status file",
                "{}",
                err
            );
        }
        Ok(())
    });
}

#[test]
fn every_entry_of_the_cri_store_is_a_container_or_a_gap_naming_its_file() {
    let entry = (
        prop_oneof![
            "[0-9a-f]{64}".prop_map(String::into_bytes),
            nasty_bytes(6).prop_filter("a file name", |n| {
                !n.is_empty() && !n.contains(&b'/') && !n.contains(&0) && n != b"." && n != b".."
            }),
        ],
        prop_oneof![
            status().prop_map(|s| status_json(&s)),
            status().prop_flat_map(|s| damaged(status_json(&s))),
            nasty_bytes(20),
        ],
    );
    fuzz(
        "cri store directory",
        CASES / 2,
        proptest::collection::vec(entry, 0..6),
        |entries| {
            let dir = tempfile::tempdir().unwrap();
            let mut written = BTreeMap::new();
            for (name, content) in entries {
                let name = std::ffi::OsStr::from_bytes(&name).to_os_string();
                let container = dir.path().join(&name);
                if fs::create_dir(&container).is_err() {
                    continue;
                }
                fs::write(container.join("status"), &content).unwrap();
                written.insert(container.join("status"), content);
            }
            let mut gaps = Vec::new();
            let containers = cri_store::read(dir.path(), &mut gaps).0;
            for (status_path, content) in &written {
                let read = containers.iter().find(|c| &c.status_path == status_path);
                let gap = gaps.iter().find(|g| names_file(g, status_path));
                prop_assert!(
                    read.is_some() != gap.is_some(),
                    "{}: read {:?}, gap {:?}, gaps {:?}",
                    status_path.display(),
                    read.is_some(),
                    gap,
                    gaps
                );
                if let Some(read) = read {
                    prop_assert_eq!(Ok(read.status.clone()), cri_store::parse_status(content));
                }
            }
            prop_assert_eq!(containers.len() + gaps.len(), written.len(), "{:?}", gaps);
            Ok(())
        },
    );
}

// --- Task bundles -----------------------------------------------------------

#[test]
fn bundle_specs_and_small_files_read_as_written_and_anything_else_is_a_gap() {
    let annotations = proptest::collection::btree_map(
        prop_oneof![
            nasty_text(4).prop_map(|k| format!("io.kubernetes.cri.{k}")),
            nasty_text(4),
            Just(nodectl::model::RUNC_GROUP_ANNOTATION.to_string()),
        ],
        prop_oneof![
            nasty_text(12).prop_map(serde_json::Value::String),
            any::<i64>().prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null),
        ],
        0..6,
    );
    let spec = prop_oneof![
        4 => annotations.prop_map(|a| (serde_json::to_vec(&serde_json::json!({
            "ociVersion": "1.2.0", "process": {"args": ["sh"]}, "annotations": a,
        })).unwrap(), Some(a))),
        1 => nasty_bytes(20).prop_map(|b| (b, None)),
    ];
    let bundle = (
        spec,
        proptest::option::of(prop_oneof![
            any::<i32>().prop_map(|pid| format!("{pid}\n").into_bytes()),
            nasty_bytes(8)
        ]),
        proptest::option::of(prop_oneof![
            nasty_text(10).prop_map(|t| format!("unix://{t}\n").into_bytes()),
            nasty_bytes(8),
        ]),
        proptest::option::of(nasty_bytes(10)),
    );
    fuzz(
        "bundle config.json, shim.pid, address",
        CASES,
        bundle,
        |bundle| {
            let ((spec, annotations), pid, address, bootstrap) = bundle;
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("c1");
            fs::create_dir(&path).unwrap();
            fs::write(path.join("config.json"), &spec).unwrap();
            for (name, content) in [
                ("shim.pid", &pid),
                ("address", &address),
                ("bootstrap.json", &bootstrap),
            ] {
                if let Some(content) = content {
                    fs::write(path.join(name), content).unwrap();
                }
            }
            let mut gaps = Vec::new();
            let bundles = bundles::read(dir.path(), true, &mut gaps);
            let read = &bundles["c1"];
            let parsed_spec = serde_json::from_slice::<serde_json::Value>(&spec).ok();
            let expected: Option<BTreeMap<String, String>> = match annotations {
                Some(a) if a.values().all(|v| v.is_string()) => Some(
                    a.into_iter()
                        .filter(|(k, _)| {
                            k.starts_with("io.kubernetes.cri.")
                                || k == nodectl::model::RUNC_GROUP_ANNOTATION
                        })
                        .map(|(k, v)| (k, v.as_str().unwrap().to_string()))
                        .collect(),
                ),
                _ => None,
            };
            match expected {
                Some(expected) => {
                    prop_assert!(gaps.is_empty(), "{:?}", gaps);
                    prop_assert_eq!(&read.annotations, &expected);
                    prop_assert_eq!(&read.spec_error, &None);
                }
                // Not a spec nodectl can read (null or numbers as annotation
                // values, or not JSON): a gap naming the file, no annotations.
                None if parsed_spec.is_none() || annotations_not_strings(&parsed_spec) => {
                    // Unknown, not absent: its shim group cannot be told.
                    prop_assert!(read.annotations.is_empty() && read.spec_error.is_some());
                    prop_assert!(
                        gaps.len() == 1 && names_file(&gaps[0], &path.join("config.json")),
                        "{:?}",
                        gaps
                    );
                }
                None => {}
            }
            let pid_text = pid.as_deref().and_then(|p| std::str::from_utf8(p).ok());
            prop_assert_eq!(read.shim_pid, pid_text.and_then(|p| p.trim().parse().ok()));
            let socket_text = address
                .as_deref()
                .and_then(|a| std::str::from_utf8(a).ok())
                .map(str::trim)
                .filter(|a| !a.is_empty());
            prop_assert_eq!(read.shim_socket.as_deref(), socket_text);
            Ok(())
        },
    );
}

fn annotations_not_strings(spec: &Option<serde_json::Value>) -> bool {
    match spec.as_ref().and_then(|s| s.get("annotations")) {
        Some(serde_json::Value::Object(map)) => map.values().any(|v| !v.is_string()),
        Some(serde_json::Value::Null) | None => !spec.as_ref().is_some_and(|s| s.is_object()),
        Some(_) => true,
    }
}

// --- mountinfo --------------------------------------------------------------

/// A path as the kernel writes it in mountinfo (`show_path`/`mangle`):
/// space, tab, newline and backslash as octal escapes.
fn kernel_escape(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in path {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.extend(format!("\\{b:03o}").bytes()),
            _ => out.push(b),
        }
    }
    out
}

#[test]
fn mountinfo_lines_with_any_bytes_in_paths_read_back_exactly() {
    let under = PathBuf::from("/run/containerd state");
    let mount = (
        proptest::collection::vec(nasty_bytes(6), 0..4),
        prop_oneof![Just(true), Just(false)],
        "[a-z0-9]{1,8}",
        nasty_bytes(4).prop_filter("no field separators", |s| {
            !s.is_empty() && !s.iter().any(|b| b" \t\n\0".contains(b))
        }),
    );
    let junk = prop_oneof![
        nasty_bytes(30),
        nasty_bytes(6).prop_map(|f| [b"1 2 3:4 / ".as_slice(), &f, b" rw - x y rw"].concat()),
    ];
    fuzz(
        "mountinfo",
        CASES,
        (
            proptest::collection::vec(mount, 0..5),
            proptest::collection::vec(junk, 0..4),
        ),
        |(mounts, junk)| {
            let mut table = b"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n".to_vec();
            let mut expected = Vec::new();
            for (i, (parts, below, fs_type, source)) in mounts.iter().enumerate() {
                let mut point = if *below {
                    under.as_os_str().as_bytes().to_vec()
                } else {
                    b"/elsewhere".to_vec()
                };
                for part in parts {
                    // A path component: no `/`, no NUL (the kernel has neither).
                    point.push(b'/');
                    point.extend(part.iter().filter(|b| **b != b'/' && **b != 0));
                }
                table.extend(format!("{} 22 0:{i} / ", 300 + i).bytes());
                table.extend(kernel_escape(&point));
                table.extend(format!(" rw,relatime - {fs_type} ").bytes());
                table.extend(source);
                table.extend(b" rw,size=64k\n");
                if *below {
                    expected.push(PathBuf::from(std::ffi::OsStr::from_bytes(&point)));
                }
            }
            for line in &junk {
                table.extend(line);
                table.push(b'\n');
            }
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("mountinfo");
            fs::write(&file, &table).unwrap();
            let mut gaps = Vec::new();
            let read = mountinfo::read(&file, &[&under], &mut gaps);
            for mount in &read {
                prop_assert!(mount.mount_point.starts_with(&under), "{:?}", mount);
            }
            let points: Vec<&PathBuf> = read.iter().map(|m| &m.mount_point).collect();
            for point in &expected {
                prop_assert!(points.contains(&point), "{:?} not in {:?}", point, points);
            }
            if junk.is_empty() {
                prop_assert_eq!(points.len(), expected.len());
                prop_assert!(gaps.is_empty(), "{:?}", gaps);
            }
            for gap in &gaps {
                prop_assert!(names_file(gap, &file), "{:?}", gap);
            }
            Ok(())
        },
    );
}

// --- /proc/<pid>/stat and cmdline -------------------------------------------

/// A `/proc` with `btime` and the given processes (`pid`, raw `stat`, raw
/// `cmdline`).
fn fake_proc(processes: &[(i32, Vec<u8>, Vec<u8>)]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("stat"), "cpu 0 0 0 0\nbtime 1700000000\n").unwrap();
    for (pid, stat, cmdline) in processes {
        let dir = root.path().join(pid.to_string());
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("stat"), stat).unwrap();
        fs::write(dir.join("cmdline"), cmdline).unwrap();
    }
    root
}

/// A stat line as the kernel writes it: `comm` between the first `(` and
/// the last `)`, whatever it holds.
fn stat_line(pid: i32, comm: &[u8], state: char) -> Vec<u8> {
    let mut line = format!("{pid} (").into_bytes();
    line.extend(comm);
    line.extend(
        format!(
            ") {state} 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        )
        .bytes(),
    );
    line
}

/// The kernel keeps 15 bytes of a name (TASK_COMM_LEN 16, NUL included).
fn comm() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        nasty_bytes(8),
        Just(b"(a) b (c)".to_vec()),
        Just(b"containerd-shim-runc-v2".to_vec()),
        Just(b"a)\nb (c".to_vec()),
    ]
    .prop_map(|mut c| {
        c.retain(|b| *b != 0);
        c.truncate(15);
        c
    })
}

#[test]
fn stat_lines_with_any_comm_read_back_and_broken_ones_are_skipped() {
    let process = (
        2i32..4_194_304,
        comm(),
        proptest::sample::select(vec!['R', 'S', 'D', 'Z']),
    );
    fuzz(
        "/proc/<pid>/stat (kernel-written, hostile comm)",
        CASES,
        proptest::collection::vec(process, 1..4),
        |processes| {
            let files: Vec<_> = processes
                .iter()
                .map(|(pid, comm, state)| {
                    (*pid, stat_line(*pid, comm, *state), b"sleep\0".to_vec())
                })
                .collect();
            let root = fake_proc(&files);
            let mut gaps = Vec::new();
            let scan = proc_scan::scan(root.path(), true, &mut gaps);
            prop_assert!(gaps.is_empty(), "{:?}", gaps);
            for (pid, comm, state) in &processes {
                let Some(info) = scan.processes.get(pid) else {
                    continue; // the same pid generated twice: the last one won
                };
                if processes.iter().filter(|p| p.0 == *pid).count() > 1 {
                    continue;
                }
                prop_assert_eq!(&info.comm, &String::from_utf8_lossy(comm));
                prop_assert_eq!((info.state, info.ppid), (*state, 1));
            }
            Ok(())
        },
    );
    let broken = prop_oneof![
        nasty_bytes(30),
        (2i32..1000, comm()).prop_flat_map(|(pid, comm)| damaged(stat_line(pid, &comm, 'S'))),
    ];
    fuzz("/proc/<pid>/stat (broken)", CASES, broken, |stat| {
        let root = fake_proc(&[(42, stat, Vec::new())]);
        let mut gaps = Vec::new();
        let scan = proc_scan::scan(root.path(), false, &mut gaps);
        prop_assert!(gaps.is_empty(), "{:?}", gaps);
        prop_assert!(scan.processes.len() <= 1);
        Ok(())
    });
}

/// What a shim's command line is read up to (`CMDLINE_CAP` in proc_scan.rs).
const CMDLINE_CAP: usize = 16 * 1024;

#[test]
fn shim_command_lines_read_back_within_the_cap() {
    let value = || {
        nasty_bytes(8).prop_map(|mut v| {
            v.retain(|b| *b != 0);
            if v.is_empty() || v.starts_with(b"-") {
                v.insert(0, b'x');
            }
            v
        })
    };
    let argv = (
        value(),
        value(),
        value(),
        proptest::collection::vec(nasty_bytes(4), 0..4),
        0usize..40_000,
    );
    fuzz(
        "/proc/<pid>/cmdline (shims)",
        CASES,
        argv,
        |(namespace, id, address, extra, padding)| {
            let mut args: Vec<Vec<u8>> = vec![
                b"/usr/bin/containerd-shim-runc-v2".to_vec(),
                b"-namespace".to_vec(),
                namespace.clone(),
                b"-id".to_vec(),
                id.clone(),
                b"-address".to_vec(),
                address.clone(),
            ];
            args.extend(extra);
            if padding > 0 {
                args.push(vec![b'A'; padding]);
            }
            let cmdline: Vec<u8> = args
                .iter()
                .flat_map(|a| a.iter().copied().chain([0]))
                .collect();
            let root = fake_proc(&[(42, stat_line(42, b"containerd-shim", 'S'), cmdline)]);
            let mut gaps = Vec::new();
            let scan = proc_scan::scan(root.path(), true, &mut gaps);
            prop_assert_eq!(scan.shims.len(), 1, "{:?}", gaps);
            let shim = &scan.shims[0];
            let lossy = |b: &[u8]| Some(String::from_utf8_lossy(b).into_owned());
            prop_assert_eq!(&shim.binary, "containerd-shim-runc-v2");
            prop_assert_eq!(&shim.namespace, &lossy(&namespace));
            prop_assert_eq!(&shim.id, &lossy(&id));
            prop_assert_eq!(&shim.address, &lossy(&address));
            let kept: usize = [&shim.namespace, &shim.id, &shim.address, &shim.action]
                .iter()
                .map(|s| s.as_ref().map_or(0, String::len))
                .sum();
            // Each byte read is at most 3 bytes of text (U+FFFD for a bad byte).
            prop_assert!(kept <= 3 * CMDLINE_CAP, "{} bytes kept", kept);
            Ok(())
        },
    );
    fuzz(
        "/proc/<pid>/cmdline (broken)",
        CASES,
        nasty_bytes(40),
        |cmdline| {
            let root = fake_proc(&[(42, stat_line(42, b"containerd-shim", 'S'), cmdline)]);
            let mut gaps = Vec::new();
            let scan = proc_scan::scan(root.path(), true, &mut gaps);
            prop_assert!(scan.shims.len() <= 1);
            Ok(())
        },
    );
}

#[test]
fn containerd_command_lines_give_their_paths_in_every_flag_form() {
    let path = || nasty_text(6).prop_filter("a value", |p| !p.is_empty());
    let argv = (path(), path(), path(), path(), 0usize..3);
    fuzz(
        "containerd cmdline",
        CASES,
        argv,
        |(config, root, state, address, form)| {
            let flag = |short: &str, long: &str, value: &str| -> Vec<String> {
                match form {
                    0 => vec![format!("-{short}"), value.to_string()],
                    1 => vec![format!("--{long}"), value.to_string()],
                    _ => vec![format!("--{long}={value}")],
                }
            };
            let mut argv = vec!["/usr/bin/containerd".to_string()];
            argv.extend(flag("c", "config", &config));
            argv.extend(flag("root", "root", &root));
            argv.extend(flag("state", "state", &state));
            argv.extend(flag("a", "address", &address));
            let process = containerd_proc::parse_args(&argv)
                .ok_or_else(|| TestCaseError::fail(format!("not read as the daemon: {argv:?}")))?;
            prop_assert_eq!(process.config, Some(PathBuf::from(&config)));
            prop_assert_eq!(process.root, Some(PathBuf::from(&root)));
            prop_assert_eq!(process.state, Some(PathBuf::from(&state)));
            prop_assert_eq!(process.address, Some(PathBuf::from(&address)));
            Ok(())
        },
    );
    fuzz(
        "containerd cmdline (any words)",
        CASES,
        proptest::collection::vec(nasty_text(4), 0..8),
        |argv| {
            let _ = containerd_proc::parse_args(&argv);
            Ok(())
        },
    );
}

// --- containerd's config.toml -----------------------------------------------

#[derive(Debug, Clone)]
struct ConfigCase {
    version: Option<i64>,
    root: Option<String>,
    state: Option<String>,
    legacy_address: Option<String>,
    plugin_address: Option<String>,
    secret: String,
}

fn config_case() -> impl Strategy<Value = ConfigCase> {
    let text = || proptest::option::of(nasty_text(6));
    (
        prop_oneof![Just(None), (0i64..=4).prop_map(Some)],
        text(),
        text(),
        text(),
        text(),
        "[a-zA-Z0-9+/]{8,24}",
    )
        .prop_map(
            |(version, root, state, legacy_address, plugin_address, secret)| ConfigCase {
                version,
                root,
                state,
                legacy_address,
                plugin_address,
                secret,
            },
        )
}

fn config_toml(case: &ConfigCase) -> String {
    let mut table = toml::Table::new();
    if let Some(version) = case.version {
        table.insert("version".into(), version.into());
    }
    if let Some(root) = &case.root {
        table.insert("root".into(), root.clone().into());
    }
    if let Some(state) = &case.state {
        table.insert("state".into(), state.clone().into());
    }
    if let Some(address) = &case.legacy_address {
        let grpc: toml::Table = [("address".to_string(), address.clone().into())]
            .into_iter()
            .collect();
        table.insert("grpc".into(), grpc.into());
    }
    let mut plugins = toml::Table::new();
    if let Some(address) = &case.plugin_address {
        let grpc: toml::Table = [("address".to_string(), address.clone().into())]
            .into_iter()
            .collect();
        plugins.insert("io.containerd.server.v1.grpc".into(), grpc.into());
    }
    let auth: toml::Table = [
        ("username".to_string(), toml::Value::from("robot")),
        ("password".to_string(), case.secret.clone().into()),
        ("identitytoken".to_string(), case.secret.clone().into()),
    ]
    .into_iter()
    .collect();
    let mut registry = toml::Table::new();
    registry.insert(
        "configs".into(),
        toml::Value::Table(
            [(
                "registry.example".to_string(),
                toml::Value::Table([("auth".to_string(), auth.into())].into_iter().collect()),
            )]
            .into_iter()
            .collect(),
        ),
    );
    let mut cri = toml::Table::new();
    cri.insert("registry".into(), registry.into());
    plugins.insert("io.containerd.grpc.v1.cri".into(), cri.into());
    table.insert("plugins".into(), plugins.into());
    toml::to_string(&table).unwrap()
}

#[test]
fn configs_of_every_version_give_the_paths_containerd_reads() {
    fuzz(
        "config.toml (versions 1 to 4)",
        CASES,
        config_case(),
        |case| {
            let text = config_toml(&case);
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("config.toml");
            fs::write(&file, &text).unwrap();
            let read =
                config::read(&file).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            let set = |v: &Option<String>| v.clone().filter(|v| !v.is_empty()).map(PathBuf::from);
            let version = case.version.filter(|v| *v != 0).unwrap_or(1);
            // Version 4 moved the socket into the server plugin and ignores
            // `[grpc]`; older versions read `[grpc]` first.
            let address = if version >= 4 {
                set(&case.plugin_address)
            } else {
                // A `[grpc] address` that is set, even empty, is what they read.
                set(&case.legacy_address.clone().or(case.plugin_address.clone()))
            };
            prop_assert_eq!(read.version, version);
            prop_assert_eq!(read.root.clone(), set(&case.root));
            prop_assert_eq!(read.state.clone(), set(&case.state));
            prop_assert_eq!(read.address.clone(), address);

            // What collect archives of it holds no credential (the auth
            // table's three keys are dropped), and, unless a path was dropped
            // too (one that looks like a URL's userinfo), gives nodectl the
            // same paths.
            let kept = archive::keep_config(text.as_bytes()).map_err(TestCaseError::fail)?;
            let dropped = kept.dropped;
            let kept = String::from_utf8(kept.toml).unwrap();
            prop_assert!(!kept.contains(&case.secret), "{}", kept);
            fs::write(&file, &kept).unwrap();
            let again =
                config::read(&file).map_err(|e| TestCaseError::fail(format!("{e}: {kept}")))?;
            if dropped == 3 {
                prop_assert_eq!(again.version, read.version);
                prop_assert_eq!(again.root, read.root);
                prop_assert_eq!(again.state, read.state);
                prop_assert_eq!(again.address, read.address);
            } else {
                let values = [
                    &case.root,
                    &case.state,
                    &case.legacy_address,
                    &case.plugin_address,
                ];
                prop_assert!(
                    values.into_iter().flatten().any(|v| v.contains('@')),
                    "{} keys dropped: {}",
                    dropped,
                    kept
                );
            }
            Ok(())
        },
    );
    let broken = prop_oneof![
        config_case().prop_flat_map(|c| damaged(config_toml(&c).into_bytes())),
        nasty_bytes(40),
        any::<i64>().prop_map(|v| format!("version = {v}\nroot = \"/r\"\n").into_bytes()),
    ];
    fuzz("config.toml (broken)", CASES, broken, |bytes| {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        fs::write(&file, &bytes).unwrap();
        if let Ok(read) = config::read(&file) {
            prop_assert!((1..=config::NEWEST_VERSION).contains(&read.version));
        }
        let _ = archive::keep_config(&bytes);
        Ok(())
    });
}

// --- check --from archives --------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Regular,
    Directory,
    Symlink,
    HardLink,
    CharDevice,
    BlockDevice,
    Fifo,
}

impl Kind {
    fn entry_type(self) -> tar::EntryType {
        match self {
            Kind::Regular => tar::EntryType::Regular,
            Kind::Directory => tar::EntryType::Directory,
            Kind::Symlink => tar::EntryType::Symlink,
            Kind::HardLink => tar::EntryType::Link,
            Kind::CharDevice => tar::EntryType::Char,
            Kind::BlockDevice => tar::EntryType::Block,
            Kind::Fifo => tar::EntryType::Fifo,
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    kind: Kind,
    name: Vec<u8>,
    link: Vec<u8>,
    data: Vec<u8>,
}

/// A tar entry written byte for byte as given: the `tar` crate's own
/// builder refuses `..` and absolute names, which a hostile archive has.
fn raw_entry(tar: &mut Vec<u8>, entry: &Entry) {
    let mut header = tar::Header::new_gnu();
    let old = header.as_gnu_mut().unwrap();
    let name = &entry.name[..entry.name.len().min(99)];
    old.name[..name.len()].copy_from_slice(name);
    let link = &entry.link[..entry.link.len().min(99)];
    old.linkname[..link.len()].copy_from_slice(link);
    header.set_entry_type(entry.kind.entry_type());
    header.set_mode(0o644);
    let data: &[u8] = if entry.kind == Kind::Regular {
        &entry.data
    } else {
        &[]
    };
    header.set_size(data.len() as u64);
    if matches!(entry.kind, Kind::CharDevice | Kind::BlockDevice) {
        header.set_device_major(1).unwrap();
        header.set_device_minor(3).unwrap();
    }
    header.set_cksum();
    tar.extend_from_slice(header.as_bytes());
    tar.extend_from_slice(data);
    tar.resize(tar.len().div_ceil(512) * 512, 0);
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// The `snapshots.json` of a real `collect` of a hand-made node.
fn real_snapshots() -> Vec<u8> {
    let node = support::hand_made_node();
    let archive = node.path().join("evidence.tar.gz");
    fs::write(node.path().join("config.toml"), "version = 2\n").unwrap();
    let output = support::hand_made_command(node.path(), &["collect"])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(
        fs::File::open(&archive).unwrap(),
    ));
    let mut entry = tar.entries().unwrap().next().unwrap().unwrap();
    assert_eq!(&*entry.path_bytes(), b"snapshots.json");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
    bytes
}

/// Every file below `dir`, and below the directories a traversal from it
/// would reach.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                todo.push(entry.path());
            }
            found.push(entry.path());
        }
    }
    found.sort();
    found
}

#[test]
fn archives_are_read_in_memory_and_any_odd_entry_is_a_clear_error() {
    let snapshots = real_snapshots();
    let name = prop_oneof![
        Just(b"snapshots.json".to_vec()),
        Just(b"./snapshots.json".to_vec()),
        Just(b"../../../../tmp/nodectl-fuzz-escaped".to_vec()),
        Just(b"/tmp/nodectl-fuzz-escaped".to_vec()),
        Just(b"files/mountinfo".to_vec()),
        nasty_bytes(6),
    ];
    let kind = proptest::sample::select(vec![
        Kind::Regular,
        Kind::Regular,
        Kind::Directory,
        Kind::Symlink,
        Kind::HardLink,
        Kind::CharDevice,
        Kind::BlockDevice,
        Kind::Fifo,
    ]);
    let data = prop_oneof![
        2 => Just(snapshots.clone()),
        1 => damaged(snapshots.clone()),
        1 => nasty_bytes(20),
    ];
    let entry = (
        kind,
        name,
        prop_oneof![
            Just(b"/etc/shadow".to_vec()),
            Just(b"../../x".to_vec()),
            nasty_bytes(4)
        ],
        data,
    )
        .prop_map(|(kind, name, link, data)| Entry {
            kind,
            name,
            link,
            data,
        });
    // Mostly whole gzip archives (what a reader must judge), some cut short
    // or not compressed.
    let archive = (
        proptest::collection::vec(entry, 0..5),
        prop_oneof![3 => Just(100usize), 1 => 0usize..100],
        prop_oneof![3 => Just(true), 1 => Just(false)],
    );
    let dir = tempfile::tempdir().unwrap();
    let before = files_below(dir.path());
    fuzz(
        "check --from archive",
        CASES,
        archive,
        |(entries, cut_percent, compress)| {
            let mut tar = Vec::new();
            for entry in &entries {
                raw_entry(&mut tar, entry);
            }
            tar.extend([0; 1024]);
            let mut bytes = if compress { gzip(&tar) } else { tar };
            let whole = cut_percent == 100;
            bytes.truncate(bytes.len() * cut_percent / 100);
            let path = dir.path().join("evidence.tar.gz");
            fs::write(&path, &bytes).unwrap();
            let result = archive::read(&path, HANG).map_err(|e| format!("{e:#}"));
            fs::remove_file(&path).unwrap();
            prop_assert_eq!(files_below(dir.path()), before.clone());
            prop_assert!(!Path::new("/tmp/nodectl-fuzz-escaped").exists());
            let first = entries.iter().find(|e| e.name == b"snapshots.json");
            match &result {
                Ok(_) => {
                    let first =
                        first.ok_or_else(|| TestCaseError::fail("read without snapshots.json"))?;
                    prop_assert_eq!(first.kind, Kind::Regular);
                }
                Err(err) => {
                    prop_assert!(err.starts_with(&path.display().to_string()), "{}", err);
                    if let (true, true, Some(first)) = (whole, compress, first) {
                        if first.kind != Kind::Regular {
                            prop_assert!(err.contains("not a nodectl evidence"), "{}", err);
                        } else if first.data == snapshots {
                            prop_assert!(false, "a valid archive refused: {}", err);
                        }
                    }
                }
            }
            Ok(())
        },
    );
}

// --- The rest of procfs: btime, pressure, meminfo ---------------------------

#[test]
fn procfs_system_files_with_any_content_are_read_or_a_gap() {
    let btime = prop_oneof![
        any::<i64>().prop_map(|t| format!("cpu 0 0\nbtime {t}\n").into_bytes()),
        any::<u64>().prop_map(|t| format!("btime {t}\n").into_bytes()),
        nasty_bytes(20),
    ];
    fuzz("/proc/stat (btime)", CASES, btime, |stat| {
        let root = fake_proc(&[(42, stat_line(42, b"sleep", 'S'), b"sleep\0".to_vec())]);
        fs::write(root.path().join("stat"), &stat).unwrap();
        let mut gaps = Vec::new();
        let scan = proc_scan::scan(root.path(), false, &mut gaps);
        // Either the processes, or one gap naming the file that failed.
        prop_assert!(
            scan.processes.len() == 1
                || (gaps.len() == 1 && names_file(&gaps[0], &root.path().join("stat"))),
            "{:?}",
            gaps
        );
        Ok(())
    });
    let field = || {
        prop_oneof![
            any::<u64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|n| n.to_string()),
            nasty_text(3),
        ]
    };
    let files = (
        (field(), field(), field()).prop_map(|(a, b, c)| {
            format!("some avg10={a} avg60={b} avg300=0.00 total={c}\nfull avg10={a} avg60={b} avg300=0.00 total={c}\n")
                .into_bytes()
        }),
        (field(), field()).prop_map(|(dirty, writeback)| {
            format!("MemTotal: 100 kB\nMemFree: 50 kB\nDirty: {dirty} kB\nWriteback: {writeback} kB\n").into_bytes()
        }),
        nasty_bytes(20),
        any::<u8>(),
    );
    fuzz(
        "/proc/pressure/io, /proc/meminfo",
        CASES,
        files,
        |(pressure, meminfo, junk, which)| {
            let root = tempfile::tempdir().unwrap();
            fs::create_dir(root.path().join("pressure")).unwrap();
            let (pressure, meminfo) = match which % 3 {
                0 => (pressure, meminfo),
                1 => (junk, meminfo),
                _ => (pressure, junk),
            };
            fs::write(root.path().join("pressure/io"), &pressure).unwrap();
            fs::write(root.path().join("meminfo"), &meminfo).unwrap();
            let mut gaps = Vec::new();
            let _ = nodectl::sources::node::read(root.path(), &mut gaps);
            prop_assert!(gaps.len() <= 2, "{:?}", gaps);
            Ok(())
        },
    );
}

#[test]
fn shim_threads_with_any_syscall_and_wchan_are_sampled_or_skipped() {
    let thread = (
        1i32..100_000,
        proptest::sample::select(vec!['R', 'S', 'D', 't']),
        prop_oneof![
            (-2i64..500)
                .prop_map(|n| format!("{n} 0x1 0x2 0x3 0x4 0x5 0x6 0x7ffc 0x7f12\n").into_bytes()),
            Just(b"running\n".to_vec()),
            nasty_bytes(10),
        ],
        nasty_bytes(10),
        any::<bool>(),
    );
    fuzz(
        "/proc/<pid>/task/<tid>/{stat,syscall,wchan}",
        CASES,
        proptest::collection::btree_map(1i32..100_000, thread, 0..4),
        |threads| {
            let root = fake_proc(&[(
                42,
                stat_line(42, b"containerd-shim", 'S'),
                b"/usr/bin/containerd-shim-runc-v2\0-namespace\0k8s.io\0-id\0x\0".to_vec(),
            )]);
            for (tid, (_, state, syscall, wchan, good_stat)) in &threads {
                let dir = root.path().join(format!("42/task/{tid}"));
                fs::create_dir_all(&dir).unwrap();
                // Garbage for a bad one, without a `)`: one followed by a
                // letter would end a `comm` and give a state, as it should.
                let stat = if *good_stat {
                    stat_line(*tid, b"containerd-shim", *state)
                } else {
                    wchan.iter().copied().filter(|b| *b != b')').collect()
                };
                fs::write(dir.join("stat"), stat).unwrap();
                fs::write(dir.join("syscall"), syscall).unwrap();
                fs::write(dir.join("wchan"), wchan).unwrap();
            }
            let mut gaps = Vec::new();
            let scan = proc_scan::scan(root.path(), true, &mut gaps);
            prop_assert_eq!(scan.shims.len(), 1);
            let sampled = &scan.shims[0].threads;
            // The leader (tid 42) has the process's state, from `42/stat`:
            // its own task stat is not read again.
            let good: Vec<i32> = threads
                .iter()
                .filter(|(tid, t)| t.4 || **tid == 42)
                .map(|(tid, _)| *tid)
                .collect();
            prop_assert_eq!(sampled.iter().map(|t| t.tid).collect::<Vec<_>>(), good);
            for sample in sampled {
                let (_, state, syscall, _, _) = &threads[&sample.tid];
                let state = if sample.tid == 42 { 'S' } else { *state };
                prop_assert_eq!(sample.state, Some(state));
                let number = std::str::from_utf8(syscall)
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse::<i64>().ok());
                // A syscall is named exactly when the thread is not running
                // (the kernel names none for a running one) and the file
                // starts with one.
                prop_assert_eq!(
                    sample.syscall.is_some(),
                    state != 'R' && number.is_some_and(|n| n >= 0),
                    "{:?}",
                    sample
                );
                if state != 'D' {
                    prop_assert_eq!(&sample.wchan, &None);
                }
            }
            Ok(())
        },
    );
}

/// The same threads on a node without swap: `syscall` is read first, and
/// only a thread in an idle wait is not asked its state (a thread whose
/// `syscall` names another call, or none, is, whatever the files hold).
#[test]
fn shim_threads_on_a_node_without_swap_keep_every_state_but_an_idle_waits() {
    // umount2, futex, read and epoll_pwait often, any other number too.
    #[cfg(target_arch = "x86_64")]
    let calls = vec![166i64, 202, 0, 281];
    #[cfg(not(target_arch = "x86_64"))]
    let calls = vec![39i64, 98, 63, 22];
    let thread = (
        proptest::sample::select(vec!['R', 'S', 'D', 't']),
        prop_oneof![
            prop_oneof![proptest::sample::select(calls), -2i64..500]
                .prop_map(|n| format!("{n} 0x1 0x2 0x3 0x4 0x5 0x6 0x7ffc 0x7f12\n").into_bytes()),
            Just(b"running\n".to_vec()),
            nasty_bytes(10),
        ],
        any::<bool>(),
    );
    fuzz(
        "/proc/<pid>/task/<tid>/{stat,syscall} without swap",
        CASES,
        proptest::collection::btree_map(43i32..100_000, thread, 0..4),
        |threads| {
            let root = fake_proc(&[(
                42,
                stat_line(42, b"containerd-shim", 'S'),
                b"/usr/bin/containerd-shim-runc-v2\0-namespace\0k8s.io\0-id\0x\0".to_vec(),
            )]);
            fs::write(
                root.path().join("swaps"),
                "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
            )
            .unwrap();
            for (tid, (state, syscall, good_stat)) in &threads {
                let dir = root.path().join(format!("42/task/{tid}"));
                fs::create_dir_all(&dir).unwrap();
                if *good_stat {
                    fs::write(
                        dir.join("stat"),
                        stat_line(*tid, b"containerd-shim", *state),
                    )
                    .unwrap();
                }
                fs::write(dir.join("syscall"), syscall).unwrap();
            }
            let mut gaps = Vec::new();
            let scan = proc_scan::scan(root.path(), true, &mut gaps);
            prop_assert_eq!(scan.shims.len(), 1);
            for sample in &scan.shims[0].threads {
                let (state, syscall, good_stat) = &threads[&sample.tid];
                let text = String::from_utf8_lossy(syscall);
                let idle = sample
                    .syscall
                    .as_deref()
                    .is_some_and(nodectl::model::shim::is_idle_wait);
                if text.starts_with("running") {
                    prop_assert_eq!(sample.state, Some('R'));
                } else if idle {
                    prop_assert_eq!(sample.state, None);
                } else {
                    // Asked: its own state (a thread without one is gone).
                    prop_assert!(*good_stat);
                    prop_assert_eq!(sample.state, Some(*state));
                }
            }
            // Every thread with a state to read is there.
            for (tid, (_, _, good_stat)) in &threads {
                prop_assert!(
                    !*good_stat || scan.shims[0].threads.iter().any(|t| t.tid == *tid),
                    "thread {} dropped",
                    tid
                );
            }
            Ok(())
        },
    );
}

// --- A shim's proof: status, exe, its stat read again -----------------------

#[test]
fn a_shims_proof_reads_any_status_and_stat_without_panic_and_proves_nothing_forged() {
    use nodectl::model::{Located, Origin, Paths};
    use nodectl::sources::shim_proof;
    let files = (
        prop_oneof![
            (any::<u32>(), any::<u32>())
                .prop_map(
                    |(a, b)| format!("Name:\tx\nUid:\t{a}\t{b}\t{a}\t{b}\nGid:\t0\n").into_bytes()
                ),
            nasty_bytes(20),
        ],
        prop_oneof![
            Just(stat_line(42, b"containerd-shim", 'S')),
            nasty_bytes(20)
        ],
        prop_oneof![
            Just(b"/usr/bin/containerd-shim-runc-v2".to_vec()),
            nasty_bytes(6)
        ],
        nasty_text(6),
    );
    fuzz(
        "/proc/<pid>/{status,exe,stat} (shim proof)",
        CASES,
        files,
        |(status, restat, exe, address)| {
            let root = fake_proc(&[(
                42,
                stat_line(42, b"containerd-shim", 'S'),
                [
                    b"/usr/bin/containerd-shim-runc-v2\0-namespace\0k8s.io\0-id\0abc\0-address\0"
                        .as_slice(),
                    address.replace('\0', "").as_bytes(),
                    b"\0",
                ]
                .concat(),
            )]);
            let dir = root.path().join("42");
            fs::write(dir.join("status"), &status).unwrap();
            let exe = std::ffi::OsStr::from_bytes(&exe).to_os_string();
            if !exe.is_empty() && !exe.as_bytes().contains(&0) {
                std::os::unix::fs::symlink(&exe, dir.join("exe")).unwrap();
            }
            let mut gaps = Vec::new();
            let mut scan = proc_scan::scan(root.path(), true, &mut gaps);
            fs::write(dir.join("stat"), &restat).unwrap();
            let located = |path: &str| Located {
                path: PathBuf::from(path),
                origin: Origin::Flag,
            };
            let paths = Paths::at(
                located("/nonexistent/root"),
                located("/nonexistent/state"),
                located("/nonexistent/containerd.sock"),
            );
            shim_proof::prove_all(
                root.path(),
                &paths,
                &mut scan.shims,
                &scan.processes,
                &mut gaps,
            );
            for shim in &scan.shims {
                // No executable a root-owned file named like a shim, no
                // namespaces, no socket: never ours, whatever the files say.
                prop_assert!(
                    !nodectl::model::shim::identity(shim).is_ours(),
                    "{:?}",
                    shim
                );
            }
            Ok(())
        },
    );
}

// --- What checks and renderers make of any values ---------------------------

/// Timestamps and pids at and around every edge an i64 has.
fn edgy_i64() -> impl Strategy<Value = i64> + Clone {
    prop_oneof![
        Just(0i64),
        Just(i64::MIN),
        Just(i64::MAX),
        Just(-1),
        any::<i64>(),
        (0i64..4_000_000_000).prop_map(|s| s * 1_000_000_000),
    ]
}

#[test]
fn checks_and_every_output_take_any_values_a_snapshot_can_hold() {
    let evidence: archive::Archived = serde_json::from_slice(&real_snapshots()).unwrap();
    let base = evidence.first;
    let container = (
        "[0-9a-f]{4}",
        (edgy_i64(), edgy_i64(), edgy_i64(), edgy_i64(), edgy_i64()),
        edgy_i64(),
        nasty_text(6),
        proptest::option::of(edgy_i64()),
        proptest::sample::select(vec!['R', 'S', 'D', 'Z', 'X', '?']),
    );
    let snapshot = (edgy_i64(), proptest::collection::vec(container, 0..4));
    fuzz(
        "snapshot values (checks and renderers)",
        CASES,
        snapshot,
        |(taken_at, containers)| {
            use nodectl::model::{Bundle, CriContainer, CriStatus, ProcessInfo, Shim};
            let mut first = base.clone();
            first.taken_at = taken_at;
            for (
                id,
                (pid, created, started, finished, exit),
                written,
                reason,
                process_start,
                state,
            ) in &containers
            {
                let id = id.repeat(16);
                first.cri_containers.push(CriContainer {
                    id: id.clone(),
                    status_path: PathBuf::from(format!("/x/{id}/status")),
                    status_written_at: *written,
                    status: CriStatus {
                        version: "v1".into(),
                        pid: *pid,
                        created_at: *created,
                        started_at: *started,
                        finished_at: *finished,
                        exit_code: *exit,
                        reason: reason.clone(),
                        message: reason.clone(),
                    },
                    status_file: None,
                });
                if let Some(start) = process_start {
                    let pid = *pid as i32;
                    first.processes.insert(
                        pid,
                        ProcessInfo {
                            pid,
                            ppid: 1,
                            comm: reason.clone(),
                            state: *state,
                            started_at: *start,
                            rss_bytes: u64::MAX,
                        },
                    );
                    first.shims.push(Shim {
                        pid,
                        binary: "containerd-shim-runc-v2".into(),
                        namespace: Some("k8s.io".into()),
                        id: Some(id.clone()),
                        address: Some(reason.clone()),
                        ..Shim::default()
                    });
                }
                first.bundles.insert(
                    id.clone(),
                    Bundle {
                        id: id.clone(),
                        path: PathBuf::from(format!("/y/{id}")),
                        shim_pid: Some(*pid as i32),
                        ..Bundle::default()
                    },
                );
            }
            let settings = nodectl::checks::Settings::default();
            let findings = nodectl::checks::run_all(&first, &first, &settings);
            let _ = nodectl::checks::suspects(&first);
            let report = nodectl::report::Report::new(
                "check",
                &first.namespace,
                first.paths.clone(),
                findings,
                first.gaps.clone(),
            );
            for format in [
                nodectl::render::Format::Table,
                nodectl::render::Format::Json,
                nodectl::render::Format::Prometheus,
                nodectl::render::Format::Npd,
            ] {
                let mut out = Vec::new();
                nodectl::render::render(&report, format, &mut out)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                if format == nodectl::render::Format::Json {
                    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
                    support::assert_matches_schema(&doc);
                }
            }
            Ok(())
        },
    );
}
