//! Real CNI networking for the test bed ([`TestBed::start_networked`]):
//! Debian's plugins (containernetworking-plugins) wire each pod to a bridge
//! in a network namespace containerd has to itself, host-local hands out
//! the addresses of [`SUBNET`] and keeps them as files in the bed's temp
//! dir, and a chained plugin of the bed's own lets a test make the CNI
//! calls fail the way they fail on nodes.
//!
//! What stays outside the temp dir, and teardown removes: libcni's cache of
//! each ADD result, `/var/lib/cni/results/<network>-<sandbox id>-<ifname>`
//! (containerd gives libcni no other cache dir, and libcni only deletes an
//! entry once a DEL went through).

use std::collections::BTreeSet;
use std::fs;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use super::testbed::TestBed;

/// Where Debian's containernetworking-plugins puts the plugins.
pub const PLUGINS_DIR: &str = "/usr/lib/cni";
/// The plugins the bed's conflist runs (loopback: containerd's own `lo`
/// network; tuning: what the chained plugin runs when it does not fail).
const PLUGINS: &[&str] = &["bridge", "host-local", "loopback", "tuning"];
/// host-local's range: five addresses for pods (.2–.6; .1 is the bridge's).
pub const SUBNET: &str = "10.251.0.0/29";
/// How many pods [`SUBNET`] holds.
pub const POD_ADDRESSES: usize = 5;
/// host-local's message once the range is used up (plugins 1.x).
pub const EXHAUSTED: &str = "no IP addresses available in range set";
/// The chained plugin's type: a script in the bed's bin dir.
pub const CHAINED: &str = "nodectl-chained";
/// libcni's cache of ADD results (its default; containerd sets no other).
const RESULTS: &str = "/var/lib/cni/results";

/// The bed's CNI setup: where everything is, and containerd's network
/// namespace, held so that a restarted containerd joins it again.
pub struct Cni {
    /// The network's name, unique per bed: host-local's dir under
    /// `data_dir` and the prefix of libcni's cache entries.
    pub network: String,
    pub bin_dir: PathBuf,
    pub conf_dir: PathBuf,
    /// host-local's `dataDir`: `<data_dir>/<network>/<ip>` per address.
    pub data_dir: PathBuf,
    /// host-local's range ([`SUBNET`] unless the bed was started on another).
    subnet: &'static str,
    /// The chained plugin's switches.
    fault_dir: PathBuf,
    /// containerd's network namespace, once it runs.
    netns: Option<OwnedFd>,
    /// What shares the node with CRI (see [`Neighbours`]), once started.
    neighbours: Option<Neighbours>,
}

/// An address host-local handed out: the file it keeps for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpFile {
    pub ip: Ipv4Addr,
    /// The file's first line: the sandbox id CNI was called with.
    pub container_id: String,
    pub path: PathBuf,
}

/// A pod address whose sandbox CRI no longer lists (see [`TestBed::leak_pod_ip`]).
#[derive(Clone, Debug)]
pub struct LeakedIp {
    pub ip: Ipv4Addr,
    pub sandbox_id: String,
    /// host-local's file for the address, naming `sandbox_id`.
    pub file: PathBuf,
}

/// A CNI ADD the chained plugin hangs in (see [`Cni::hang_add`]).
#[derive(Clone, Debug)]
pub struct HungAdd {
    pub pid: i32,
    /// The sandbox CNI was called for (`CNI_CONTAINERID`).
    pub sandbox_id: String,
    /// The pod's network namespace (`CNI_NETNS`), as containerd named it.
    pub netns: PathBuf,
}

/// Why the plugins the networked bed needs are not there, if they are not.
pub(crate) fn plugins_present() -> Result<(), String> {
    let missing: Vec<&str> = PLUGINS
        .iter()
        .copied()
        .filter(|p| !Path::new(PLUGINS_DIR).join(p).is_file())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "missing CNI plugins {} in {PLUGINS_DIR} (package containernetworking-plugins)",
        missing.join(", ")
    ))
}

