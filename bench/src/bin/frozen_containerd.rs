//! A frozen containerd's socket, for the synthetic node: a process that
//! listens on it and accepts every connection, but never answers.
//!
//! ```sh
//! frozen_containerd SOCKET [--ready FILE]
//! ```
//!
//! That is what a containerd blocked on a stuck shim looks like from
//! outside: the socket is there and served (the kernel hands nodectl this
//! process as the listener, `SO_PEERCRED`), connections are accepted (Go's
//! runtime accepts whatever its handlers do), and no call is ever answered,
//! so nodectl's API part ends on its `--timeout`, as `api-unreachable`.
//! bench/run starts it and gives its pid to the generator, which makes it
//! the synthetic node's containerd process (namespace links, `status` and
//! `root` of this very process): nodectl proves the daemon as on a node.
//!
//! What a client sends is read and dropped until it closes; nothing is
//! written. A live socket already at SOCKET is refused (another listener
//! would answer in its place); a stale socket file is replaced. With
//! `--ready FILE`, the pid is written there once it listens. It runs until
//! killed.

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: frozen_containerd SOCKET [--ready FILE]";

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let (mut socket, mut ready) = (None, None);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--ready" => ready = argv.next().map(PathBuf::from),
            "-h" | "--help" => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
            _ if socket.is_none() => socket = Some(PathBuf::from(arg)),
            other => {
                eprintln!("frozen_containerd: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(socket) = socket else {
        eprintln!("frozen_containerd: SOCKET is required\n{USAGE}");
        return ExitCode::from(2);
    };
    let listener = match listen(&socket) {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("frozen_containerd: {}: {err}", socket.display());
            return ExitCode::FAILURE;
        }
    };
    if let Some(ready) = ready {
        if let Err(err) = std::fs::write(&ready, format!("{}\n", std::process::id())) {
            eprintln!("frozen_containerd: {}: {err}", ready.display());
            return ExitCode::FAILURE;
        }
    }
    for stream in listener.incoming() {
        // A failed accept (a client gone before it) changes nothing.
        let Ok(stream) = stream else { continue };
        std::thread::spawn(move || swallow(stream));
    }
    ExitCode::SUCCESS
}

/// Binds `socket` from its directory (a socket's path is at most 108 bytes;
/// the benchmark's directory may be deeper than that).
fn listen(socket: &Path) -> Result<UnixListener, String> {
    let name = socket.file_name().ok_or("names no file")?;
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::env::set_current_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    if UnixStream::connect(name).is_ok() {
        return Err(
            "a live socket is there already; stop its listener or pick another path".into(),
        );
    }
    if Path::new(name).exists() {
        let kind = std::fs::symlink_metadata(name).map_err(|e| e.to_string())?;
        if !std::os::unix::fs::FileTypeExt::is_socket(&kind.file_type()) {
            return Err("something other than a socket is there".into());
        }
        // Nothing listens on it: a stale socket file.
        std::fs::remove_file(name).map_err(|e| e.to_string())?;
    }
    UnixListener::bind(name).map_err(|e| e.to_string())
}

/// Reads what the client sends until it closes, and answers nothing.
fn swallow(mut stream: UnixStream) {
    let mut buffer = [0u8; 4096];
    while matches!(stream.read(&mut buffer), Ok(n) if n > 0) {}
}
