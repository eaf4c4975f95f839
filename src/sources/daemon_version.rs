//! The running containerd's version when its API cannot say: read from its
//! executable as data, never by running it (nodectl is root, and a binary
//! is whatever its owner put there).
//!
//! Go (1.18 on) writes build info into every binary, in the ELF section
//! `.go.buildinfo`: a 32-byte header (`\xff Go buildinf:`, the pointer size,
//! flags; flag 2 says the strings follow inline), then the Go version and
//! the module info, each a uvarint length and its bytes (Go's
//! `debug/buildinfo`). containerd's release builds set their version with
//! `-ldflags "-X <module>/version.Version=v1.7.34"`, which Go records in the
//! module info (`build\t-ldflags=...`); a build of a tagged module records
//! the tag on its `mod` line. Debian's build records neither: its version
//! stays unknown until the API answers.

use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::mpsc;

use object::{Object, ObjectSection};

use crate::model::{ContainerdVersion, VersionSource};

/// The build info is a few kB of module list; more is not Go's.
const BUILD_INFO_LIMIT: u64 = 1 << 20;
const MAGIC: &[u8] = b"\xff Go buildinf:";
/// Go's flag for build info whose strings are inline (Go 1.18 and later).
const INLINE_STRINGS: u8 = 2;

/// The containerd version: the API's answer if it gave one, else what the
/// running daemon's binary records (`binary`, asked only then), else
/// unknown.
pub fn identify(api: Option<&str>, binary: impl FnOnce() -> Option<String>) -> ContainerdVersion {
    let known = |version: String, source| ContainerdVersion {
        version: Some(version),
        source,
    };
    if let Some(version) = api.filter(|v| !v.trim().is_empty()) {
        return known(version.trim().to_string(), VersionSource::Api);
    }
    match binary() {
        Some(version) => known(version, VersionSource::Process),
        None => ContainerdVersion::default(),
    }
}

/// [`recorded`] on a thread of its own, started beside the API calls so
/// that waiting for it fits their deadline: a read of the binary stuck on a
/// stalled disk cannot hold the report.
pub fn in_background(proc_root: &Path, pid: i32) -> mpsc::Receiver<Option<String>> {
    let (sender, receiver) = mpsc::channel();
    let exe = proc_root.join(pid.to_string()).join("exe");
    std::thread::spawn(move || {
        let _ = sender.send(recorded(&exe));
    });
    receiver
}

/// The version the executable at `exe` (a `/proc/<pid>/exe` link: the very
/// binary the process runs, even if replaced on disk since) records in its
/// build info. Only a root-owned regular file that no one else may write is
/// read, judged on the descriptor opened (no second path walk).
pub fn recorded(exe: &Path) -> Option<String> {
    let file = File::options()
        .read(true)
        // A FIFO put in its place must not block the open.
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(exe)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return None;
    }
    let cache = object::ReadCache::new(file);
    let binary = object::File::parse(&cache).ok()?;
    let section = binary.section_by_name(".go.buildinfo")?;
    if section.size() > BUILD_INFO_LIMIT {
        return None;
    }
    build_info_version(section.data().ok()?)
}

/// The version in a `.go.buildinfo` section's bytes: the `-X
/// …/version.Version=` of its recorded linker flags, else its main module's
/// version when that is a release (not `(devel)`).
pub fn build_info_version(section: &[u8]) -> Option<String> {
    let header = section.get(..32)?;
    if !header.starts_with(MAGIC) || header[15] & INLINE_STRINGS == 0 {
        return None;
    }
    let rest = &section[32..];
    let (_go_version, rest) = inline_string(rest)?;
    let (modinfo, _) = inline_string(rest)?;
    // Go brackets the module info with two 16-byte sentinels.
    let modinfo = String::from_utf8_lossy(modinfo.get(16..modinfo.len().checked_sub(16)?)?);
    let from_ldflags = modinfo
        .lines()
        .filter_map(|line| line.strip_prefix("build\t-ldflags="))
        .find_map(|flags| {
            let (_, value) = flags.split_once("/version.Version=")?;
            let end = value
                .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                .unwrap_or(value.len());
            Some(value[..end].to_string())
        });
    let from_module = || {
        modinfo.lines().find_map(|line| {
            let mut fields = line.strip_prefix("mod\t")?.split('\t');
            let _path = fields.next()?;
            let version = fields.next()?;
            (version != "(devel)").then(|| version.to_string())
        })
    };
    from_ldflags.or_else(from_module).filter(|v| {
        v.trim_start_matches('v')
            .starts_with(|c: char| c.is_ascii_digit())
    })
}

