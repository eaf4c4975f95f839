//! Bounded reads of the node's files: a regular file (or a `/proc` record)
//! read whole up to a cap, refusing every other type of file, opened
//! without following a link where asked and below a directory descriptor
//! where a path walk could race. A corrupt or hostile file must neither
//! block nodectl nor make it eat memory.

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::deadline::reading;

/// Whether the last component of a path may be a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Links {
    /// containerd writes its status and bundle files itself and never as
    /// symlinks: one there was put there by someone else (a tenant's
    /// `/dev/zero`, a loop), and is not followed.
    Refuse,
    /// Config files are often symlinks (config management, ConfigMaps).
    Follow,
}

/// A file read whole, with the mtime of the very file that was read.
#[derive(Debug)]
pub(crate) struct FileRead {
    pub bytes: Vec<u8>,
    pub modified_nanos: i64,
    /// The very file read's own metadata (see `sources::file_version`), to
    /// tell whether a later look finds it unchanged.
    pub metadata: std::fs::Metadata,
}

/// Reads a small regular file whole, refusing anything else.
///
/// - `O_NONBLOCK`: opening a FIFO without a writer blocks forever without
///   it; with it the open returns at once and `fstat` shows the FIFO. (For
///   regular files the flag changes nothing: Linux ignores it for them.)
/// - `O_NOFOLLOW` (with [`Links::Refuse`]): a symlink as the last component
///   fails with `ELOOP` instead of being followed to a device or a loop.
/// - `fstat` on the descriptor, not `stat` on the path: the type, size and
///   mtime are those of the file opened, with no second path walk to race.
/// - over `limit` bytes is an error before anything is allocated: a corrupt
///   or hostile file must not make a diagnostic tool on a sick node eat memory.
pub(crate) fn read_regular(path: &Path, limit: u64, links: Links) -> io::Result<FileRead> {
    reading(path);
    read_opened(open_path(path, links)?, limit)
}

/// Opens `path` as [`read_regular`] does, for a reader that streams it
/// rather than reading it whole (an archive, read only as far as it needs):
/// a FIFO, a device, a socket or a directory is the same error at once,
/// never a blocked open or read.
pub(crate) fn open_regular(path: &Path, links: Links) -> io::Result<File> {
    reading(path);
    let file = open_path(path, links)?;
    regular(&file)?;
    Ok(file)
}

fn open_path(path: &Path, links: Links) -> io::Result<File> {
    // std adds O_RDONLY (read only) and O_CLOEXEC.
    OpenOptions::new()
        .read(true)
        .custom_flags(open_flags(links).bits())
        .open(path)
        .map_err(|err| open_error(err, links))
}

/// [`read_regular`] of `name` relative to the open directory `dir` (shown
/// as `shown` to whoever watches this thread): one `openat`, without
/// walking the directory's own path again for each of its files.
pub(crate) fn read_regular_at<P: ?Sized + nix::NixPath>(
    dir: &impl AsFd,
    name: &P,
    shown: &Path,
    limit: u64,
    links: Links,
) -> io::Result<FileRead> {
    use nix::fcntl::OFlag;
    reading(shown);
    let flags = open_flags(links) | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(dir, name, flags, nix::sys::stat::Mode::empty())
        .map_err(|errno| open_error(io::Error::from(errno), links))?;
    read_opened(File::from(fd), limit)
}

/// Opens `name` relative to `dir` (`AT_FDCWD`: as a path) read-only and
/// non-blocking (a FIFO in a fake `--proc-root` cannot hang the open), with
/// `extra` flags.
pub(crate) fn open_at<P: ?Sized + nix::NixPath>(
    dir: &impl AsFd,
    name: &P,
    extra: nix::fcntl::OFlag,
) -> io::Result<File> {
    use nix::fcntl::OFlag;
    let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | extra;
    Ok(File::from(nix::fcntl::openat(
        dir,
        name,
        flags,
        nix::sys::stat::Mode::empty(),
    )?))
}