/// Networked beds alive in this process, and the dirs of [`RESULTS`] the
/// first of them found missing: the last one's teardown removes those
/// (when empty), so that no bed leaves `/var/lib/cni` behind.
static LIVE: Mutex<(usize, Vec<PathBuf>)> = Mutex::new((0, Vec::new()));

impl Cni {
    /// Writes the bin dir (the plugins linked from [`PLUGINS_DIR`], the
    /// chained script) and the conflist into the bed's `dir`.
    pub(crate) fn write(dir: &Path, subnet: &'static str) -> Result<Cni, String> {
        let suffix = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .trim_start_matches("nodectl-testbed-")
            .to_string();
        let cni = Cni {
            network: format!("nodectl-{suffix}"),
            bin_dir: dir.join("cni/bin"),
            conf_dir: dir.join("cni/conf"),
            data_dir: dir.join("cni/ipam"),
            subnet,
            fault_dir: dir.join("cni/fault"),
            netns: None,
            neighbours: None,
        };
        let io = |path: &Path, e: std::io::Error| format!("{}: {e}", path.display());
        for sub in [&cni.bin_dir, &cni.conf_dir, &cni.data_dir, &cni.fault_dir] {
            fs::create_dir_all(sub).map_err(|e| io(sub, e))?;
        }
        for plugin in PLUGINS {
            let link = cni.bin_dir.join(plugin);
            std::os::unix::fs::symlink(Path::new(PLUGINS_DIR).join(plugin), &link)
                .map_err(|e| io(&link, e))?;
        }
        cni.restore_chained_plugin()?;
        let conflist = cni.conf_dir.join("10-nodectl.conflist");
        fs::write(&conflist, cni.conflist()).map_err(|e| io(&conflist, e))?;
        // Another CNI user's network beside CRI's, sorted after it: CRI
        // (max_conf_num 1) never loads it.
        let podman = cni.conf_dir.join(NEIGHBOUR_CONFLIST);
        let list = serde_json::json!({
            "cniVersion": "1.0.0",
            "name": NEIGHBOUR_NETWORK,
            "plugins": [cni.neighbour_plugin()],
        });
        fs::write(&podman, format!("{list:#}\n")).map_err(|e| io(&podman, e))?;
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        if live.0 == 0 {
            live.1 = [RESULTS, "/var/lib/cni"]
                .iter()
                .map(PathBuf::from)
                .filter(|d| !d.exists())
                .collect();
        }
        live.0 += 1;
        Ok(cni)
    }

