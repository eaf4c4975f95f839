//! Threads waited for until a deadline: a read stuck in the kernel (a
//! stalled disk, FUSE or NFS) cannot be interrupted, so the work runs on a
//! thread of its own that is abandoned when the deadline passes, and each
//! thread notes what it reads so that the wait can say where it hung. An
//! abandoned thread is told so ([`given_up`]): work that is slow rather
//! than stuck (a large input decoded) can stop instead of allocating on for
//! an answer nobody will take.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// The path a source's thread is reading now, shared with whoever waits for
/// it: when a read never returns, the gap can name the file it hangs in.
pub(crate) type Reading = Arc<Mutex<Option<PathBuf>>>;

/// Set once whoever waits for a thread's work stops waiting (see
/// [`given_up`]).
pub(crate) type GivenUp = Arc<AtomicBool>;

thread_local! {
    static READING: RefCell<Option<Reading>> = const { RefCell::new(None) };
    static GIVEN_UP: RefCell<Option<GivenUp>> = const { RefCell::new(None) };
}

/// The flag this thread's waiter sets when it stops waiting (its deadline
/// passed, or it went away): `None` on a thread nobody waits for so. Work
/// that can stop checks it between its steps; a read stuck in the kernel
/// cannot, and is left behind as before.
pub(crate) fn given_up() -> Option<GivenUp> {
    GIVEN_UP.with(|g| g.borrow().clone())
}

/// Makes [`given_up`] answer `flag` on this thread.
pub(crate) fn watch_given_up(flag: GivenUp) {
    GIVEN_UP.with(|g| *g.borrow_mut() = Some(flag));
}

/// Makes this thread report what it reads into `slot` (see [`reading`]).
pub(crate) fn watch_reading(slot: Reading) {
    READING.with(|r| *r.borrow_mut() = Some(slot));
}

/// Notes that this thread is about to read `path` (a file or a directory);
/// free when nobody watches the thread.
pub(crate) fn reading(path: &Path) {
    READING.with(|r| {
        if let Some(slot) = &*r.borrow() {
            if let Ok(mut slot) = slot.lock() {
                // The buffer is reused: this runs for every file read.
                match &mut *slot {
                    Some(reading) => {
                        reading.as_mut_os_string().clear();
                        reading.push(path);
                    }
                    None => *slot = Some(path.to_path_buf()),
                }
            }
        }
    });
}

/// [`super::parallel::on_two_threads`] for a source: each thread reports
/// what it reads where this one does (see [`reading`]), so a read that
/// blocks is still named.
pub(crate) fn on_two_threads<T: Sync, R: Send>(
    items: &[T],
    at_least: usize,
    work: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let slot = READING.with(|r| r.borrow().clone());
    let flag = given_up();
    let watch = || {
        if let Some(slot) = &slot {
            watch_reading(slot.clone());
        }
        if let Some(flag) = &flag {
            watch_given_up(flag.clone());
        }
    };
    super::parallel::on_two_threads(items, at_least, watch, work)
}

/// Work running on a thread of its own, to be waited for until a deadline
/// and abandoned after it. The thread says what it reads (see [`reading`]),
/// so a wait that gives up can name the file the work hangs in; and it is
/// told when the wait is over ([`given_up`]), answered or not: once
/// dropped, nobody can take its answer.
pub(crate) struct DeadlineThread<T> {
    /// What the work reads as a whole; named when it blocks before it
    /// says which file it is in.
    path: PathBuf,
    reading: Reading,
    given_up: GivenUp,
    answer: mpsc::Receiver<T>,
}

impl<T> Drop for DeadlineThread<T> {
    fn drop(&mut self) {
        self.given_up.store(true, Ordering::Relaxed);
    }
}

impl<T: Send + 'static> DeadlineThread<T> {
    /// Starts `work` on a thread named `nodectl-{name}`.
    pub(crate) fn spawn(
        name: &str,
        path: &Path,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> DeadlineThread<T> {
        let reading = Reading::default();
        let given_up = GivenUp::default();
        let (send, answer) = mpsc::sync_channel(1);
        let (slot, flag) = (reading.clone(), given_up.clone());
        // Detached: nothing ever joins it. A thread stuck in a kernel read
        // is left behind and ends with the process (exit_group kills it:
        // FUSE and NFS waits are killable; a read in true D state delays
        // only the process's final exit, after the report is written).
        let spawned = std::thread::Builder::new()
            .name(format!("nodectl-{name}"))
            .spawn(move || {
                watch_reading(slot);
                watch_given_up(flag);
                let value = work();
                // The waiter may have given up: nobody to tell then.
                let _ = send.send(value);
            });
        if let Err(err) = spawned {
            // Dropping the sender makes `answer` report it at once.
            eprintln!("nodectl: cannot start a thread for {name}: {err}");
        }
        DeadlineThread {
            path: path.to_path_buf(),
            reading,
            given_up,
            answer,
        }
    }

    /// The work's answer, or the path it is stuck in (else the one it was
    /// given) and what to say about it. Either way the wait is over: the
    /// work is told so when `self` is dropped, here.
    pub(crate) fn answer(self, until: Instant, started: Instant) -> Result<T, (PathBuf, String)> {
        let timeout = until.saturating_duration_since(Instant::now());
        match self.answer.recv_timeout(timeout) {
            Ok(answer) => Ok(answer),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let waited = humantime::format_duration(Duration::from_millis(
                    started.elapsed().as_millis() as u64,
                ));
                Err(match self.reading.lock().ok().and_then(|p| p.clone()) {
                    Some(path) => {
                        let error = format!(
                            "blocked: no answer after {waited} reading {}; \
                             reported without it (a read stuck in the kernel cannot be \
                             interrupted: a stalled disk, FUSE or NFS)",
                            path.display()
                        );
                        (path, error)
                    }
                    None => (
                        self.path.clone(),
                        format!("blocked: no answer after {waited}; reported without it"),
                    ),
                })
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err((
                self.path.clone(),
                "failed: its thread ended without an answer (see stderr)".to_string(),
            )),
        }
    }
}