/// The directory `name` relative to `dir` (`AT_FDCWD`: a path), open, to
/// open its files relative to it. A thread that opens many files below it
/// opens its own: once threads share the descriptor table the kernel takes
/// a reference on the descriptor for every `openat` relative to it, and two
/// cores counting on one cache line cost more than the walks it saves.
pub(crate) fn open_dir<P: ?Sized + nix::NixPath>(dir: &impl AsFd, name: &P) -> io::Result<File> {
    open_at(dir, name, nix::fcntl::OFlag::O_DIRECTORY)
}

fn open_flags(links: Links) -> nix::fcntl::OFlag {
    let mut flags = nix::fcntl::OFlag::O_NONBLOCK;
    if links == Links::Refuse {
        flags |= nix::fcntl::OFlag::O_NOFOLLOW;
    }
    flags
}

fn open_error(err: io::Error, links: Links) -> io::Error {
    match err.raw_os_error() {
        Some(code) if code == nix::libc::ELOOP && links == Links::Refuse => io::Error::new(
            io::ErrorKind::InvalidInput,
            "a symlink, where a regular file belongs: not followed",
        ),
        // open(2) of a socket fails so, before `fstat` could say.
        Some(code) if code == nix::libc::ENXIO => io::Error::new(
            io::ErrorKind::InvalidInput,
            "a socket (or a device without a driver), where containerd writes a regular \
             file: not read",
        ),
        _ => err,
    }
}

/// The checks and the read of [`read_regular`] once the file is open.
pub(crate) fn read_opened(mut file: File, limit: u64) -> io::Result<FileRead> {
    let metadata = regular(&file)?;
    if metadata.len() > limit {
        return Err(too_large(limit, metadata.len()));
    }
    let bytes = read_at_most(&mut file, limit, metadata.len())?;
    Ok(FileRead {
        bytes,
        modified_nanos: mtime_nanos(&metadata)?,
        metadata,
    })
}

/// The open file's own metadata, when it is a regular file.
fn regular(file: &File) -> io::Result<std::fs::Metadata> {
    let metadata = file.metadata()?;
    let file_type = metadata.file_type();
    if !file_type.is_file() {
        return Err(not_a_regular_file(type_name(&file_type)));
    }
    Ok(metadata)
}

/// What a read says of `what` ("a directory", "a FIFO", ...) where a
/// regular file belongs.
fn not_a_regular_file(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}, where a regular file belongs: not read"),
    )
}

/// `<number>/<leaf>` (`4711/stat`), written into `buffer` as the C string
/// an `openat` takes: a procfs walk opens one per process and per shim
/// thread, thousands on a busy node, and formatting each into a new
/// `String` (which nix then copied again to add the NUL) was an allocation
/// and a free apiece.
pub(crate) fn numbered<'b>(buffer: &'b mut [u8; 48], number: i32, leaf: &str) -> &'b CStr {
    use std::io::Write;
    let room = buffer.len();
    let mut cursor = &mut buffer[..];
    // The leaves are nodectl's own short names, never a NUL or 30 bytes: a
    // name that does not fit opens nothing rather than a cut path.
    let written = write!(cursor, "{number}/{leaf}\0").map(|()| room - cursor.len());
    match written {
        Ok(len) => CStr::from_bytes_with_nul(&buffer[..len]).unwrap_or_default(),
        Err(_) => Default::default(),
    }
}

/// A procfs record (`<pid>/stat`, `comm`, a thread's `syscall` or `wchan`)
/// is under this; one read this size gets it whole.
pub(crate) const RECORD_READ: usize = 1024;
/// The kernel's records are under 1 KiB (`comm` is 16 bytes at most); past
/// this, a fake `--proc-root`'s file is not read on.
pub(crate) const RECORD_CAP: usize = 64 * 1024;

