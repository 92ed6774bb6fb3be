//! loom models (run with `RUSTFLAGS="--cfg loom"`, tests named `loom_*`): the chunk
//! cursor's claim protocol, and a negative control loom must catch.

use crate::ChunkCursor;
use crate::sync::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Claims from `threads` threads; returns how many times each chunk was handed out.
fn claim_counts(
    total: usize,
    threads: usize,
    claim: fn(&ChunkCursor, &AtomicUsize) -> Option<usize>,
) -> std::vec::Vec<usize> {
    use std::vec::Vec;
    let cursor = Arc::new((ChunkCursor::new(total), AtomicUsize::new(0)));
    let counts: Arc<Vec<AtomicUsize>> = Arc::new((0..total).map(|_| AtomicUsize::new(0)).collect());
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (cursor, counts) = (cursor.clone(), counts.clone());
            thread::spawn(move || {
                while let Some(i) = claim(&cursor.0, &cursor.1) {
                    counts[i].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
}

#[test]
fn loom_every_chunk_is_claimed_exactly_once() {
    loom::model(|| {
        let counts = claim_counts(3, 2, |c, _| c.claim());
        assert!(counts.iter().all(|&n| n == 1), "{counts:?}");
    });
}

/// Negative control: a cursor that loads and then stores (no atomic read-modify-write)
/// hands a chunk out twice in some interleaving, and loom must find it.
#[test]
#[should_panic]
fn loom_load_then_store_cursor_is_caught() {
    loom::model(|| {
        let counts = claim_counts(3, 2, |_, next| {
            let i = next.load(Ordering::Relaxed);
            if i >= 3 {
                return None;
            }
            next.store(i + 1, Ordering::Relaxed);
            Some(i)
        });
        assert!(counts.iter().all(|&n| n == 1), "{counts:?}");
    });
}