    /// Bridge + host-local (no masquerading: nothing of the machine's
    /// iptables is touched), then the chained plugin.
    fn conflist(&self) -> String {
        let network = &self.network;
        let data_dir = self.data_dir.display();
        let subnet = self.subnet;
        format!(
            r#"{{
  "cniVersion": "1.0.0",
  "name": "{network}",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "nodectl0",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {{
        "type": "host-local",
        "ranges": [[{{"subnet": "{subnet}"}}]],
        "dataDir": "{data_dir}"
      }}
    }},
    {{
      "type": "{CHAINED}"
    }}
  ]
}}
"#
        )
    }

    /// Sets `command` to run in the bed's network namespace: a new one
    /// (loopback up, for CRI's streaming server on 127.0.0.1) until
    /// [`Cni::hold_netns`] holds one, that one after.
    pub(crate) fn own_netns(&self, command: &mut Command) {
        let held = self.netns.as_ref().map(|fd| fd.as_raw_fd());
        // SAFETY: between fork and exec the closure makes only raw system
        // calls (setns, unshare, socket, ioctl, close) and allocates nothing.
        unsafe {
            command.pre_exec(move || match held {
                Some(fd) => match nix::libc::setns(fd, nix::libc::CLONE_NEWNET) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                },
                None => {
                    if nix::libc::unshare(nix::libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    loopback_up()
                }
            });
        }
    }

    /// Holds the network namespace of `pid` (containerd, just started),
    /// which must not be the test's: a bridge there would be the machine's.
    pub(crate) fn hold_netns(&mut self, pid: u32) -> Result<(), String> {
        let path = format!("/proc/{pid}/ns/net");
        let file = fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        let theirs = fs::read_link(&path).map_err(|e| format!("{path}: {e}"))?;
        let ours = fs::read_link("/proc/self/ns/net").map_err(|e| format!("own netns: {e}"))?;
        if theirs == ours {
            return Err(format!(
                "containerd ({pid}) runs in the test's network namespace ({})",
                ours.display()
            ));
        }
        self.netns = Some(OwnedFd::from(file));
        Ok(())
    }

    /// The chained plugin's script, in the bin dir: what a missing binary
    /// would fail is [`Cni::remove_chained_plugin`]'s to show.
    pub(crate) fn restore_chained_plugin(&self) -> Result<(), String> {
        let fail_del = self.fault_dir.join("fail-del");
        let script = format!(
            "#!/bin/sh\n\
             # The nodectl test bed's chained CNI plugin: tuning with nothing to\n\
             # tune (it passes the previous result through), unless the test made\n\
             # DEL fail: then it prints the CNI error in fail-del and exits 1.\n\
             if [ \"$CNI_COMMAND\" = DEL ] && [ -f '{fail}' ]; then\n\
             \x20   cat '{fail}'\n\
             \x20   exit 1\n\
             fi\n\
             # Or made ADD fail: it prints the CNI error in fail-add, exits 1.\n\
             if [ \"$CNI_COMMAND\" = ADD ] && [ -f '{fail_add}' ]; then\n\
             \x20   cat '{fail_add}'\n\
             \x20   exit 1\n\
             fi\n\
             # Or made ADD hang: it says its pid, the sandbox and its netns\n\
             # in in-add, and sleeps.\n\
             if [ \"$CNI_COMMAND\" = ADD ] && [ -f '{hang}' ]; then\n\
             \x20   echo $$ \"$CNI_CONTAINERID\" \"$CNI_NETNS\" > '{in_add}.new'\n\
             \x20   mv '{in_add}.new' '{in_add}'\n\
             \x20   exec sleep 600\n\
             fi\n\
             exec {PLUGINS_DIR}/tuning\n",
            fail = fail_del.display(),
            fail_add = self.fault_dir.join("fail-add").display(),
            hang = self.fault_dir.join("hang-add").display(),
            in_add = self.fault_dir.join("in-add").display(),
        );
        let path = self.bin_dir.join(CHAINED);
        let io = |e: std::io::Error| format!("{}: {e}", path.display());
        // Written aside and renamed: a plugin half written is never run.
        let aside = self.bin_dir.join(format!(".{CHAINED}"));
        fs::write(&aside, script).map_err(io)?;
        fs::set_permissions(&aside, fs::Permissions::from_mode(0o755)).map_err(io)?;
        fs::rename(&aside, &path).map_err(io)
    }

    /// Removes the chained plugin's binary, as an installer that removed a
    /// chained plugin's binary but not its conflist entry did
    /// (containerd#12130): every ADD and every DEL of the network fails
    /// with libcni's `failed to find plugin "nodectl-chained" in path`.
    pub(crate) fn remove_chained_plugin(&self) -> Result<(), String> {
        let path = self.bin_dir.join(CHAINED);
        fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Makes the chained plugin's DEL fail with `message` (a CNI error,
    /// code 11: "try again later"); ADD still passes.
    pub(crate) fn fail_del(&self, message: &str) -> Result<(), String> {
        let path = self.fault_dir.join("fail-del");
        let error = serde_json::json!({"cniVersion": "1.0.0", "code": 11, "msg": message});
        fs::write(&path, format!("{error}\n")).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Makes the chained plugin's ADD fail with `message` (bridge and
    /// host-local have run; containerd's deferred teardown DELs them).
    pub(crate) fn fail_add(&self, message: &str) -> Result<(), String> {
        let path = self.fault_dir.join("fail-add");
        let error = serde_json::json!({"cniVersion": "1.0.0", "code": 11, "msg": message});
        fs::write(&path, format!("{error}\n")).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Makes the chained plugin's ADD hang (bridge and host-local have
    /// run: the pod has its address and its veth) until
    /// [`Cni::end_hung_add`].
    pub(crate) fn hang_add(&self) -> Result<(), String> {
        let path = self.fault_dir.join("hang-add");
        fs::write(&path, "").map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The chained plugin hanging in ADD, once one does.
    pub(crate) fn hung_add(&self) -> Option<HungAdd> {
        let text = fs::read_to_string(self.fault_dir.join("in-add")).ok()?;
        let mut fields = text.split_whitespace();
        Some(HungAdd {
            pid: fields.next()?.parse().ok()?,
            sandbox_id: fields.next()?.to_string(),
            netns: PathBuf::from(fields.next()?),
        })
    }

    /// Kills the chained plugin hanging in ADD, if one does, and reaps
    /// nothing: its parent (containerd) does, or PID 1 once that died.
    pub(crate) fn end_hung_add(&self) {
        if let Some(hung) = self.hung_add() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(hung.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = fs::remove_file(self.fault_dir.join("in-add"));
    }

    /// The chained plugin back to passing everything.
    pub(crate) fn clear_faults(&self) -> Result<(), String> {
        for fault in ["fail-del", "fail-add", "hang-add"] {
            let path = self.fault_dir.join(fault);
            match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format!("{}: {e}", path.display()))
                }
                _ => {}
            }
        }
        self.end_hung_add();
        self.restore_chained_plugin()
    }

    /// The addresses host-local holds for the bed's network, by address.
    pub fn ip_files(&self) -> Vec<IpFile> {
        let dir = self.data_dir.join(&self.network);
        let mut files: Vec<IpFile> = fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let ip: Ipv4Addr = entry.file_name().to_str()?.parse().ok()?;
                let text = fs::read_to_string(entry.path()).ok()?;
                let container_id = text.lines().next()?.trim().to_string();
                Some(IpFile {
                    ip,
                    container_id,
                    path: entry.path(),
                })
            })
            .collect();
        files.sort_by_key(|f| f.ip);
        files
    }

    /// Removes what libcni cached outside the bed for it: every entry of
    /// its network, and the loopback network's of the sandboxes in `ids`;
    /// the last networked bed of the process removes the dirs the first
    /// one found missing, when empty. Returns what it could not remove.
    pub(crate) fn teardown(&mut self, ids: &BTreeSet<String>) -> Vec<String> {
        self.end_hung_add();
        if let Some(mut neighbours) = self.neighbours.take() {
            let _ = neighbours.live.kill();
            let _ = neighbours.live.wait();
            if let Some((leave, thread)) = neighbours.thread.take() {
                drop(leave);
                let _ = thread.join();
            }
        }
        self.netns = None;
        let ours = format!("{}-", self.network);
        let mut problems: Vec<String> = fs::read_dir(RESULTS)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.starts_with(&ours)
                    || name
                        .strip_prefix("cni-loopback-")
                        .and_then(|rest| rest.strip_suffix("-lo"))
                        .is_some_and(|id| ids.contains(id))
            })
            .filter_map(|entry| {
                fs::remove_file(entry.path())
                    .err()
                    .map(|e| format!("{}: {e}", entry.path().display()))
            })
            .collect();
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.0 = live.0.saturating_sub(1);
        if live.0 == 0 {
            for dir in live.1.drain(..) {
                match fs::remove_dir(&dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        problems.push(format!("{}: {e}", dir.display()))
                    }
                    _ => {}
                }
            }
        }
        problems
    }
}

