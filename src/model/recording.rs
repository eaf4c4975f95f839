//! What `watch`'s flight recorder keeps of a stuck container, and the file
//! it keeps them in for `collect`: plain data, every string and list of it
//! bounded, so a full ring has a size stated in advance
//! ([`RING_FILE_BYTES_MAX`]) whatever the node's strings are.

use serde::{Deserialize, Serialize};

/// Where `watch` writes its ring and `collect` reads it, unless told.
pub const RECORDER_FILE: &str = "/run/nodectl/flight-recorder.json";
/// The most containers the ring keeps (the oldest dropped first).
pub const RING: usize = 256;
/// A container id as kept: CRI's are 64 hex digits.
pub const ID_CAP: usize = 64;
/// A syscall's or a wait channel's name as kept: kernel symbols are
/// shorter than this (`rwsem_down_write_slowpath`).
pub const NAME_CAP: usize = 64;
/// A time as kept (RFC 3339 is 20 to 30 bytes).
pub const TIME_CAP: usize = 40;
/// The distinct syscalls and wait channels a recording keeps (the first
/// seen): one stuck delete shows one or two.
pub const NAMES_KEPT: usize = 4;
/// The distinct state letters kept.
pub const STATES_KEPT: usize = 8;
/// The most a [`Recording`] serialises to (compact JSON), its strings and
/// lists at their caps and every number at its longest; a unit test holds
/// it to that.
pub const RECORDING_BYTES_MAX: usize = 1_536;
/// The most the recorder's file ([`RecorderFile`], compact JSON) takes: a
/// full ring of the largest recordings, and its header: 394,496 bytes
/// (385 KiB).
pub const RING_FILE_BYTES_MAX: usize = RING * (RECORDING_BYTES_MAX + 1) + 1_024;

/// What was seen of one stuck container, over the looks that saw it stuck.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Recording {
    pub container_id: String,
    /// The first and last look that saw it stuck (RFC 3339).
    pub first_seen: String,
    pub last_seen: String,
    pub samples: u32,
    pub shim_pid: Option<i64>,
    /// Looks that saw a shim thread in `umount2`, and the span between the
    /// first and the last of them: a lower bound on the time spent there.
    pub samples_in_umount2: u32,
    pub in_umount2_for_at_least_seconds: f64,
    /// Looks that saw a shim thread in uninterruptible sleep (D), and the
    /// span between the first and the last of them.
    pub samples_in_d: u32,
    pub in_d_for_at_least_seconds: f64,
    /// The states of the shim's blocked threads seen (`D`, `S`...), the
    /// syscalls they were in and where the kernel had them wait (`wchan`),
    /// each distinct, the first [`NAMES_KEPT`] kept.
    pub states_seen: String,
    pub syscalls_seen: Vec<String>,
    pub wchans_seen: Vec<String>,
    /// Looks that saw the container's rootfs still mounted, and not; a look
    /// that did not read the mount table counts in neither.
    pub samples_rootfs_mounted: u32,
    pub samples_rootfs_unmounted: u32,
    /// The highest IO pressure (`/proc/pressure/io`, avg10, %) and dirty
    /// and write-back memory seen while it was stuck.
    pub io_pressure_full_avg10_max: Option<f32>,
    pub io_pressure_some_avg10_max: Option<f32>,
    pub dirty_bytes_max: Option<u64>,
    pub writeback_bytes_max: Option<u64>,
}

impl Recording {
    /// Itself with every string and list within its cap: what the ring and
    /// the file hold, whatever was handed to them.
    pub fn bounded(mut self) -> Recording {
        self.container_id = bounded_name(&self.container_id, ID_CAP);
        self.first_seen = bounded_name(&self.first_seen, TIME_CAP);
        self.last_seen = bounded_name(&self.last_seen, TIME_CAP);
        self.states_seen = bounded_name(&self.states_seen, STATES_KEPT);
        for names in [&mut self.syscalls_seen, &mut self.wchans_seen] {
            names.truncate(NAMES_KEPT);
            for name in names.iter_mut() {
                *name = bounded_name(name, NAME_CAP);
            }
        }
        self
    }

    /// Notes `name` among the distinct `names` seen, while there is room.
    pub fn note_name(names: &mut Vec<String>, name: &str) {
        let name = bounded_name(name, NAME_CAP);
        if names.len() < NAMES_KEPT && !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
}

/// The flight recorder's file: what `watch` writes after each change of its
/// ring and `collect` archives.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RecorderFile {
    pub nodectl_version: String,
    /// When it was written (RFC 3339).
    pub written_at: String,
    /// The ring's bounds, as stated: [`RING`] recordings, the file at most
    /// [`RING_FILE_BYTES_MAX`] bytes.
    pub ring: usize,
    pub bytes_at_most: usize,
    /// Oldest first.
    pub recordings: Vec<Recording>,
}

