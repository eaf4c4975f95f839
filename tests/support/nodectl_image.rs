//! The DaemonSet's image, built here with Debian's buildah: no registry is
//! reachable, so a Debian bookworm root filesystem that `scripts/cluster-peers`
//! makes with debootstrap (minbase, its apt caches and docs left out)
//! stands in for `debian:bookworm-slim`, and the nodectl under test goes
//! where deploy/Containerfile's runtime stage puts it
//! (`/usr/local/bin/nodectl`, entrypoint nodectl, command `check`). The
//! image is written as an OCI archive for `ctr images import`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::cluster::peers_dir;
use super::run_bounded;

/// The name the test overlay gives the DaemonSet's image.
pub const NODECTL_IMAGE: &str = "localhost/nodectl:test";

/// The nodectl the image holds: the one deploy/Containerfile's build stage
/// makes (`cargo build --release --locked --bin nodectl`), which
/// scripts/test builds and names in `NODECTL_RELEASE_BINARY`. Outside CI,
/// without it, the test build, and the reason is said; in CI its absence
/// fails the test.
pub fn binary(test: &str) -> PathBuf {
    const NAMED_IN: &str = "NODECTL_RELEASE_BINARY";
    let why = match std::env::var_os(NAMED_IN).map(PathBuf::from) {
        Some(path) if path.is_file() => {
            eprintln!(
                "{test}: the image holds the release build {}",
                path.display()
            );
            return path;
        }
        Some(path) => format!("{NAMED_IN} names {}, which is no file", path.display()),
        None => format!(
            "{NAMED_IN} is not set (scripts/test builds nodectl as deploy/Containerfile does \
             and sets it)"
        ),
    };
    if super::in_ci() {
        panic!("{test}: {why}");
    }
    eprintln!("{test}: {why}: the image holds the test build");
    PathBuf::from(env!("CARGO_BIN_EXE_nodectl"))
}

/// The root filesystem `scripts/cluster-peers` makes.
pub fn base_rootfs() -> PathBuf {
    peers_dir().join("debian-bookworm-rootfs")
}

/// Builds the image from [`base_rootfs`] and `nodectl` into the OCI
/// archive `archive`, with buildah's storage in `work` (removed by the
/// caller's temp dir).
pub fn build(nodectl: &Path, work: &Path, archive: &Path) -> Result<(), String> {
    let (store, run) = (work.join("store"), work.join("run"));
    let buildah = |args: &[&str]| -> Result<String, String> {
        let mut command = Command::new("buildah");
        command
            .arg("--root")
            .arg(&store)
            .arg("--runroot")
            .arg(&run)
            .args(args)
            // vfs: no overlay mounts of buildah's own on the test machine.
            .env("STORAGE_DRIVER", "vfs")
            .env("BUILDAH_ISOLATION", "chroot");
        let out = run_bounded(&mut command, Duration::from_secs(300))?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            false => Err(format!(
                "buildah {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    };
    let rootfs = base_rootfs();
    let container = buildah(&["from", "scratch"])?;
    buildah(&["add", &container, &format!("{}/", rootfs.display()), "/"])?;
    buildah(&[
        "copy",
        "--chmod",
        "0755",
        &container,
        &nodectl.display().to_string(),
        "/usr/local/bin/nodectl",
    ])?;
    buildah(&[
        "config",
        "--entrypoint",
        r#"["/usr/local/bin/nodectl"]"#,
        "--cmd",
        "check",
        &container,
    ])?;
    buildah(&["commit", &container, NODECTL_IMAGE])?;
    buildah(&[
        "push",
        NODECTL_IMAGE,
        &format!("oci-archive:{}:{NODECTL_IMAGE}", archive.display()),
    ])?;
    Ok(())
}