/// The second CNI user's conflist in CRI's `conf_dir`, sorted after the
/// bed's own, as podman writes its default network.
pub const NEIGHBOUR_CONFLIST: &str = "87-podman.conflist";
/// Its network: its own bridge and subnet, its store beside the bed's.
pub const NEIGHBOUR_NETWORK: &str = "podman";
const NEIGHBOUR_BRIDGE: &str = "podman9";
pub const NEIGHBOUR_SUBNET: &str = "10.88.9.0/29";
/// The container id podman's ADD is made for: a podman-style 64-hex id
/// containerd never had.
pub const NEIGHBOUR_ID: &str = "f00df00df00df00df00df00df00df00df00df00df00df00df00df00df00df00d";
/// An administrator's namespace in CRI's netns dir, as `ip netns add`
/// names it.
pub const ADMIN_NETNS: &str = "admin-net";
/// Another, empty (`ip netns add blue` and nothing more).
pub const ADMIN_EMPTY_NETNS: &str = "blue";

/// What shares a node with CRI, beside every networked bed:
/// - a live process (podman's container) in a namespace of its own, whose
///   `eth0` and address were given by a real bridge + host-local ADD of
///   [`NEIGHBOUR_NETWORK`] (its reservation in that network's store);
/// - in CRI's netns dir: an administrator's namespace ([`ADMIN_NETNS`])
///   holding `vadm0`, whose peer `vlive0` is in the live process's
///   namespace, and an empty one ([`ADMIN_EMPTY_NETNS`]); a namespace named as CRI names them that nothing but an
///   open descriptor of the live process holds (`held`); and one named so
///   that nothing holds but which holds `vnb0`, whose peer `vlive1` is in
///   the live process's namespace (`foreign`); and one, named so, that
///   only a thread of the test process (not its main one) is in.
///
/// None of it is CRI's to report or remove.
pub struct Neighbours {
    live: std::process::Child,
    /// The live process (`sleep`, in its own network namespace).
    pub live_pid: i32,
    /// podman's reservation: the address and host-local's file for it.
    pub podman_ip: Ipv4Addr,
    pub podman_file: PathBuf,
    pub admin_netns: PathBuf,
    pub admin_empty_netns: PathBuf,
    pub held_netns: PathBuf,
    pub foreign_netns: PathBuf,
    /// Named as CRI names them; only a thread (not the main one) of the
    /// test process is in it.
    pub thread_netns: PathBuf,
    /// That thread, which leaves once the sender is dropped.
    thread: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Neighbours {
    /// The file names of their namespaces in CRI's netns dir.
    pub fn netns_names(&self) -> Vec<String> {
        [
            &self.admin_netns,
            &self.admin_empty_netns,
            &self.held_netns,
            &self.foreign_netns,
            &self.thread_netns,
        ]
        .iter()
        .filter_map(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
    }

    /// The interfaces of the live process's namespace.
    pub fn live_interfaces(&self) -> Vec<String> {
        fs::read_to_string(format!("/proc/{}/net/dev", self.live_pid))
            .unwrap_or_default()
            .lines()
            .skip(2)
            .filter_map(|l| l.split_once(':'))
            .map(|(name, _)| name.trim().to_string())
            .collect()
    }

    /// The IPv4 addresses configured in the live process's namespace.
    pub fn live_addresses(&self) -> String {
        let output = Command::new("nsenter")
            .arg(format!("--net=/proc/{}/ns/net", self.live_pid))
            .args(["ip", "-4", "-o", "addr", "show"])
            .output();
        output
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }
}

/// A namespace name as containerd's pkg/netns makes them: `cni-` and 16
/// random bytes as 8-4-4-4-12 hex.
fn cri_style_name() -> String {
    let bytes: [u8; 16] = std::array::from_fn(|_| rand_byte());
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "cni-{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

fn rand_byte() -> u8 {
    let mut byte = [0u8; 1];
    let _ = fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut byte));
    byte[0]
}

/// Runs `command`, failing with its output unless it succeeds.
fn must_run(command: &mut Command) -> Result<std::process::Output, String> {
    let shown = format!("{command:?}");
    let output = command.output().map_err(|e| format!("{shown}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{shown}: {}: {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(output)
}

impl Cni {
    /// podman's bridge plugin config (host-local on [`NEIGHBOUR_SUBNET`],
    /// its store beside the bed's).
    fn neighbour_plugin(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "bridge",
            "bridge": NEIGHBOUR_BRIDGE,
            "isGateway": true,
            "ipMasq": false,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": NEIGHBOUR_SUBNET}]],
                "dataDir": self.data_dir,
            }
        })
    }

