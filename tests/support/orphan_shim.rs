//! A shim containerd has no record of, on any line: the state containerd#7496
//! and #12344 leave behind, made directly where a line's own seed recipe
//! does not leak (1.7 and later fixed those bugs).
//!
//! The shim is the line's own `containerd-shim-runc-v2`, started the way
//! containerd's shim manager starts one (`... -namespace -id -address start`
//! from the bundle directory, with TTRPC_ADDRESS, GRPC_ADDRESS and NAMESPACE
//! set), in a bundle directory where containerd would put it. containerd never
//! hears of it: no container record, no task. Its `start` reads the bundle's
//! `config.json` (for shim grouping annotations) and its daemon writes its log
//! into the bundle's `log` FIFO, which someone must read.

use std::fs;
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::run_bounded;
use super::testbed::{TestBed, NAMESPACE};

/// What [`TestBed::start_orphan_shim`] made.
#[derive(Debug, Clone)]
pub struct OrphanShim {
    pub id: String,
    pub pid: i32,
    pub bundle: PathBuf,
}

impl TestBed {
    /// Starts a shim daemon for `id` that containerd knows nothing about,
    /// with its bundle under the test bed's state. Teardown ends it with the
    /// other shims of this containerd (it carries our `-address`).
    pub fn start_orphan_shim(&self, id: &str) -> OrphanShim {
        let bundle = self.bundles().join(id);
        self.must(fs::create_dir_all(&bundle).map_err(|e| format!("{}: {e}", bundle.display())));
        let config = bundle.join("config.json");
        self.must(
            fs::write(&config, r#"{"ociVersion":"1.0.2","annotations":{}}"#)
                .map_err(|e| format!("{}: {e}", config.display())),
        );
        let log = bundle.join("log");
        self.must(
            nix::unistd::mkfifo(&log, nix::sys::stat::Mode::from_bits_truncate(0o600))
                .map_err(|e| format!("mkfifo {}: {e}", log.display())),
        );
        // The daemon blocks opening its log FIFO until there is a reader;
        // this thread reads it until the shim (its only writer) exits.
        let reader = log.clone();
        std::thread::spawn(move || {
            if let Ok(mut fifo) = fs::File::open(reader) {
                let _ = std::io::copy(&mut fifo, &mut std::io::sink());
            }
        });
        let ttrpc = format!("{}.ttrpc", self.address().display());
        let output = self.must(run_bounded(
            Command::new(self.release.binary("containerd-shim-runc-v2"))
                .args(["-namespace", NAMESPACE, "-id", id, "-address"])
                .arg(self.address())
                .arg("start")
                .current_dir(&bundle)
                .env("TTRPC_ADDRESS", &ttrpc)
                .env("GRPC_ADDRESS", self.address())
                .env("NAMESPACE", NAMESPACE),
            Duration::from_secs(30),
        ));
        if !output.status.success() {
            self.fail(&format!(
                "shim start failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        // `start` prints the daemon's socket (2.x inside a small bootstrap
        // message): it lives outside the temp dir, so teardown must know it.
        let mut said = String::new();
        let _ = output.stdout.as_slice().read_to_string(&mut said);
        if let Some(at) = said.find("unix://") {
            let socket: String = said[at + "unix://".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_'))
                .collect();
            self.extra_sockets
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(PathBuf::from(socket));
        }
        let pid = self.shim_pid(id);
        OrphanShim {
            id: id.to_string(),
            pid,
            bundle,
        }
    }
}
