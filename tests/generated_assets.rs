//! Shell completions (completions/) and man pages (man/) are generated from
//! the clap definitions and checked in, so packagers and users get them
//! without building. This file is the generator, and its tests fail when
//! the checked-in files are stale or miss what a user looks for in them;
//! regenerate with `NODECTL_UPDATE_ASSETS=1 cargo test --test generated_assets`.

use std::fs;
use std::path::{Path, PathBuf};

use clap::{Arg, Command, CommandFactory};
use clap_complete::Shell;
use nodectl::cli::Cli;
use nodectl::commands;
use nodectl::model::Kind;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The command as completions offer it: clap_complete lists hidden options
/// too, which `--help` does not show and users are not meant to type.
fn without_hidden(cmd: &Command) -> Command {
    // clap takes names as `&'static str` (no `string` feature); the
    // generator runs once per test.
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let mut out = Command::new(leak(cmd.get_name()));
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(version) = cmd.get_version() {
        out = out.version(leak(version));
    }
    out.args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .groups(cmd.get_groups().map(|group| {
            // A group keeps its rules (`--yes` requires one of the
            // cleanup actions) over the options still offered.
            let shown = group.get_args().filter(|id| {
                cmd.get_arguments()
                    .any(|a| a.get_id() == *id && !a.is_hide_set())
            });
            clap::ArgGroup::new(leak(group.get_id().as_str()))
                .args(shown.cloned().collect::<Vec<_>>())
                .multiple(group.clone().is_multiple())
                .required(group.is_required_set())
        }))
        .subcommands(cmd.get_subcommands().map(without_hidden))
}

fn expected_assets() -> Vec<(PathBuf, Vec<u8>)> {
    let mut assets = Vec::new();
    for (shell, file) in [
        (Shell::Bash, "nodectl.bash"),
        (Shell::Zsh, "_nodectl"),
        (Shell::Fish, "nodectl.fish"),
    ] {
        let mut out = Vec::new();
        let mut command = without_hidden(&Cli::command());
        clap_complete::generate(shell, &mut command, "nodectl", &mut out);
        if shell == Shell::Fish {
            out = fish_completes_top_level_values(out);
        }
        assets.push((PathBuf::from("completions").join(file), out));
    }
    // Building propagates global options into the subcommands and names
    // them `nodectl-<sub>`, as their man pages should.
    let mut command = Cli::command();
    command.build();
    let subcommands: Vec<&Command> = command
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .collect();
    let names: Vec<String> = std::iter::once("nodectl".to_string())
        .chain(
            subcommands
                .iter()
                .map(|s| format!("nodectl-{}", s.get_name())),
        )
        .collect();
    assets.push((
        PathBuf::from("man/nodectl.1"),
        man_page(&command, "nodectl", &subcommands, &names),
    ));
    for sub in &subcommands {
        let name = format!("nodectl-{}", sub.get_name());
        let page = man_page(sub, &name, &[], &names);
        assets.push((PathBuf::from("man").join(format!("{name}.1")), page));
    }
    assets
}

/// clap_complete's `__fish_nodectl_needs_command` says "not at the top
/// level" when fish's argparse fails, and it fails exactly while the value
/// of a top-level option is being completed (`nodectl -o <TAB>`: `-o` lacks
/// its value), so fish offered file names there instead of the formats. A
/// parse that fails is taken as "no command yet".
fn fish_completes_top_level_values(script: Vec<u8>) -> Vec<u8> {
    let script = String::from_utf8(script).unwrap();
    let fixed = script.replacen("    or return\n", "    or return 0\n", 1);
    assert_ne!(
        fixed, script,
        "clap_complete's fish script changed: revisit this"
    );
    fixed.into_bytes()
}

