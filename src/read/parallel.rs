//! Work shared by two threads: a node's files (sources) and the checks of a
//! snapshot both run on the two cores nodectl is typically given.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many pieces [`on_two_threads`] cuts its items into.
const PIECES: usize = 16;

/// Runs `work` on pieces of `items` on two threads (scoped: both end before
/// this returns) and gives the answers in the order of the pieces; fewer
/// than `at_least` items are worked through here, in one call, where a
/// thread would cost more than it saves. The threads take the next piece
/// whenever they are done with one, so a stretch of costly items (a run of
/// shims, each a score of reads where another process is one) does not
/// leave one core idle while the other works through it. Each thread runs
/// `on_start` before its first piece.
pub fn on_two_threads<T: Sync, R: Send>(
    items: &[T],
    at_least: usize,
    on_start: impl Fn() + Sync,
    work: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    if items.len() < at_least.max(2) {
        return vec![work(items)];
    }
    // Enough pieces to even out, few enough that what `work` sets up for
    // each (a directory descriptor, a buffer) stays small beside it.
    let pieces: Vec<&[T]> = items.chunks(items.len().div_ceil(PIECES)).collect();
    let next = AtomicUsize::new(0);
    let (work, on_start, pieces, next) = (&work, &on_start, &pieces, &next);
    let mut answers: Vec<(usize, R)> = std::thread::scope(|scope| {
        let threads = [(), ()].map(|()| {
            scope.spawn(move || {
                on_start();
                let mut answers = Vec::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(piece) = pieces.get(index) else {
                        return answers;
                    };
                    answers.push((index, work(piece)));
                }
            })
        });
        threads
            .into_iter()
            .flat_map(|thread| match thread.join() {
                Ok(answers) => answers,
                // A panic in either thread is the caller's panic, as if it
                // had worked through every piece on its own thread.
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    answers.sort_unstable_by_key(|(index, _)| *index);
    answers.into_iter().map(|(_, answer)| answer).collect()
}