/// A uvarint length and that many bytes, as Go's build info stores a string.
fn inline_string(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut length: u64 = 0;
    for (i, byte) in bytes.iter().enumerate().take(10) {
        length |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let start = i + 1;
            let end = start.checked_add(usize::try_from(length).ok()?)?;
            return Some((bytes.get(start..end)?, &bytes[end..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.go.buildinfo` section as Go writes it.
    fn section(go: &str, modinfo: &str) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend([8, INLINE_STRINGS]);
        bytes.resize(32, 0);
        for text in [go.as_bytes(), modinfo.as_bytes()] {
            let mut length = text.len();
            loop {
                let byte = (length & 0x7f) as u8;
                length >>= 7;
                if length == 0 {
                    bytes.push(byte);
                    break;
                }
                bytes.push(byte | 0x80);
            }
            bytes.extend(text);
        }
        bytes
    }

    /// Go brackets the module info with 16-byte sentinels.
    fn modinfo(lines: &str) -> String {
        format!("0123456789abcdef{lines}\nfedcba9876543210")
    }

    #[test]
    fn an_upstream_release_records_its_version_in_its_linker_flags() {
        // As the matrix's v2.3.4 records it; the module list is long (the
        // length takes two bytes).
        let deps = "dep\tgithub.com/x/y\tv1.0.0\t\n".repeat(40);
        let info = modinfo(&format!(
            "path\tgithub.com/containerd/containerd/v2/cmd/containerd\n\
             mod\tgithub.com/containerd/containerd/v2\t(devel)\t\n{deps}\
             build\t-buildmode=exe\n\
             build\t-ldflags=\"-s -w -X github.com/containerd/containerd/v2/version.Version=v2.3.4\"\n\
             build\tCGO_ENABLED=0"
        ));
        assert_eq!(
            build_info_version(&section("go1.26.6", &info)).as_deref(),
            Some("v2.3.4")
        );
    }

    #[test]
    fn a_tagged_module_is_its_version_and_a_devel_build_without_flags_has_none() {
        let tagged = modinfo("mod\tgithub.com/containerd/containerd/v2\tv2.1.0\th1:abc=\n");
        assert_eq!(
            build_info_version(&section("go1.24", &tagged)).as_deref(),
            Some("v2.1.0")
        );
        // Debian's 1.6.20: no linker flags recorded, a devel module.
        let debian = modinfo(
            "path\tgithub.com/containerd/containerd/cmd/containerd\n\
             mod\tgithub.com/containerd/containerd\t(devel)\t\n\
             build\t-compiler=gc\nbuild\t-trimpath=true",
        );
        assert_eq!(build_info_version(&section("go1.19.8", &debian)), None);
    }

    #[test]
    fn junk_and_truncated_build_info_give_no_version() {
        let good = section(
            "go1.26.6",
            &modinfo("build\t-ldflags=\"-X a/version.Version=v1.7.34\""),
        );
        assert_eq!(build_info_version(&good).as_deref(), Some("v1.7.34"));
        for cut in 0..good.len() {
            // Never a panic, never a wrong version.
            let got = build_info_version(&good[..cut]);
            assert!(got.is_none() || got.as_deref() == Some("v1.7.34"), "{cut}");
        }
        let mut old = good.clone();
        old[15] = 0;
        assert_eq!(build_info_version(&old), None, "pointer-format build info");
        assert_eq!(build_info_version(b"not go at all"), None);
        let not_a_version = section(
            "go1.26.6",
            &modinfo("build\t-ldflags=\"-X a/version.Version=$(rm -rf /)\""),
        );
        assert_eq!(build_info_version(&not_a_version), None);
    }

    #[test]
    fn only_a_root_owned_binary_is_read_and_none_is_run() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // A script that would leave a mark if it were run.
        let exe = dir.path().join("containerd");
        let mark = dir.path().join("ran");
        std::fs::write(
            &exe,
            format!(
                "#!/bin/sh\ntouch {}\necho containerd x v9.9.9 y\n",
                mark.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(recorded(&exe), None);
        assert!(!mark.exists());
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(recorded(&exe), None);
    }

    #[test]
    fn the_apis_answer_comes_first_then_the_binarys_then_unknown() {
        let version = |v: &str, source| ContainerdVersion {
            version: Some(v.to_string()),
            source,
        };
        let binary = || Some("v1.7.27".to_string());
        assert_eq!(
            identify(Some("v2.0.3"), binary),
            version("v2.0.3", VersionSource::Api)
        );
        assert_eq!(
            identify(Some(""), binary),
            version("v1.7.27", VersionSource::Process)
        );
        assert_eq!(
            identify(None, binary),
            version("v1.7.27", VersionSource::Process)
        );
        assert_eq!(identify(None, || None), ContainerdVersion::default());
        assert_eq!(ContainerdVersion::default().source, VersionSource::Unknown);
    }
}