/// Reads the procfs record `name` (relative to `dir`) into `buffer` and
/// gives its length: one `openat` (non-blocking: a FIFO in a fake
/// `--proc-root` cannot hang it) and one `read`, without the `fstat` and the
/// read for EOF of a general file read (procfs reports size 0 and hands out
/// a record whole, so a read that leaves room has reached the end). Only a
/// full buffer reads on, up to [`RECORD_CAP`].
pub(crate) fn read_proc_record_at<P: ?Sized + nix::NixPath>(
    dir: &impl AsFd,
    name: &P,
    buffer: &mut Vec<u8>,
) -> io::Result<usize> {
    let mut file = open_at(dir, name, nix::fcntl::OFlag::empty())?;
    buffer.clear();
    buffer.resize(RECORD_READ, 0);
    let mut filled = 0;
    loop {
        // A fake `--proc-root` can hold a directory where procfs has a file.
        let n = file
            .read(&mut buffer[filled..])
            .map_err(|err| match err.raw_os_error() {
                Some(nix::libc::EISDIR) => not_a_regular_file("a directory"),
                _ => err,
            })?;
        filled += n;
        if n == 0 || filled < buffer.len() {
            return Ok(filled);
        }
        if buffer.len() >= RECORD_CAP {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("over {RECORD_CAP} bytes: not read"),
            ));
        }
        buffer.resize(buffer.len() * 2, 0);
    }
}

/// Reads a file of procfs (or of a fake `--proc-root`, which may hold
/// anything) whole, as [`read_regular`] does: a FIFO, a device or a file
/// over `limit` bytes is an error at once, never a hang or nodectl's memory.
/// procfs files are regular ones of size 0, read to their end.
pub(crate) fn read_proc(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    Ok(read_regular(path, limit, Links::Follow)?.bytes)
}