/// Text for roff: backslashes and hyphens escaped, no line starting with
/// a control character.
fn roff(text: &str) -> String {
    text.replace('\\', "\\e")
        .replace('-', "\\-")
        .lines()
        .map(|line| {
            if line.starts_with(['.', '\'']) {
                format!("\\&{line}")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn bold(text: &str) -> String {
    format!("\\fB{}\\fR", roff(text))
}

fn italic(text: &str) -> String {
    format!("\\fI{}\\fR", roff(text))
}

/// An indented list: each item a bold term and its text.
fn items(out: &mut String, items: &[(String, String)]) {
    for (term, text) in items {
        out.push_str(&format!(".TP\n{term}\n{}\n", roff(text)));
    }
}

/// `[--flag VALUE]` per option, values named (clap_mangen's synopsis
/// leaves them out), positionals last.
fn synopsis(cmd: &Command, name: &str) -> String {
    let mut line = bold(&name.replacen('-', " ", 1));
    let value = |arg: &Arg| {
        arg.get_value_names()
            .map(|names| names.join(" "))
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase())
    };
    for arg in cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
    {
        let mut flag = Vec::new();
        if let Some(short) = arg.get_short() {
            flag.push(bold(&format!("-{short}")));
        }
        if let Some(long) = arg.get_long() {
            flag.push(bold(&format!("--{long}")));
        }
        let mut option = flag.join("|");
        if arg.get_action().takes_values() {
            option.push(' ');
            option.push_str(&italic(&value(arg)));
        }
        line.push_str(&format!(" [{option}]"));
    }
    for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        line.push(' ');
        line.push_str(&italic(&value(arg)));
    }
    if cmd.has_subcommands() {
        line.push(' ');
        line.push_str(&italic("COMMAND"));
    }
    format!(".SH SYNOPSIS\n{line}\n")
}

/// Every finding kind: its name, severity and what it means.
const KINDS: &[(&str, &str, &str)] = &[
    (
        "zombie",
        "critical",
        "CRI shows the container RUNNING but its process is gone: the pod is wedged until CRI records the exit.",
    ),
    (
        "late-exit",
        "warning",
        "CRI recorded an exit long after it happened (--late-after), within --since: the node had a stall then.",
    ),
    (
        "leaked-shim",
        "critical",
        "A shim that no container record owns and that serves no live process; nodectl leaked-shims --kill ends it.",
    ),
    (
        "leaked-mount",
        "warning",
        "A task rootfs, sandbox shm or image volume still mounted for an id containerd has no record of.",
    ),
    (
        "orphan-bundle",
        "warning",
        "A bundle directory with no container record and no shim.",
    ),
    (
        "leaked-snapshot",
        "warning",
        "An active snapshot no container uses, no lease holds and no GC label keeps, unchanged for --grace (only leaked-snapshots lists snapshots).",
    ),
    (
        "leaked-ip",
        "warning",
        "An address host-local holds for a pod sandbox that neither containerd nor CRI knows any more (its CNI DEL failed or never ran); a used-up range stops every new pod.",
    ),
    (
        "leaked-sandbox",
        "warning",
        "A pod sandbox CRI keeps NotReady with no container long after its creation (its start or teardown ended part way); it holds the pod's network namespace, address and name.",
    ),
    (
        "duplicate-sandbox-name",
        "critical",
        "Two sandbox containers in containerd's records carry one CRI sandbox name; containerd's next start-up cannot reserve it and exits.",
    ),
    (
        "orphan-pod-dir",
        "warning",
        "A kubelet pod directory whose uid no sandbox has; the volume mounts still below it are the evidence, and it is never offered for removal.",
    ),
    (
        "leaked-pod-cgroup",
        "warning",
        "A kubelet pod cgroup whose uid no sandbox has, with the processes still in it counted; kubelet's housekeeping grows with each one.",
    ),
    (
        "failing-sandbox",
        "warning",
        "A pod kubelet has (its directory and log directory) with no sandbox past the grace: Pending while RunPodSandbox keeps failing; its cgroup and directory are kubelet's, never leaked.",
    ),
    (
        "leaked-netns",
        "warning",
        "A pod network namespace CRI made that no sandbox record names and nothing holds (no thread in it, no descriptor on it, no foreign interface); it keeps the pod's veth and address.",
    ),
    (
        "cri-drift",
        "warning",
        "CRI's view disagrees with containerd's (RUNNING against a stopped task, or a record only one side has).",
    ),
    (
        "cri-slow",
        "critical",
        "CRI answered ContainerStatus slower than --slow, or not at all: that container's status lock is held and kubelet's relist stalls (a slow ListContainers alone is a warning).",
    ),
    (
        "shim-blocked",
        "critical",
        "A shim thread in umount2 or in uninterruptible sleep in two samples a second apart.",
    ),
    (
        "api-unreachable",
        "critical",
        "containerd's or CRI's API did not connect or answer Version before --timeout. With nothing at the socket and no containerd process, there is no containerd to reach: that is a gap (exit 2), not this finding.",
    ),
];

/// The names of `kinds`.
fn names(kinds: &[Kind]) -> Vec<&'static str> {
    kinds.iter().map(|k| k.as_str()).collect()
}

/// The kinds a command reports: what it runs.
fn kinds_of(command: &str) -> Vec<&'static str> {
    match command {
        "nodectl" | "check" | "serve" | "watch" => KINDS.iter().map(|k| k.0).collect(),
        "zombies" => names(commands::zombies::KINDS),
        "leaked-shims" => names(commands::leaked_shims::KINDS),
        "leaked-mounts" => names(commands::leaked_mounts::KINDS),
        "leaked-snapshots" => names(commands::leaked_snapshots::KINDS),
        "leaked-ips" => names(commands::leaked_ips::KINDS),
        "leaked-sandboxes" => names(commands::leaked_sandboxes::KINDS),
        "leaked-pod-cgroups" => names(commands::leaked_pod_cgroups::KINDS),
        "leaked-netns" => names(commands::leaked_netns::KINDS),
        _ => vec![],
    }
}

