//! containerd#10589 (seed 004) by release, upstream's own ranges, written
//! down here apart from nodectl's advisory table so that the seed 004 tests
//! check that table rather than repeat it.

/// Whether `version` carries containerd#10589: 1.7.14 to 1.7.21 (and the
/// 1.6.29 to 1.6.35 backports).
pub fn affected(version: &str) -> bool {
    let numbers: Vec<u32> = version.split('.').filter_map(|n| n.parse().ok()).collect();
    match numbers.as_slice() {
        [1, 7, patch] => (14..22).contains(patch),
        [1, 6, patch] => (29..36).contains(patch),
        _ => false,
    }
}

/// The release that fixes containerd#10589 in `version`'s line.
pub fn fix_of(version: &str) -> &'static str {
    if version.starts_with("1.6.") {
        "1.6.36"
    } else {
        "1.7.22"
    }
}