/// [`read_proc`] as text; not UTF-8 is an error.
pub(crate) fn read_proc_string(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_proc(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8: not read"))
}

/// Reads to the end, but never more than `limit` bytes (the file may have
/// grown since `fstat`), into a buffer sized from `fstat` (and the cap).
/// The end is only where a `read` returns 0: a short read proves nothing.
/// procfs, sysfs and cgroupfs files say size 0 (or a page) whatever they
/// hold, and a seq_file hands out at most a page of whole records per read
/// (a 4 KiB read of a mount table returns about 4,000 bytes, and so do all
/// after it), so a reader that stopped at the first read leaving room would
/// see a node's mount table cut after its first page; FUSE and NFS may
/// return short reads before the end too. On a local file the read that
/// says 0 costs a syscall and no I/O.
fn read_at_most(file: &mut File, limit: u64, size: u64) -> io::Result<Vec<u8>> {
    let cap = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    // Room for one byte more than `fstat` said: a file that grew shows so.
    let mut bytes = vec![0; (size.min(limit) as usize).saturating_add(1).min(cap)];
    let mut filled = 0;
    loop {
        if filled == bytes.len() {
            if bytes.len() >= cap {
                return Err(too_large(limit, filled as u64));
            }
            // Grown since `fstat`, or a file system that says size 0.
            let grown = bytes.len().saturating_mul(2).clamp(64, cap);
            bytes.resize(grown, 0);
        }
        let n = match file.read(&mut bytes[filled..]) {
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if n == 0 {
            break;
        }
        filled += n;
        // A regular file that gave exactly the size `fstat` said, with room
        // left for more, is at its end: Linux returns less than asked from a
        // regular file only there. The read for EOF it would take is one
        // system call of the four a status file costs (thousands a look).
        // A size of 0 (procfs) or another than read (sysfs says 4096) is
        // read on to EOF as before.
        if size > 0 && filled as u64 == size && filled < bytes.len() {
            break;
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

fn too_large(limit: u64, size: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{size} bytes, larger than the {limit} bytes nodectl reads: not read"),
    )
}

/// What a gap calls a file that is not a regular one.
fn type_name(file_type: &std::fs::FileType) -> &'static str {
    if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

/// Seconds and nanoseconds (as `stat` gives them) in nanoseconds; only
/// compared, so saturating is enough.
pub(crate) fn nanos(seconds: i64, nanoseconds: i64) -> i64 {
    seconds
        .saturating_mul(1_000_000_000)
        .saturating_add(nanoseconds)
}

/// Modification time of a file as unix nanoseconds.
pub(crate) fn mtime_nanos(metadata: &std::fs::Metadata) -> io::Result<i64> {
    let modified = metadata.modified()?;
    let since_epoch = modified
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "mtime before 1970"))?;
    i64::try_from(since_epoch.as_nanos())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "mtime out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;
    use std::time::{Duration, SystemTime};

    /// The error reading `path`; fails the test if the read blocks (a
    /// FIFO opened without `O_NONBLOCK` would, forever).
    fn refused(path: &Path, links: Links) -> String {
        let (send, answer) = std::sync::mpsc::channel();
        let owned = path.to_path_buf();
        // Only the length crosses: a whole `FileRead` (its metadata) is
        // too large a value for a channel, as clippy says.
        std::thread::spawn(move || {
            send.send(read_regular(&owned, 1 << 20, links).map(|file| file.bytes.len()))
        });
        match answer.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(length)) => panic!("{} was read: {length} bytes", path.display()),
            Ok(Err(err)) => err.to_string(),
            Err(_) => panic!("reading {} blocked", path.display()),
        }
    }

    /// A block device to open: one of the machine's, else one made here.
    fn block_device(dir: &Path) -> PathBuf {
        let found = std::fs::read_dir("/dev")
            .unwrap()
            .flatten()
            .find(|e| e.file_type().is_ok_and(|t| t.is_block_device()));
        if let Some(entry) = found {
            return entry.path();
        }
        let path = dir.join("loop");
        nix::sys::stat::mknod(
            &path,
            nix::sys::stat::SFlag::S_IFBLK,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
            nix::sys::stat::makedev(7, 0),
        )
        .unwrap_or_else(|e| panic!("no block device in /dev, and mknod: {e}"));
        path
    }

    #[test]
    fn a_numbered_path_is_the_number_then_the_leaf_for_every_pid() {
        let mut buffer = [0xff; 48];
        for (number, want) in [
            (4711, "4711/stat"),
            (1, "1/syscall"),
            (i32::MAX, "2147483647/wchan"),
            (i32::MIN, "-2147483648/stat"),
        ] {
            let leaf = want.split('/').nth(1).unwrap();
            assert_eq!(numbered(&mut buffer, number, leaf).to_str(), Ok(want));
        }
        // A leaf that cannot fit names nothing, never a path cut short.
        assert_eq!(numbered(&mut buffer, 1, &"x".repeat(60)).to_bytes(), b"");
    }

    #[test]
    fn only_regular_files_are_read_and_every_other_type_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let socket = dir.path().join("socket");
        let _listener = UnixListener::bind(&socket).unwrap();
        let link = dir.path().join("link");
        std::fs::write(dir.path().join("target"), "{}").unwrap();
        symlink("target", &link);
        let looped = dir.path().join("loop-link");
        symlink("loop-link", &looped);

        // Each of these returns at once: none is opened in a blocking way.
        for (path, links, says) in [
            (
                fifo.as_path(),
                Links::Refuse,
                "a FIFO, where a regular file belongs",
            ),
            (&socket, Links::Refuse, "a socket"),
            (Path::new("/dev/null"), Links::Refuse, "a character device"),
            (&block_device(dir.path()), Links::Follow, "a block device"),
            (dir.path(), Links::Refuse, "a directory"),
            (
                &link,
                Links::Refuse,
                "a symlink, where a regular file belongs",
            ),
            (&looped, Links::Refuse, "a symlink"),
            // Followed where asked, a loop is still an error, not a hang.
            (&looped, Links::Follow, "symbolic links"),
        ] {
            let error = refused(path, links);
            assert!(error.contains(says), "{}: {error}", path.display());
        }
        assert_eq!(read_regular(&link, 10, Links::Follow).unwrap().bytes, b"{}");
    }

    fn symlink(target: &str, link: &Path) {
        std::os::unix::fs::symlink(target, link).unwrap();
    }

    #[test]
    fn a_file_over_the_cap_is_refused_and_one_at_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status");
        std::fs::write(&path, vec![b'x'; 100]).unwrap();
        assert_eq!(
            read_regular(&path, 100, Links::Refuse).unwrap().bytes.len(),
            100
        );
        let error = read_regular(&path, 99, Links::Refuse).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(
            error.to_string().contains("100 bytes, larger than the 99"),
            "{error}"
        );
        // A sparse 50 MB file: refused from its size, nothing allocated.
        File::create(&path).unwrap().set_len(50 << 20).unwrap();
        let error = read_regular(&path, 1 << 20, Links::Refuse).unwrap_err();
        assert!(error.to_string().starts_with("52428800 bytes"), "{error}");
    }

    #[test]
    fn a_file_whose_size_fstat_does_not_give_is_read_whole_and_still_capped() {
        // procfs says size 0: the buffer sized from `fstat` grows to the end.
        let path = Path::new("/proc/self/status");
        let file = read_regular(path, 1 << 20, Links::Follow).unwrap();
        let text = String::from_utf8(file.bytes).unwrap();
        assert!(text.starts_with("Name:"), "{text}");
        assert!(text.contains("\nPid:") && text.ends_with('\n'), "{text}");
        // And past the cap it is refused, as a file `fstat` sized would be.
        let error = read_regular(path, 100, Links::Follow).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(
            error
                .to_string()
                .starts_with("101 bytes, larger than the 100"),
            "{error}"
        );
    }

    #[test]
    fn a_proc_file_handed_out_a_page_at_a_time_is_read_to_its_end() {
        // A seq_file (the mount table, smaps) returns at most about a page
        // of whole records per read, however much room the read leaves:
        // `smaps` of a sleeping process is some 28 KB, so a reader that took
        // the first short read for the end would keep only its first page.
        // The process sleeps, so its mappings, and the file, stay the same.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let path = PathBuf::from(format!("/proc/{}/smaps", sleeper.id()));
        // Once it sleeps (its stat says S), its libraries are mapped.
        let stat = PathBuf::from(format!("/proc/{}/stat", sleeper.id()));
        let asleep = || {
            let record = std::fs::read_to_string(&stat).unwrap_or_default();
            record
                .rsplit(')')
                .next()
                .is_some_and(|r| r.starts_with(" S"))
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !asleep() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let ours = read_proc(&path, 64 << 20);
        let whole = std::fs::read(&path);
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        let (ours, whole) = (ours.unwrap(), whole.unwrap());
        assert!(whole.len() > 3 * 4096, "{} bytes only", whole.len());
        assert_eq!(ours.len(), whole.len());
        assert_eq!(ours, whole);
        // The cap holds on such a file too: past it, an error, never a cut.
        let error = read_proc(&path, 8192);
        assert!(error.is_err(), "read {:?} bytes", error.map(|b| b.len()));
    }

    #[test]
    fn the_mtime_is_the_read_files_own_and_a_missing_file_stays_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status");
        std::fs::write(&path, "{}").unwrap();
        let written = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(written)
            .unwrap();
        let file = read_regular(&path, 10, Links::Refuse).unwrap();
        assert_eq!(file.modified_nanos, 1_700_000_000_123_456_789);
        let missing = read_regular(&dir.path().join("gone"), 10, Links::Refuse).unwrap_err();
        // cri_store tells a container being removed by this kind.
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }
}
