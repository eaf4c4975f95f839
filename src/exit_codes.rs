//! nodectl's exit statuses, named once: what a script or an alert reads
//! when it reads nothing else (README, "Exit codes"). Everything that ends
//! the process says which of these it means.

use std::process::ExitCode;

/// Everything was checked and nothing was found.
pub const NOTHING_FOUND: u8 = 0;
/// Something was found (for node-problem-detector's formats: something of
/// the severity its rule reports).
pub const FOUND: u8 = 1;
/// Part of the node could not be checked, or nodectl could not run at all.
pub const COULD_NOT_CHECK: u8 = 2;

/// The process's exit status for one of the codes above.
pub fn exit(code: u8) -> ExitCode {
    ExitCode::from(code)
}