/// `work` done on each of `items` in order, on a thread of its own, until
/// `until`: the answers given by then, in order, each kept as soon as it is
/// given. Fewer answers than items: the work on the next item had not
/// returned by `until` (a read stuck in the kernel: a stalled disk, FUSE or
/// NFS), or it panicked; that thread is left behind, as [`DeadlineThread`]
/// leaves its work.
pub(crate) fn each_until<T, R>(
    items: &[T],
    until: Instant,
    work: impl Fn(&T) -> R + Send + 'static,
) -> Vec<R>
where
    T: Clone + Send + 'static,
    R: Send + 'static,
{
    let (send, answers) = mpsc::channel();
    let owned = items.to_vec();
    let spawned = std::thread::Builder::new()
        .name("nodectl-each".into())
        .spawn(move || {
            for item in &owned {
                // The waiter may have given up: nobody to tell then.
                if send.send(work(item)).is_err() {
                    return;
                }
            }
        });
    if let Err(err) = spawned {
        eprintln!("nodectl: cannot start a thread: {err}");
        return Vec::new();
    }
    let mut answered = Vec::with_capacity(items.len());
    while answered.len() < items.len() {
        match answers.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(answer) => answered.push(answer),
            Err(_) => break,
        }
    }
    answered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_worked_on_two_threads_in_order_and_say_what_they_read_where_the_caller_does() {
        let items: Vec<u32> = (0..100).collect();
        // Few items: one call, on this thread.
        assert_eq!(
            on_two_threads(&items, 101, |piece| piece.to_vec()),
            vec![items.clone()]
        );
        let slot = Reading::default();
        let source = slot.clone();
        let pieces = std::thread::spawn(move || {
            watch_reading(source);
            on_two_threads(&items, 4, |piece| {
                reading(Path::new("/proc/1/stat"));
                // The first piece is slow: the other thread takes the rest.
                if piece[0] == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                (std::thread::current().id(), piece.to_vec())
            })
        })
        .join()
        .unwrap();
        let worked: Vec<u32> = pieces.iter().flat_map(|(_, piece)| piece.clone()).collect();
        assert_eq!(worked, (0..100).collect::<Vec<_>>(), "every item, in order");
        assert!(pieces.len() > 2, "{} pieces", pieces.len());
        let first = pieces[0].0;
        assert!(
            pieces[1..].iter().all(|(thread, _)| *thread != first),
            "the thread held up by the first piece took no other"
        );
        assert_eq!(
            slot.lock().unwrap().as_deref(),
            Some(Path::new("/proc/1/stat"))
        );
    }

    /// Work that is slow, not stuck, learns that its waiter gave up and
    /// can stop; one answered in time is never told before it answers.
    #[test]
    fn a_thread_given_up_at_its_deadline_is_told_so() {
        let (told, learnt) = mpsc::channel();
        let started = Instant::now();
        let thread = DeadlineThread::spawn("slow", Path::new("/slow"), move || {
            let flag = given_up().expect("a deadline thread has the flag");
            let waited = Instant::now();
            while !flag.load(Ordering::Relaxed) && waited.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = told.send(flag.load(Ordering::Relaxed));
        });
        let until = started + Duration::from_millis(200);
        assert!(thread.answer(until, started).is_err());
        let stopped = learnt.recv_timeout(Duration::from_secs(10));
        assert_eq!(stopped, Ok(true), "the abandoned work was told");

        let quick = DeadlineThread::spawn("quick", Path::new("/quick"), || {
            given_up().is_some_and(|flag| flag.load(Ordering::Relaxed))
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        assert_eq!(quick.answer(deadline, Instant::now()), Ok(false));
        assert!(
            given_up().is_none(),
            "nobody waits for the test's own thread"
        );
    }

    #[test]
    fn each_answer_is_kept_as_it_comes_and_the_work_is_given_up_at_the_deadline() {
        let started = Instant::now();
        let answered = each_until(&[1u32, 2, 3], started + Duration::from_millis(300), |&n| {
            if n == 2 {
                // As a read stuck in the kernel would.
                std::thread::sleep(Duration::from_secs(60));
            }
            n * 10
        });
        assert_eq!(answered, [10]);
        let waited = started.elapsed();
        assert!(waited < Duration::from_secs(2), "waited {waited:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        assert_eq!(
            each_until(&[1u32, 2, 3], deadline, |&n| n * 10),
            [10, 20, 30]
        );
    }
}