fn examples(command: &str) -> Vec<(&'static str, &'static str)> {
    match command {
        "nodectl" | "check" => vec![
            ("nodectl check", "Every check, as a list that fits the terminal."),
            (
                "nodectl check -o wide",
                "The same, with each finding's evidence, likely cause and what to do.",
            ),
            (
                "nodectl check -o json | jq '.findings[] | select(.severity == \"critical\")'",
                "The critical findings, for a script.",
            ),
            (
                "nodectl --address /run/k3s/containerd/containerd.sock check",
                "Point at k3s's containerd by its socket (a running containerd is found without it).",
            ),
            (
                "nodectl check -q; echo $?",
                "Only the exit status: 0, 1 or 2.",
            ),
            (
                "nodectl collect node-a.tar.gz && nodectl check --from node-a.tar.gz",
                "Check the evidence of another node, here or elsewhere.",
            ),
        ],
        "collect" => vec![
            (
                "nodectl collect node-a.tar.gz",
                "Write the evidence (mode 0600); then, anywhere: nodectl check --from node-a.tar.gz.",
            ),
        ],
        "zombies" => vec![
            ("nodectl zombies", "Zombies, and exits recorded late in the last 24 hours."),
            (
                "nodectl zombies --late-after 1m --since 1h",
                "Exits recorded more than a minute late, in the last hour.",
            ),
        ],
        "shims" => vec![
            ("nodectl shims", "Every shim: its pod, age, memory, what it is blocked in."),
            ("nodectl shims -o wide", "With their namespaces and children."),
        ],
        "leaked-shims" => vec![
            ("nodectl leaked-shims", "The leaked shims, and what --kill would do; nothing is touched."),
            ("nodectl leaked-shims --kill", "End them, after asking and re-checking each one."),
            ("nodectl leaked-shims --kill --yes", "Without asking (stdin not a terminal)."),
        ],
        "serve" => vec![
            (
                "nodectl serve --listen :9101",
                "Serve /metrics and /healthz; the checks run once a minute whatever the scrape rate.",
            ),
            (
                "nodectl serve --listen 127.0.0.1:9101 --interval 30s",
                "On loopback only, checking every 30 seconds.",
            ),
        ],
        "watch" => vec![
            (
                "nodectl watch",
                "A line for each finding as it appears and as it clears; Ctrl-C ends it with a summary.",
            ),
            (
                "nodectl watch -o json | jq -c 'select(.change == \"found\")'",
                "One JSON document per line, for a script: here the new findings only.",
            ),
        ],
        "leaked-mounts" => vec![
            (
                "nodectl leaked-mounts -o wide",
                "Leaked mounts and orphan bundles, with their mount points and directories.",
            ),
            (
                "nodectl leaked-mounts --unmount --remove-bundles",
                "What the cleanup would do; nothing is touched.",
            ),
            (
                "nodectl leaked-mounts --unmount --remove-bundles --yes",
                "Do it, each mount and directory re-checked right before.",
            ),
        ],
        "leaked-snapshots" => vec![
            (
                "nodectl leaked-snapshots -o wide",
                "Leaked snapshots, with their snapshotter, parent and age.",
            ),
            (
                "nodectl leaked-snapshots --remove",
                "What the removal would do; nothing is touched.",
            ),
            (
                "nodectl leaked-snapshots --remove --yes",
                "Remove them, each re-checked right before.",
            ),
        ],
        "leaked-ips" => vec![
            (
                "nodectl leaked-ips -o wide",
                "Leaked pod addresses, with their network, sandbox, pod and the range's use.",
            ),
            (
                "nodectl leaked-ips --release",
                "What the release would do; nothing is touched.",
            ),
            (
                "nodectl leaked-ips --release --yes",
                "Release them under host-local's lock, each re-checked right before.",
            ),
        ],
        "leaked-netns" => vec![
            (
                "nodectl leaked-netns -o wide",
                "Pod network namespaces no sandbox record names and no process is in.",
            ),
            (
                "nodectl leaked-netns --remove",
                "What the release would do; nothing is touched.",
            ),
            (
                "nodectl leaked-netns --remove --yes",
                "Unmount them and remove their files, each re-checked right before.",
            ),
        ],
        "leaked-pod-cgroups" => vec![
            (
                "nodectl leaked-pod-cgroups -o wide",
                "Pod cgroups whose pod has no sandbox, with their uid, QoS class and processes.",
            ),
            (
                "nodectl leaked-pod-cgroups --remove",
                "What the removal would do; nothing is touched.",
            ),
            (
                "nodectl leaked-pod-cgroups --remove --yes",
                "Remove those nothing runs in, each re-checked right before.",
            ),
        ],
        "leaked-sandboxes" => vec![
            (
                "nodectl leaked-sandboxes -o wide",
                "Sandboxes left NotReady with no container, with their pod, age and addresses.",
            ),
            (
                "nodectl leaked-sandboxes --remove",
                "What the removal would do; nothing is touched.",
            ),
            (
                "nodectl leaked-sandboxes --remove --yes",
                "Stop and remove them through CRI, each re-checked right before.",
            ),
        ],
        _ => vec![],
    }
}

