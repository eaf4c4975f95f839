//! tests/support runs nodectl as `env!("CARGO_BIN_EXE_nodectl")`, which
//! cargo sets only for nodectl's own tests and benches. This crate is
//! another package, so it names the binary where cargo puts it: in the
//! profile's directory of the same target directory (OUT_DIR is
//! `<target>/<profile>/build/<package>-<hash>/out`). bench/run builds
//! nodectl first; so must anyone who runs side_by_side or serve_flood
//! by hand (`cargo build --release --bin nodectl`).

use std::path::Path;

fn main() {
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let profile_dir = Path::new(&out)
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is <target>/<profile>/build/<package>-<hash>/out");
    let nodectl = profile_dir.join("nodectl");
    println!(
        "cargo:rustc-env=CARGO_BIN_EXE_nodectl={}",
        nodectl.display()
    );
    println!("cargo:rerun-if-changed=build.rs");
}
