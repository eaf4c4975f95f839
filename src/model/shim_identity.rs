//! Judging the recorded facts of a process that looks like a shim: is it a
//! shim of the containerd nodectl talks to? Pure, so an archive is judged
//! as the live run was (the facts are read by `sources::shim_proof`).

use std::path::{Path, PathBuf};

use crate::model::snapshot::{Shim, ShimProof};

/// The prefix of every shim binary's name (`-runc-v2`, `-kata-v2`, ...).
const SHIM_PREFIX: &str = "containerd-shim";

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
