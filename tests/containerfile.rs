//! deploy/Containerfile builds nodectl from source in a Rust stage and
//! ships only the binary; .dockerignore (read by docker, podman and
//! buildah) keeps the build context to what cargo reads. No container
//! builder is needed here: the context is rebuilt by hand from the ignore
//! file and cargo is asked to load the package from it, which fails on a
//! missing manifest, lock file or target source as the image build would.

use std::fs;
use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The paths `.dockerignore` lets through: it excludes everything (`*`)
/// and re-includes paths (`!path`), nothing else.
fn context_paths() -> Vec<String> {
    let text = fs::read_to_string(repo().join(".dockerignore")).unwrap();
    let mut patterns = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    assert_eq!(patterns.next(), Some("*"), "an allow-list: `*` first");
    patterns
        .map(|p| {
            let path = p
                .strip_prefix('!')
                .unwrap_or_else(|| panic!("only `!path` after `*`: {p}"));
            assert!(!path.contains(['*', '?', '[']), "no globs: {p}");
            path.trim_end_matches('/').to_string()
        })
        .collect()
}

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        // A file let through on its own (`!bench/Cargo.toml`): its
        // directory is not, so make it.
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(from, to).unwrap();
    }
}

#[test]
fn the_build_context_is_what_cargo_reads_and_never_target() {
    let allowed = context_paths();
    for never in ["target", ".git"] {
        assert!(
            !allowed
                .iter()
                .any(|p| p == never || p.starts_with(&format!("{never}/"))),
            "{never} in the build context"
        );
    }
    let context = tempfile::tempdir().unwrap();
    for path in &allowed {
        assert!(repo().join(path).exists(), "{path} does not exist");
        copy_tree(&repo().join(path), &context.path().join(path));
    }
    // Loads the manifest, its targets and the lock file, and stops at the
    // bin name before compiling anything.
    let output = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--locked",
            "--offline",
            "--bin",
            "no-such-bin",
        ])
        .current_dir(context.path())
        .env("CARGO_TARGET_DIR", context.path().join("target"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no bin target named `no-such-bin`") && stderr.contains("nodectl"),
        "cargo cannot load the package from the build context: {stderr}"
    );
    // The protoc prost-build runs (named in .cargo/config.toml) is there.
    let config = fs::read_to_string(context.path().join(".cargo/config.toml")).unwrap();
    assert!(config.contains("tools/protoc"), "{config}");
    assert!(context.path().join("tools/protoc").is_file());
}

#[test]
fn the_image_is_built_from_source_and_ships_only_the_binary() {
    let text = fs::read_to_string(repo().join("deploy/Containerfile")).unwrap();
    let stages: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert!(
        stages[0].contains("rust:") && stages[0].ends_with(" AS build"),
        "{}",
        stages[0]
    );
    let runtime = text.split(stages[1]).nth(1).unwrap();
    let copies: Vec<&str> = runtime.lines().filter(|l| l.starts_with("COPY")).collect();
    assert_eq!(
        copies,
        ["COPY --from=build /usr/local/bin/nodectl /usr/local/bin/nodectl"],
        "the runtime stage takes the binary alone"
    );
    assert!(
        !text.contains("target/release/nodectl /usr/local/bin/nodectl\nENTRYPOINT")
            && !text.lines().any(|l| l.starts_with("COPY target")),
        "no host-built binary"
    );
    assert!(text.contains("cargo build --release --locked"), "{text}");
}