fn exit_status(command: &str) -> Vec<(String, String)> {
    let status = |n: &str, text: &str| (bold(n), text.to_string());
    if command == "collect" {
        return vec![
            status(
                "0",
                "The archive was written; what could not be read is in it and on stderr.",
            ),
            status("2", "It was not written (or bad usage)."),
        ];
    }
    if command == "serve" {
        return vec![
            status("0", "Stopped by SIGTERM or SIGINT."),
            status("2", "The address could not be bound (or bad usage)."),
        ];
    }
    if command == "watch" {
        return vec![
            status(
                "0",
                "Stopped by SIGTERM or SIGINT (after a summary), or its reader went away.",
            ),
            status("2", "It could not start (or bad usage)."),
        ];
    }
    vec![
        status("0", "Everything was checked and nothing was found."),
        status("1", "Something was found (findings outrank gaps: a report with both exits 1)."),
        status(
            "2",
            "Could not check: part of the node could not be read (the report's gaps), there is no containerd on the node, or bad usage.",
        ),
    ]
}

fn man_page(cmd: &Command, name: &str, subcommands: &[&Command], names: &[String]) -> Vec<u8> {
    let command = name.strip_prefix("nodectl-").unwrap_or(name);
    let man = clap_mangen::Man::new(cmd.clone())
        .title(name)
        .source(format!("nodectl {VERSION}"))
        .manual("nodectl manual");
    let mut page = Vec::new();
    man.render_title(&mut page).unwrap();
    man.render_name_section(&mut page).unwrap();
    let mut text = synopsis(cmd, name);
    page.append(&mut std::mem::take(&mut text).into_bytes());
    man.render_description_section(&mut page).unwrap();
    man.render_options_section(&mut page).unwrap();

    if !subcommands.is_empty() {
        text.push_str(".SH COMMANDS\n");
        let list: Vec<(String, String)> = subcommands
            .iter()
            .map(|sub| {
                let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
                (
                    format!("{}(1)", bold(&format!("nodectl-{}", sub.get_name()))),
                    about,
                )
            })
            .collect();
        items(&mut text, &list);
    }
    let kinds = kinds_of(command);
    if !kinds.is_empty() {
        text.push_str(".SH FINDING KINDS\n");
        let list: Vec<(String, String)> = KINDS
            .iter()
            .filter(|(kind, _, _)| kinds.contains(kind))
            .map(|(kind, severity, what)| {
                (format!("{} ({severity})", bold(kind)), what.to_string())
            })
            .collect();
        items(&mut text, &list);
        text.push_str(&format!(
            ".PP\n{}\n",
            roff("Each finding has a kind, a severity, an id, a one-line summary, evidence, a likely cause and what to do; the table lists the first four and the summary, -o wide and -o json have everything.")
        ));
    }
    text.push_str(".SH EXIT STATUS\n");
    items(&mut text, &exit_status(command));
    text.push_str(".SH ENVIRONMENT\n");
    items(
        &mut text,
        &[
            (
                bold("NO_COLOR"),
                "Set and not empty: no colour in the table (no-color.org).".to_string(),
            ),
            (
                bold("TERM"),
                "Unset or dumb: no colour. Colour is only ever used on a terminal.".to_string(),
            ),
            (
                bold("COLUMNS"),
                "The width the table fits when stdout is not a terminal (80 if unset); on a terminal, the terminal's width."
                    .to_string(),
            ),
        ],
    );
    text.push_str(".SH FILES\n");
    let files = [
        ("/etc/containerd/config.toml", "containerd's config, read for the root, state and socket, unless the running containerd names another (-c) or --config does."),
        ("/var/lib/containerd", "containerd's root: CRI's container status files (io.containerd.grpc.v1.cri/containers)."),
        ("/run/containerd", "containerd's state: task bundles (io.containerd.runtime.v2.task/NAMESPACE) and sandbox shm."),
        ("/run/containerd/containerd.sock", "The API socket, containerd's and CRI's."),
        ("/proc", "The running containerd (whose flags name the paths on k3s, rke2 and microk8s), its shims and their threads; its own /proc/PID/mountinfo for the mounts (the mount namespace they live in), /proc/self/mountinfo when no containerd is identified."),
    ];
    items(
        &mut text,
        &files
            .iter()
            .map(|(path, what)| (italic(path), what.to_string()))
            .collect::<Vec<_>>(),
    );
    let examples = examples(command);
    if !examples.is_empty() {
        text.push_str(".SH EXAMPLES\n");
        items(
            &mut text,
            &examples
                .iter()
                .map(|(line, what)| (bold(line), what.to_string()))
                .collect::<Vec<_>>(),
        );
    }
    text.push_str(".SH SEE ALSO\n");
    let mut see: Vec<String> = names
        .iter()
        .filter(|n| n.as_str() != name)
        .map(|n| format!("{}(1)", bold(n)))
        .collect();
    see.extend(
        [("containerd", 8), ("ctr", 8), ("crictl", 1), ("kubectl", 1)]
            .map(|(n, section)| format!("{}({section})", bold(n))),
    );
    text.push_str(&format!("{}\n", see.join(", ")));
    text.push_str(&format!(".SH VERSION\nv{VERSION}\n"));
    page.extend_from_slice(text.as_bytes());
    page
}

