//! A process that looks like a containerd shim, the facts the kernel gives
//! about it, and the judgement of those facts: is it a shim of the
//! containerd nodectl talks to? The judgement is pure, so an archive is
//! judged as the live run was (the facts are read by `sources::shim_proof`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::recording::{bounded_name, NAME_CAP};

/// A `containerd-shim*` process and what its threads are doing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Shim {
    pub pid: i32,
    pub binary: String,
    /// `-namespace`, `-id` and `-address` from the command line.
    pub namespace: Option<String>,
    pub id: Option<String>,
    pub address: Option<String>,
    /// `start` or `delete` for the short-lived invocations containerd runs to
    /// launch a shim or to clean up after a dead one; `None` for the daemon.
    pub action: Option<String>,
    /// The shim's working directory (what it says, not where its bundle is:
    /// any process can start anywhere).
    #[serde(default, with = "crate::model::path_json::option")]
    pub cwd: Option<PathBuf>,
    pub threads: Vec<ThreadSample>,
    /// What the kernel says this process is, read when it was seen; judged
    /// by [`identity`]. `None` only in archives
    /// from before nodectl proved shims, judged by `-address` alone.
    #[serde(default)]
    pub proof: Option<ShimProof>,
}

impl Shim {
    /// Whether this is a proven shim of the containerd listening on `address`;
    /// a node can run more than one containerd, and only ours is judged.
    pub fn serves(&self, address: &std::path::Path) -> bool {
        if self.proof.is_some() {
            return identity(self).is_ours();
        }
        self.address
            .as_deref()
            .map(|a| std::path::Path::new(a.trim_start_matches("unix://")) == address)
            .unwrap_or(false)
    }

    /// Threads blocked inside `umount2`: the slow overlayfs unmount behind a
    /// task.Delete that times out.
    pub fn threads_in_umount2(&self) -> impl Iterator<Item = &ThreadSample> {
        self.threads
            .iter()
            .filter(|t| t.syscall.as_deref() == Some("umount2"))
    }

    /// Threads that look stuck: in uninterruptible sleep (D, where a wait
    /// on the disk puts a thread), or inside `umount2` in any state.
    pub fn threads_blocked(&self) -> impl Iterator<Item = &ThreadSample> {
        self.threads
            .iter()
            .filter(|t| t.state == Some('D') || t.syscall.as_deref() == Some("umount2"))
    }
}

/// The facts that make a process a shim of the containerd nodectl talks to,
/// beside those of that containerd (compared by pure code, so `check --from`
/// judges an archive as the live run did).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ShimProof {
    /// `/proc/<pid>/exe`: the file the kernel executed (argv and comm are
    /// the process's to set).
    #[serde(default, with = "crate::model::path_json::option")]
    pub exe: Option<PathBuf>,
    pub exe_regular: bool,
    pub exe_uid: Option<u32>,
    pub exe_mode: Option<u32>,
    /// Real, effective, saved and filesystem uids (`/proc/<pid>/status`).
    pub uids: Vec<u32>,
    pub namespaces: Option<NamespaceIds>,
    /// The socket its `-address` names, resolved inside its own root.
    pub address_file: Option<FileId>,
    /// Whether it holds a listening unix socket where a shim without `-id`
    /// serves (`/run/containerd/s/`: its descriptors against `net/unix`),
    /// read only for a process without `-id`; `None` unread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listens: Option<bool>,
    /// What could not be read, and why.
    pub unreadable: Vec<String>,
    /// What it was compared with.
    pub reference: ProofReference,
}

/// The running containerd (or PID 1 when none was identified), and the
/// socket nodectl talks to.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ProofReference {
    /// e.g. `containerd pid 812`, or `PID 1 (no running containerd identified)`.
    pub described: String,
    pub uid: u32,
    pub namespaces: Option<NamespaceIds>,
    /// `--address` as nodectl resolves it (its own root and cwd).
    pub address_file: Option<FileId>,
}

/// `/proc/<pid>/ns/{user,pid,mnt}` inode numbers.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct NamespaceIds {
    pub user: u64,
    pub pid: u64,
    pub mnt: u64,
}

/// A file's identity: what two spellings of one path share.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// One thread of a shim, from `/proc/<pid>/task/<tid>/{stat,syscall,wchan}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ThreadSample {
    pub tid: i32,
    /// The kernel's state letter; `None` when not read: a thread in an
    /// [`idle wait`](is_idle_wait) on a node without swap (see
    /// `sources::shim_threads`).
    pub state: Option<char>,
    /// Name of the syscall the thread is blocked in (numbers are per
    /// architecture, resolved when sampled); the number if not known by name.
    pub syscall: Option<String>,
    pub wchan: Option<String>,
}