    /// A persistent network namespace at `path`, as `ip netns add` makes
    /// one (an nsfs bind mount on an empty file).
    fn add_netns(path: &Path) -> Result<(), String> {
        fs::write(path, "").map_err(|e| format!("{}: {e}", path.display()))?;
        must_run(
            Command::new("unshare")
                .arg(format!("--net={}", path.display()))
                .arg("true"),
        )?;
        Ok(())
    }

    /// A veth pair: `inside` in the namespace at `netns`, `peer` in
    /// process `pid`'s.
    fn veth(netns: &Path, inside: &str, peer: &str, pid: u32) -> Result<(), String> {
        must_run(
            Command::new("nsenter")
                .arg(format!("--net={}", netns.display()))
                .args([
                    "ip", "link", "add", inside, "type", "veth", "peer", "name", peer,
                ])
                .args(["netns", &pid.to_string()]),
        )?;
        Ok(())
    }

    /// Starts the [`Neighbours`] in CRI's netns dir `netns_dir`, podman's
    /// ADD run in containerd's network namespace (where the bed's bridge
    /// is), once [`Cni::hold_netns`] holds it.
    pub(crate) fn start_neighbours(&mut self, netns_dir: &Path) -> Result<(), String> {
        let started = self.make_neighbours(netns_dir);
        if started.is_err() {
            // Their mounts would keep the bed's dir from being removed.
            for entry in fs::read_dir(netns_dir).into_iter().flatten().flatten() {
                let _ = nix::mount::umount2(&entry.path(), nix::mount::MntFlags::MNT_DETACH);
            }
        }
        started
    }

