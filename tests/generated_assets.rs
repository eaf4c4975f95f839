//! Shell completions (completions/) and man pages (man/) are generated from
//! the clap definitions and checked in, so packagers and users get them
//! without building. This test fails when they are stale; regenerate with
//! `NODECTL_UPDATE_ASSETS=1 cargo test --test generated_assets`.

use std::fs;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;
use nodectl::cli::Cli;

fn expected_assets() -> Vec<(PathBuf, Vec<u8>)> {
    let mut assets = Vec::new();
    for (shell, file) in [
        (Shell::Bash, "nodectl.bash"),
        (Shell::Zsh, "_nodectl"),
        (Shell::Fish, "nodectl.fish"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "nodectl", &mut out);
        assets.push((PathBuf::from("completions").join(file), out));
    }
    // Building propagates global options into the subcommands and names
    // them `nodectl-<sub>`, as their man pages should.
    let mut command = Cli::command();
    command.build();
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut page)
        .unwrap();
    assets.push((PathBuf::from("man/nodectl.1"), page));
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("nodectl-{}", sub.get_name());
        let mut page = Vec::new();
        clap_mangen::Man::new(sub.clone())
            .render(&mut page)
            .unwrap();
        assets.push((PathBuf::from("man").join(format!("{name}.1")), page));
    }
    assets
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