#[test]
fn completions_and_man_pages_are_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let update = std::env::var_os("NODECTL_UPDATE_ASSETS").is_some();
    let mut stale = Vec::new();
    for (relative, content) in expected_assets() {
        let path = root.join(&relative);
        if fs::read(&path).ok().as_deref() == Some(content.as_slice()) {
            continue;
        }
        if update {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, &content).unwrap();
        } else {
            stale.push(relative.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}: run NODECTL_UPDATE_ASSETS=1 cargo test --test generated_assets"
    );
}

/// A generated file, as [`completions_and_man_pages_are_fresh`] checks it
/// in (read from the generator, so that an update run does not race it).
fn generated(relative: &str) -> String {
    let (_, content) = expected_assets()
        .into_iter()
        .find(|(path, _)| path == Path::new(relative))
        .unwrap_or_else(|| panic!("{relative} is not generated"));
    String::from_utf8(content).unwrap()
}

/// What `man nodectl-check` readers look for, in every checked-in page:
/// the sections, `NO_COLOR`, only pages that exist, and (for the commands
/// that find them) every finding kind the JSON schema knows.
#[test]
fn man_pages_have_the_sections_users_look_for() {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/report-v1.schema.json");
    let schema: serde_json::Value = serde_json::from_slice(&fs::read(schema).unwrap()).unwrap();
    let schema_kinds: Vec<&str> = schema["$defs"]["finding"]["properties"]["kind"]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("no kind enum in the schema"))
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let documented: Vec<&str> = KINDS.iter().map(|k| k.0).collect();
    assert_eq!(
        documented, schema_kinds,
        "every kind the schema knows, in its order"
    );
    let pages: Vec<(PathBuf, Vec<u8>)> = expected_assets()
        .into_iter()
        .filter(|(path, _)| path.starts_with("man"))
        .collect();
    assert!(pages.len() >= 7, "{pages:?}");
    for (page, text) in &pages {
        let name = page.file_stem().unwrap().to_str().unwrap();
        let text = String::from_utf8_lossy(text);
        for section in [
            ".SH SYNOPSIS",
            ".SH EXIT STATUS",
            ".SH ENVIRONMENT",
            ".SH FILES",
            ".SH EXAMPLES",
            ".SH SEE ALSO",
        ] {
            assert!(text.contains(section), "{name}: no {section}");
        }
        assert!(text.contains("NO_COLOR"), "{name}");
        // Every `\fBnodectl...\fR(1)` names a page that exists.
        for reference in text.split("\\fBnodectl").skip(1) {
            let Some((page, after)) = reference.split_once("\\fR") else {
                continue;
            };
            if after.starts_with("(1)") {
                let page = format!("nodectl{}", page.replace("\\-", "-"));
                assert!(
                    pages
                        .iter()
                        .any(|(p, _)| p.file_stem().unwrap() == page.as_str()),
                    "{name} refers to {page}(1), which does not exist"
                );
            }
        }
        assert!(!text.contains("nodectl\\-help"), "{name}");
        if name == "nodectl" || name == "nodectl-check" {
            for kind in &schema_kinds {
                assert!(
                    text.contains(&format!("\\fB{}\\fR (", kind.replace('-', "\\-"))),
                    "{name}: {kind}"
                );
            }
        }
    }
    // Options in the synopsis name their values.
    let check = generated("man/nodectl-check.1");
    assert!(
        check.contains("[\\fB\\-\\-timeout\\fR \\fIDURATION\\fR]"),
        "{check}"
    );
    assert!(
        check.contains("[\\fB\\-o\\fR|\\fB\\-\\-output\\fR \\fIFORMAT\\fR]"),
        "{check}"
    );
}