    fn make_neighbours(&mut self, netns_dir: &Path) -> Result<(), String> {
        fs::create_dir_all(netns_dir).map_err(|e| format!("{}: {e}", netns_dir.display()))?;
        let admin_netns = netns_dir.join(ADMIN_NETNS);
        let admin_empty_netns = netns_dir.join(ADMIN_EMPTY_NETNS);
        let held_netns = netns_dir.join(cri_style_name());
        let foreign_netns = netns_dir.join(cri_style_name());
        let thread_netns = netns_dir.join(cri_style_name());
        for netns in [
            &admin_netns,
            &admin_empty_netns,
            &held_netns,
            &foreign_netns,
            &thread_netns,
        ] {
            Cni::add_netns(netns)?;
        }
        let thread = Cni::thread_in(&thread_netns)?;
        // The live process: in a namespace of its own, holding `held`
        // open (descriptor 3), doing nothing.
        let mut live = Command::new("unshare")
            .args([
                "--net",
                "--",
                "sh",
                "-c",
                "exec 3<\"$0\"; exec sleep 100000",
            ])
            .arg(&held_netns)
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("unshare: {e}"))?;
        let pid = live.id();
        let started = super::wait_until(std::time::Duration::from_secs(10), || {
            fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
        });
        let result = (|| {
            if !started {
                return Err("the neighbour's process did not start".to_string());
            }
            Cni::veth(&admin_netns, "vadm0", "vlive0", pid)?;
            Cni::veth(&foreign_netns, "vnb0", "vlive1", pid)?;
            self.neighbour_add(pid)
        })();
        match result {
            Ok(podman_ip) => {
                self.neighbours = Some(Neighbours {
                    live,
                    live_pid: pid as i32,
                    podman_ip,
                    podman_file: self
                        .data_dir
                        .join(NEIGHBOUR_NETWORK)
                        .join(podman_ip.to_string()),
                    admin_netns,
                    admin_empty_netns,
                    held_netns,
                    foreign_netns,
                    thread_netns,
                    thread: Some(thread),
                });
                Ok(())
            }
            Err(e) => {
                let _ = live.kill();
                let _ = live.wait();
                Err(e)
            }
        }
    }

    /// A thread of this process in the namespace at `path` (its
    /// descriptor closed once joined), until the sender is dropped.
    fn thread_in(
        path: &Path,
    ) -> Result<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>), String> {
        let netns = fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let (leave, told) = std::sync::mpsc::channel::<()>();
        let (joined, answer) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let result = nix::sched::setns(&netns, nix::sched::CloneFlags::CLONE_NEWNET);
            drop(netns);
            let _ = joined.send(result.map_err(|e| e.to_string()));
            // Until told to leave (the sender dropped).
            let _ = told.recv();
        });
        match answer.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(Ok(())) => Ok((leave, thread)),
            Ok(Err(e)) => Err(format!("setns into {}: {e}", path.display())),
            Err(e) => Err(format!("the thread into {}: {e}", path.display())),
        }
    }

    /// podman's ADD for process `pid`: the real bridge plugin (host-local
    /// under it) run as libcni runs it, in containerd's namespace.
    fn neighbour_add(&self, pid: u32) -> Result<Ipv4Addr, String> {
        let mut config = self.neighbour_plugin();
        config["cniVersion"] = "1.0.0".into();
        config["name"] = NEIGHBOUR_NETWORK.into();
        let mut command = Command::new("timeout");
        command
            .args(["30", &format!("{PLUGINS_DIR}/bridge")])
            .env("CNI_COMMAND", "ADD")
            .env("CNI_CONTAINERID", NEIGHBOUR_ID)
            .env("CNI_NETNS", format!("/proc/{pid}/ns/net"))
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", PLUGINS_DIR)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        self.own_netns(&mut command);
        let mut child = command.spawn().map_err(|e| format!("bridge ADD: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            std::io::Write::write_all(&mut stdin, config.to_string().as_bytes())
                .map_err(|e| format!("bridge ADD's config: {e}"))?;
        }
        let output = child
            .wait_with_output()
            .map_err(|e| format!("bridge ADD: {e}"))?;
        let said = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(format!(
                "bridge ADD for the neighbour failed ({}): {said}{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let result: serde_json::Value =
            serde_json::from_str(&said).map_err(|e| format!("bridge ADD's result {said}: {e}"))?;
        let address = result["ips"][0]["address"].as_str().unwrap_or_default();
        address
            .split('/')
            .next()
            .and_then(|ip| ip.parse().ok())
            .ok_or_else(|| format!("no address in the bridge ADD's result: {said}"))
    }
}

impl TestBed {
    /// What shares the networked bed's node with CRI (see [`Neighbours`]).
    pub fn neighbours(&self) -> &Neighbours {
        match self.cni().neighbours.as_ref() {
            Some(neighbours) => neighbours,
            None => self.fail("no neighbours: the bed's start did not make them"),
        }
    }
}

/// `ip link set lo up`, with raw system calls only (see [`Cni::own_netns`]).
fn loopback_up() -> std::io::Result<()> {
    use nix::libc;
    // SAFETY: a zeroed ifreq is valid; the name fits (3 of IFNAMSIZ bytes);
    // the socket is closed on every path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (to, from) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *to = *from as libc::c_char;
        }
        request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let result = libc::ioctl(fd, libc::SIOCSIFFLAGS, &request);
        let error = std::io::Error::last_os_error();
        libc::close(fd);
        match result {
            0 => Ok(()),
            _ => Err(error),
        }
    }
}