impl ThreadSample {
    /// Itself with its names as the flight recorder keeps them (see
    /// [`bounded_name`]): a wait channel is read from the node.
    pub fn bounded(&self) -> ThreadSample {
        let name = |n: &Option<String>| n.as_deref().map(|n| bounded_name(n, NAME_CAP));
        ThreadSample {
            tid: self.tid,
            state: self.state.filter(char::is_ascii_alphabetic),
            syscall: name(&self.syscall),
            wchan: name(&self.wchan),
        }
    }
}

/// Whether `syscall` is a wait for an event (a wake-up, a ready descriptor,
/// a timer, a child): a shim's threads idle in these, asleep interruptibly.
/// They touch only the caller's own memory, which without swap is always
/// in RAM: such a thread cannot be waiting on the disk.
pub fn is_idle_wait(syscall: &str) -> bool {
    matches!(
        syscall,
        "futex" | "epoll_pwait" | "epoll_wait" | "waitid" | "nanosleep"
    )
}

/// The prefix of every shim binary's name (`-runc-v2`, `-kata-v2`, ...).
pub const SHIM_PREFIX: &str = "containerd-shim";

/// What a process that looks like a shim is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A shim of the containerd nodectl talks to.
    Ours,
    /// Possibly a real shim, but not proven to serve nodectl's containerd
    /// (another containerd's, or a fact could not be read).
    Other(String),
    /// Not a shim: its executable, uids or namespaces are not containerd's.
    Impostor(String),
    /// Recorded before nodectl proved shims (an old archive).
    Unproven,
}

impl Identity {
    pub fn is_ours(&self) -> bool {
        *self == Identity::Ours
    }

    pub fn label(&self) -> &'static str {
        match self {
            Identity::Ours => "ours",
            Identity::Other(_) => "other",
            Identity::Impostor(_) => "impostor",
            Identity::Unproven => "unproven",
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            Identity::Other(why) | Identity::Impostor(why) => Some(why),
            Identity::Ours | Identity::Unproven => None,
        }
    }
}

/// Why `shim` cannot be a shim of any containerd on this node, when its
/// facts say so: the kernel put it in another pid or mount namespace than
/// the reference (the proven containerd, else PID 1), it runs as another
/// uid than the reference (real, effective, saved or filesystem), or it
/// runs a binary neither root nor containerd's user owns. containerd starts
/// every shim as itself, in its own namespaces (`Command` of 1.x's
/// runtime/v2/shim and 2.x's pkg/shim sets only `Setpgid` in the command's
/// `SysProcAttr`, `getSysProcAttr`: no credential, no clone flag; the
/// shim's `start` re-executes itself, still so), from its own binary; a tenant can name a process of
/// its own container like one, and an unprivileged user can run root's
/// `sleep` through a symlink named `containerd-shim-runc-v2`: without
/// `-id`, either made every cleanup refuse "what it serves is unknown" for
/// as long as it lived. Nor is a process without `-id` that holds no
/// listening socket, whoever runs it. Facts that could not be read prove nothing: such a
/// process may still be a shim (`None`). Pure.
pub fn cannot_be_a_shim(shim: &Shim) -> Option<String> {
    let proof = shim.proof.as_ref()?;
    let reference = &proof.reference;
    if let (Some(theirs), Some(ours)) = (proof.namespaces, reference.namespaces) {
        for (kind, a, b) in [
            ("pid", theirs.pid, ours.pid),
            ("mount", theirs.mnt, ours.mnt),
        ] {
            if a != b {
                return Some(format!(
                    "it runs in another {kind} namespace ({a}) than {} ({b})",
                    reference.described
                ));
            }
        }
    }
    if let Some(uid) = proof.uids.iter().find(|&&uid| uid != reference.uid) {
        return Some(format!(
            "it runs as uid {uid} where {} runs as uid {}",
            reference.described, reference.uid
        ));
    }
    // A shim serves its ttrpc on a socket it holds listening from its first
    // instruction to its exit, and containerd starts it with `-id`
    // (`newCommand` of the runc shim's manager, every line); the one shim
    // that has none (runtime v1's, 1.6 and 1.7) listens in
    // `/run/containerd/s/`: without either, nothing can reach it as a shim
    // (root's `sleep`, or a server of root's, run through a symlink named
    // like one blocked every cleanup while it lived).
    if shim.id.is_none() && proof.listens == Some(false) {
        return Some(
            "it has no -id and holds no listening socket in /run/containerd/s, where a \
             containerd shim has one or the other"
                .to_string(),
        );
    }
    match proof.exe_uid {
        Some(uid) if uid != 0 && uid != reference.uid => Some(format!(
            "its executable is owned by uid {uid}, not by root or containerd's uid {}",
            reference.uid
        )),
        _ => None,
    }
}