/// Completions offer what `--help` shows (no hidden option), formats for
/// `-o` everywhere, and no file names for values that are not files.
#[test]
fn completions_match_help_and_hint_values() {
    let hidden: Vec<String> = Cli::command()
        .get_arguments()
        .filter(|a| a.is_hide_set())
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    assert!(!hidden.is_empty(), "the test needs a hidden option");
    for file in ["nodectl.bash", "_nodectl", "nodectl.fish"] {
        let text = generated(&format!("completions/{file}"));
        for long in &hidden {
            assert!(
                !text.contains(&format!("-{long}")),
                "{file} offers hidden --{long}"
            );
        }
        assert!(text.contains("wide"), "{file}: -o wide");
    }
    let fish = generated("completions/nodectl.fish");
    let line = |condition: &str, flag: &str| {
        fish.lines()
            .find(|l| l.contains(condition) && l.contains(flag))
            .unwrap_or_else(|| panic!("no fish line for {flag} under {condition}"))
            .to_string()
    };
    let top = "\"__fish_nodectl_needs_command\"";
    // `-f -a` lists the formats and turns file names off.
    assert!(
        line(top, "-s o -l output").contains(" -f -a \"table"),
        "{fish}"
    );
    for flag in ["-l timeout", "-s n -l namespace"] {
        for condition in [top, "__fish_nodectl_using_subcommand check"] {
            let line = line(condition, flag);
            assert!(line.contains(" -r -f"), "files offered for {flag}: {line}");
        }
    }
    let bash = generated("completions/nodectl.bash");
    let timeout = bash
        .split("--timeout)")
        .nth(1)
        .and_then(|rest| rest.split(";;").next())
        .unwrap_or_else(|| panic!("no --timeout case in bash completion"));
    assert!(
        !timeout.contains("compgen -f"),
        "bash offers files for --timeout: {timeout}"
    );
}