impl TestBed {
    /// The bed's CNI setup; panics on a bed started without networking.
    pub fn cni(&self) -> &Cni {
        match &self.cni {
            Some(cni) => cni,
            None => self.fail("no CNI here: start the bed with TestBed::start_networked"),
        }
    }

    /// Where containerd mounts the pods' network namespaces
    /// (`netns_mounts_under_state_dir`): CRI's state dir, `netns`; 2.x
    /// keeps the 1.x plugin's name for that dir.
    pub fn netns_dir(&self) -> PathBuf {
        self.state().join("io.containerd.grpc.v1.cri/netns")
    }

    /// The addresses host-local holds for the bed's network.
    pub fn ip_files(&self) -> Vec<IpFile> {
        self.cni().ip_files()
    }

    /// The chained plugin's binary gone (see [`Cni::remove_chained_plugin`]).
    pub fn remove_chained_plugin(&self) {
        self.must(self.cni().remove_chained_plugin())
    }

    /// The chained plugin's DEL failing with `message` (see [`Cni::fail_del`]).
    pub fn fail_cni_del(&self, message: &str) {
        self.must(self.cni().fail_del(message))
    }

    /// The chained plugin's ADD failing with `message` (see
    /// [`Cni::fail_add`]): every new pod's RunPodSandbox fails.
    pub fn fail_cni_add(&self, message: &str) {
        self.must(self.cni().fail_add(message))
    }