/// Judges the recorded facts of `shim`.
pub fn identity(shim: &Shim) -> Identity {
    let Some(proof) = &shim.proof else {
        return Identity::Unproven;
    };
    if let Err(why) = impostor(shim, proof) {
        return Identity::Impostor(why);
    }
    let address = shim.address.as_deref().unwrap_or("(none)");
    match (proof.address_file, proof.reference.address_file) {
        (Some(theirs), Some(ours)) if theirs == ours => Identity::Ours,
        (_, None) => Identity::Other(
            "the socket nodectl talks to (--address) does not exist, so no shim can be \
             proven to serve it"
                .to_string(),
        ),
        (None, _) => Identity::Other(format!(
            "its -address {address} does not resolve to a file in its root"
        )),
        (Some(_), Some(_)) => Identity::Other(format!(
            "its -address {address} is another socket than the one nodectl talks to"
        )),
    }
}

/// Why `shim` is no shim of the reference containerd, if it is not.
fn impostor(shim: &Shim, proof: &ShimProof) -> Result<(), String> {
    let reference = &proof.reference;
    let unreadable = || {
        if proof.unreadable.is_empty() {
            String::new()
        } else {
            format!(" ({})", proof.unreadable.join("; "))
        }
    };
    let exe = proof
        .exe
        .as_ref()
        .ok_or_else(|| format!("its executable could not be read{}", unreadable()))?;
    let name = exe.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    // An upgraded binary still running shows as `… (deleted)`.
    let name = name.strip_suffix(" (deleted)").unwrap_or(name);
    if !name.starts_with(SHIM_PREFIX) {
        return Err(format!(
            "its executable is {}, not a containerd-shim binary",
            exe.display()
        ));
    }
    if !proof.exe_regular {
        return Err(format!(
            "its executable {} is not a regular file",
            exe.display()
        ));
    }
    match proof.exe_uid {
        Some(uid) if uid == 0 || uid == reference.uid => {}
        Some(uid) => {
            return Err(format!(
                "its executable {} is owned by uid {uid}, not by root or containerd's uid {}",
                exe.display(),
                reference.uid
            ))
        }
        None => {
            return Err(format!(
                "its executable's owner could not be read{}",
                unreadable()
            ))
        }
    }
    if proof.exe_mode.is_some_and(|mode| mode & 0o022 != 0) {
        return Err(format!(
            "its executable {} is writable by others than its owner",
            exe.display()
        ));
    }
    if proof.uids.is_empty() {
        return Err(format!("its uids could not be read{}", unreadable()));
    }
    if proof.uids.iter().any(|&uid| uid != reference.uid) {
        return Err(format!(
            "it runs as uid {} where {} runs as uid {}",
            proof
                .uids
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("/"),
            reference.described,
            reference.uid
        ));
    }
    let (Some(theirs), Some(ours)) = (proof.namespaces, reference.namespaces) else {
        return Err(format!(
            "its namespaces or {}'s could not be read{}",
            reference.described,
            unreadable()
        ));
    };
    for (kind, a, b) in [
        ("user", theirs.user, ours.user),
        ("pid", theirs.pid, ours.pid),
        ("mount", theirs.mnt, ours.mnt),
    ] {
        if a != b {
            return Err(format!(
                "it runs in another {kind} namespace ({a}) than {} ({b})",
                reference.described
            ));
        }
    }
    for (flag, value) in [("-namespace", &shim.namespace), ("-id", &shim.id)] {
        if let Some(value) = value {
            if !is_identifier(value) {
                return Err(format!(
                    "its {flag} {value:?} is not a containerd identifier"
                ));
            }
        }
    }
    Ok(())
}

/// containerd's identifier rule (pkg/identifiers): 1 to 76 letters and
/// digits, single `.`, `_` or `-` between them. So never `/`, `..` or empty:
/// safe to join below the state directory.
pub fn is_identifier(s: &str) -> bool {
    let bytes = s.as_bytes();
    let sep = |b: &u8| matches!(b, b'.' | b'_' | b'-');
    !bytes.is_empty()
        && bytes.len() <= 76
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || sep(b))
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && !bytes.windows(2).any(|w| sep(&w[0]) && sep(&w[1]))
}

/// The task bundle containerd made for this shim:
/// `<state>/io.containerd.runtime.v2.task/<ns>/<id>`, never its working
/// directory (a process's own to choose); `None` unless both are identifiers.
pub fn bundle_dir(state: &Path, shim: &Shim) -> Option<PathBuf> {
    let namespace = shim.namespace.as_deref().filter(|n| is_identifier(n))?;
    let id = shim.id.as_deref().filter(|i| is_identifier(i))?;
    Some(
        state
            .join("io.containerd.runtime.v2.task")
            .join(namespace)
            .join(id),
    )
}