impl RecorderFile {
    pub fn new(nodectl_version: &str, written_at: &str, recordings: Vec<Recording>) -> Self {
        RecorderFile {
            nodectl_version: nodectl_version.to_string(),
            written_at: written_at.to_string(),
            ring: RING,
            bytes_at_most: RING_FILE_BYTES_MAX,
            recordings,
        }
        .bounded()
    }

    /// Itself within its bounds: the newest [`RING`] recordings, each
    /// [`Recording::bounded`]. `collect` archives a file read back this way,
    /// so the archive holds only what nodectl writes, bounded, whatever the
    /// file at that path held.
    pub fn bounded(mut self) -> RecorderFile {
        self.nodectl_version = bounded_name(&self.nodectl_version, NAME_CAP);
        self.written_at = bounded_name(&self.written_at, TIME_CAP);
        self.ring = RING;
        self.bytes_at_most = RING_FILE_BYTES_MAX;
        let extra = self.recordings.len().saturating_sub(RING);
        self.recordings.drain(..extra);
        self.recordings = self
            .recordings
            .into_iter()
            .map(Recording::bounded)
            .collect();
        self
    }
}

/// `text` as a name the recorder keeps: printable ASCII other than quotes
/// and backslashes (each another byte to escape in JSON, and a terminal
/// acts on none of what is left), anything else as `?`, cut at `cap`
/// characters. Kernel symbols, syscall names, container ids and times are
/// all of that kind already.
pub fn bounded_name(text: &str, cap: usize) -> String {
    text.chars()
        .take(cap)
        .map(|c| match c {
            '"' | '\\' => '?',
            c if c.is_ascii_graphic() => c,
            _ => '?',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string and list at its cap, every number at its longest.
    fn largest() -> Recording {
        let long = |n: usize| "x".repeat(n * 4);
        let names = || (0..NAMES_KEPT * 3).map(|_| long(NAME_CAP)).collect();
        Recording {
            container_id: long(ID_CAP),
            first_seen: long(TIME_CAP),
            last_seen: long(TIME_CAP),
            samples: u32::MAX,
            shim_pid: Some(i64::MIN),
            samples_in_umount2: u32::MAX,
            in_umount2_for_at_least_seconds: -f64::MAX,
            samples_in_d: u32::MAX,
            in_d_for_at_least_seconds: -f64::MIN_POSITIVE,
            states_seen: long(STATES_KEPT),
            syscalls_seen: names(),
            wchans_seen: names(),
            samples_rootfs_mounted: u32::MAX,
            samples_rootfs_unmounted: u32::MAX,
            io_pressure_full_avg10_max: Some(-f32::MAX),
            io_pressure_some_avg10_max: Some(-f32::MIN_POSITIVE),
            dirty_bytes_max: Some(u64::MAX),
            writeback_bytes_max: Some(u64::MAX),
        }
        .bounded()
    }

    #[test]
    fn a_full_ring_of_the_largest_recordings_fits_the_stated_bytes() {
        let one = serde_json::to_vec(&largest()).unwrap().len();
        eprintln!("largest recording: {one} bytes");
        assert!(one <= RECORDING_BYTES_MAX, "{one} bytes");
        let mut recordings = vec![largest(); RING + 10];
        // Names that JSON would escape are kept as one byte each.
        recordings[RING + 9].container_id = "\u{1b}\"\\\u{202e}".repeat(ID_CAP);
        let file = RecorderFile::new(&"v".repeat(999), &"t".repeat(999), recordings);
        assert_eq!(file.recordings.len(), RING, "the newest kept");
        let bytes = serde_json::to_vec(&file).unwrap().len();
        assert!(bytes <= RING_FILE_BYTES_MAX, "{bytes} bytes");
        assert_eq!(file.bytes_at_most, RING_FILE_BYTES_MAX);
        // The doc's figure.
        assert_eq!(RING_FILE_BYTES_MAX, 394_496);
    }

    #[test]
    fn names_are_printable_ascii_and_cut() {
        assert_eq!(
            bounded_name("rwsem_down_write_slowpath", 64),
            "rwsem_down_write_slowpath"
        );
        assert_eq!(bounded_name("a\u{1b}[2J\"\\é", 64), "a?[2J???");
        assert_eq!(bounded_name(&"y".repeat(100), 8), "yyyyyyyy");
        let mut names = Vec::new();
        for name in ["a", "b", "a", "", "c", "d", "e"] {
            Recording::note_name(&mut names, name);
        }
        assert_eq!(names, ["a", "b", "c", "d"]);
    }
}