    /// The chained plugin back in place, passing everything.
    pub fn clear_cni_faults(&self) {
        self.must(self.cni().clear_faults())
    }
}

/// The CNI error [`TestBed::leak_pod_ip`]'s DEL fails with. go-cni's
/// `Remove` (every line's) takes any error saying "not found" for "already
/// deleted" and carries on: libcni stopped the network's DEL at the
/// failing plugin, so the bridge's (and host-local's) DEL never ran.
pub const DEL_NOT_FOUND: &str = "nodectl-chained: the pod's chained state was not found";

impl TestBed {
    /// Leaks a pod address through containerd's own code path, on every
    /// line: a pod starts (host-local hands it an address), then the
    /// chained plugin's DEL fails with [`DEL_NOT_FOUND`]; StopPodSandbox
    /// takes that for a network already gone, RemovePodSandbox removes the
    /// sandbox, and host-local's file for the address stays, naming a
    /// sandbox CRI no longer lists. The chained plugin passes everything
    /// again afterwards. Panics (with containerd's log) if any step does
    /// not go so.
    pub async fn leak_pod_ip(&self, pod_name: &str) -> LeakedIp {
        let sandbox_id = self.run_sandbox(pod_name).await;
        let files = self.ip_files();
        let Some(file) = files.iter().find(|f| f.container_id == sandbox_id) else {
            self.fail(&format!("no address names {sandbox_id}: {files:?}"))
        };
        self.fail_cni_del(DEL_NOT_FOUND);
        let stopped = self.stop_pod(&sandbox_id).await;
        self.must(stopped.map_err(|e| format!("StopPodSandbox with DEL failing: {e}")));
        let removed = self.remove_pod(&sandbox_id).await;
        self.must(removed.map_err(|e| format!("RemovePodSandbox with DEL failing: {e}")));
        self.clear_cni_faults();
        let listed = self.listed_sandboxes().await;
        if listed.contains(&sandbox_id) {
            self.fail(&format!("CRI still lists {sandbox_id}: {listed:?}"));
        }
        let text = fs::read_to_string(&file.path).unwrap_or_default();
        if text.lines().next().map(str::trim) != Some(sandbox_id.as_str()) {
            self.fail(&format!(
                "{} no longer names {sandbox_id}: {text:?}",
                file.path.display()
            ));
        }
        LeakedIp {
            ip: file.ip,
            sandbox_id,
            file: file.path.clone(),
        }
    }
}

impl TestBed {
    /// Kills containerd (SIGKILL: no deferred clean-up runs) while a pod's
    /// CNI ADD hangs in the chained plugin, after bridge and host-local
    /// gave the pod its veth and address, then starts containerd again:
    /// a node whose containerd was OOM-killed or crashed while starting a
    /// pod. Returns the ADD that hung (sandbox id, netns path). Panics
    /// (with containerd's log) if any step does not go so.
    pub async fn crash_containerd_in_cni_add(&mut self, pod_name: &str) -> HungAdd {
        self.must(self.cni().hang_add());
        let pid = nix::unistd::Pid::from_raw(self.containerd_pid());
        let crash = async {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                if let Some(hung) = self.cni().hung_add() {
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                    return Some(hung);
                }
                if std::time::Instant::now() > deadline {
                    return None;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        };
        let (started, hung) = tokio::join!(self.try_run_sandbox(pod_name), crash);
        let Some(hung) = hung else {
            self.fail("the chained plugin's ADD did not hang within 60 s")
        };
        if let Ok(id) = started {
            self.fail(&format!(
                "RunPodSandbox returned {id} though containerd was killed"
            ));
        }
        let _ = self.containerd.wait();
        let _ = fs::remove_file(self.address());
        self.must(self.cni().clear_faults());
        self.sandboxes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(hung.sandbox_id.clone());
        self.start_containerd().await;
        hung
    }
}