/// The fish script, run by fish: formats after a top-level `-o` too, and no
/// file names for `--timeout` or `-n` (a file sits in the directory).
#[test]
fn fish_completes_formats_and_no_file_names_for_durations() {
    let have_fish = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join("fish").is_file()));
    if !have_fish {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "no fish (package fish), and CI is set");
        eprintln!("skipping fish_completes_formats_and_no_file_names_for_durations: no fish");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("nodectl.fish");
    fs::write(&script, generated("completions/nodectl.fish")).unwrap();
    fs::write(dir.path().join("a-file"), "").unwrap();
    let complete = |line: &str| {
        let output = std::process::Command::new("fish")
            .arg("--no-config")
            .arg("-c")
            .arg(format!("source {}; complete -C '{line}'", script.display()))
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{line}: {output:?}");
        let words: Vec<String> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect();
        words
    };
    // Every format --help lists, in fish's (sorted) order.
    let mut formats: Vec<String> = Cli::command()
        .get_arguments()
        .find(|a| a.get_id() == "output")
        .expect("a global -o")
        .get_possible_values()
        .iter()
        .map(|v| v.get_name().to_string())
        .collect();
    formats.sort();
    assert!(formats.len() >= 5, "{formats:?}");
    for line in [
        "nodectl -o ",
        "nodectl check -o ",
        "nodectl -n k8s.io --output ",
    ] {
        assert_eq!(complete(line), formats, "{line}");
    }
    for line in [
        "nodectl --timeout ",
        "nodectl check -n ",
        "nodectl zombies --settle ",
    ] {
        assert_eq!(complete(line), Vec::<String>::new(), "{line}");
    }
    assert!(complete("nodectl --root ").is_empty(), "directories only");
    assert!(!complete("nodectl check --").contains(&"--proc-root".to_string()));
}
