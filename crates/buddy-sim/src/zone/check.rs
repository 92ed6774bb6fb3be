//! `Zone::check`: every invariant, verified by walking the frames and every free list.

use crate::frame::{FrameState, Word};
use crate::frame_storage::FrameStorage;
use crate::migratetype::MigrateType;
use crate::types::{FrameIdx, Order};
use crate::zone::Zone;
use crate::zone::config::PCP_LISTS;
use crate::zone::list::{FreeCount, List};
use crate::zone::map::FrameMap;
use crate::zone::per_cpu_set::PerCpuSet;
use lock_api::RawMutex;
use mm_types::Pfn;

/// A broken invariant found by [`Zone::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corruption {
    /// Which invariant.
    pub what: &'static str,
    /// A frame where it shows.
    pub pfn: Pfn,
}

impl core::fmt::Display for Corruption {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} at frame {}", self.what, self.pfn)
    }
}

impl core::error::Error for Corruption {}

impl<F, P, R> Zone<F, P, R>
where
    F: FrameStorage,
    P: PerCpuSet<R>,
    R: RawMutex,
{
    /// Verifies every invariant: the blocks tile the zone (each frame the head of exactly
    /// one block, a reserved frame, or a tail inside a block), blocks are aligned and inside
    /// the zone, free lists are consistent with the frames and their counts, no two free
    /// buddies of one order and the same knowledge are both in the buddy below MAX_ORDER,
    /// reserved frames are exactly the zone's holes, references are sane, only free blocks
    /// are marked known zero, with the counts of them right and each list's known-zero
    /// blocks at its back; every free block in the buddy is on the lists of its pageblock's
    /// type (or the isolated lists), a free block of a pageblock or more spans pageblocks of
    /// one type, and an allocated head has no reference count exactly when it is frozen; a
    /// CMA reservation's pageblocks are movable, add up to the frames reserved, and hold
    /// free blocks, movable allocations and order-0 pages only; pageblock bits are only in
    /// the frame that holds its pageblock's.
    ///
    /// Meant for a quiescent zone: with allocations or frees in flight on other CPUs it
    /// can report the frames they are moving.
    ///
    /// # Errors
    /// [`Corruption`] naming the first broken invariant and a frame.
    pub fn check(&self) -> Result<(), Corruption> {
        let m = self.map();
        let bad = |what, idx: FrameIdx| {
            Err(Corruption {
                what,
                pfn: m.pfn(idx),
            })
        };
        let n = self.spanned_frames().len();
        let (mut buddy_heads, mut pcp_heads, mut reserved) = (0u64, 0, 0);
        let mut buddy = FreeCount::NONE;
        let mut reported = 0u64;
        let mut idx = 0usize;
        while idx < n {
            // Below the zone's frame count, which fits a u32.
            let i = FrameIdx(idx as u32);
            let w = m.frame(i).load();
            if w.order() > self.cfg.max_order.get() {
                return bad("a block above MAX_ORDER", i);
            }
            let size = 1usize << w.order();
            match w.state() {
                FrameState::Tail => return bad("a tail frame outside any block", i),
                FrameState::Freeing => {
                    return bad("a frame being freed (check a quiescent zone)", i);
                }
                FrameState::Zeroing => {
                    return bad("a block being zeroed (check a quiescent zone)", i);
                }
                FrameState::Reporting => {
                    return bad("a block being reported (check a quiescent zone)", i);
                }
                FrameState::Buddy => {
                    buddy_heads += 1;
                    buddy.add(Order(w.order()), w.zeroed());
                }
                FrameState::Pcp => pcp_heads += 1,
                FrameState::Reserved => reserved += 1,
                FrameState::Allocated | FrameState::Leaked | FrameState::Cached => {}
            }
            if w.zeroed() && !matches!(w.state(), FrameState::Buddy | FrameState::Pcp) {
                return bad("a known-zero mark on a frame that is not free", i);
            }
            if !Order(w.order()).aligns(m.pfn(i)) || idx + size > n {
                return bad("a misaligned block or one past the zone", i);
            }
            let frozen = w.state() == FrameState::Allocated && w.frozen();
            if (w.state() == FrameState::Allocated && !frozen) == (w.refcount() == 0)
                || frozen && w.refcount() != 0
                || w.frozen() && !frozen
            {
                return bad("a refcount that does not match the state", i);
            }
            if w.state() == FrameState::Buddy {
                if w.mt() != m.free_list_of(i) {
                    return bad(
                        "a free block on the lists of another type than its pageblock's",
                        i,
                    );
                }
                let first = m.pageblock_bits_frame(i).pageblock_bits();
                let mut pb = i;
                while pb < i + size as u32 {
                    if m.pageblock_bits_frame(pb).pageblock_bits() != first {
                        return bad("a free block over pageblocks of different types", pb);
                    }
                    pb += m.pageblock_pages();
                }
            }
            let pb = m.pageblock(i);
            if pb.cma
                && (pb.mt != MigrateType::Movable
                    || match w.state() {
                        // Only movable allocations borrow a CMA reservation's memory; its
                        // owner's runs are order-0 pages.
                        FrameState::Allocated => {
                            w.order() != 0 && w.mt() != MigrateType::Movable as u8
                        }
                        FrameState::Pcp => w.mt() != MigrateType::Movable as u8,
                        _ => false,
                    })
            {
                return bad(
                    "a CMA reservation holding what is not movable, or on another list",
                    i,
                );
            }
            if matches!(w.state(), FrameState::Leaked | FrameState::Reserved) && w.order() != 0 {
                return bad("a leaked or reserved frame above order 0", i);
            }
            // One pass over the block's frames: each after the head a tail, and pageblock
            // bits only in the frame that holds its pageblock's (initialization writes tails
            // whole, pageblock bits included, except there).
            for (k, f) in m.frames.slice(idx..idx + size).iter().enumerate() {
                // Below the zone's frame count, which fits a u32.
                let t = FrameIdx((idx + k) as u32);
                if k > 0 && f.load().state() != FrameState::Tail {
                    return bad("a head inside another block", t);
                }
                if f.pageblock_bits() != 0 && !core::ptr::eq(m.pageblock_bits_frame(t), f) {
                    return bad(
                        "pageblock bits in a frame that does not hold its pageblock's",
                        t,
                    );
                }
            }
            if w.reported() && w.state() != FrameState::Buddy {
                return bad(
                    "a reported mark on a frame that is not free in the buddy",
                    i,
                );
            }
            if w.reported() {
                reported += size as u64;
            }
            if w.state() == FrameState::Buddy
                && w.order() < self.cfg.max_order.get()
                && let Some(b) = m.buddy(i, Order(w.order()))
                && m.frame(b).load().ignoring_reported() == w.ignoring_reported()
            {
                return bad("two free buddies of one order both in the buddy", i);
            }
            idx += size;
        }
        {
            let free = self.free.lock();
            let mut listed = 0u64;
            for (o, list) in free.lists().iter().enumerate() {
                for (t, list) in list.iter().enumerate() {
                    listed += check_list(m, list, FrameState::Buddy, |w| {
                        w.order() as usize == o && w.mt() as usize == t
                    })?;
                    if let Some(back) = list.tail()
                        && m.frame(back).load().zeroed()
                        && !free.says_zeroed(o, t)
                    {
                        return bad(
                            "a buddy list with known-zero blocks that the word of \
                             known-zero orders leaves out",
                            back,
                        );
                    }
                }
            }
            if reported != free.reported_free() {
                return bad(
                    "reported blocks that do not add up to the reported count",
                    FrameIdx::FIRST,
                );
            }
            if listed != buddy_heads || buddy != free.count() {
                return bad(
                    "buddy lists and frames (or their known-zero frames) disagree",
                    FrameIdx::FIRST,
                );
            }
            let cma = m
                .pageblocks(FrameIdx::FIRST..FrameIdx(n as u32))
                .filter(|b| m.pageblock(b.start).cma)
                .map(|b| u64::from(b.end - b.start))
                .sum::<u64>();
            if cma != free.cma_reserved() {
                return bad(
                    "CMA pageblocks that do not add up to the frames reserved",
                    FrameIdx::FIRST,
                );
            }
            if free.present() + reserved != self.cfg.nr_pages {
                return bad(
                    "usable frames and holes do not add up to the zone",
                    FrameIdx::FIRST,
                );
            }
        }
        let mut listed = 0u64;
        for pcp in self.pcps.slots() {
            let lists = pcp.lists.lock();
            let mut count = FreeCount::NONE;
            for l in 0..PCP_LISTS {
                let entry_ok = |w: Word| {
                    MigrateType::from_index(w.mt())
                        .and_then(|mt| self.cfg.pcp_list(Order(w.order()), mt))
                        == Some(l)
                };
                listed += check_list(m, lists.lists.cold(l), FrameState::Pcp, entry_ok)?;
                listed += check_hot(m, lists.lists.hot(l), false, entry_ok)?;
                listed += check_hot(m, lists.lists.zeroed(l), true, entry_ok)?;
                for idx in lists.lists.blocks(m.frames, l) {
                    let w = m.frame(idx).load();
                    count.add(Order(w.order()), w.zeroed());
                }
            }
            if count != lists.count {
                return bad(
                    "a per-cpu count (or known-zero count) that does not match its lists",
                    FrameIdx::FIRST,
                );
            }
        }
        if listed != pcp_heads {
            return bad("per-cpu lists and frames disagree", FrameIdx::FIRST);
        }
        Ok(())
    }
}

/// Walks one list, checking links, states and orders; returns its length.
fn check_list(
    m: FrameMap<'_>,
    list: &List,
    state: FrameState,
    entry_ok: impl Fn(Word) -> bool,
) -> Result<u64, Corruption> {
    let (mut at, mut prev, mut len) = (list.head(), None, 0u64);
    // Known-zero blocks sit at a list's back, after every other block.
    let mut seen_zeroed = false;
    while let Some(idx) = at {
        let fail = |what| {
            Err(Corruption {
                what,
                pfn: m.pfn(idx),
            })
        };
        let Some(f) = m.frames.get(idx.get()) else {
            return fail("a list link outside the zone");
        };
        let w = f.load();
        if f.prev() != prev {
            return fail("a broken list link");
        }
        if w.state() != state || !entry_ok(w) {
            return fail("a list entry of the wrong state or order");
        }
        if seen_zeroed && !w.zeroed() {
            return fail("a block not known zero behind a known-zero one on its list");
        }
        seen_zeroed |= w.zeroed();
        len += 1;
        if len > m.frames.len() as u64 {
            return fail("a cycle in a free list");
        }
        prev = Some(idx);
        at = f.next();
    }
    if list.tail() != prev || u64::from(list.len()) != len {
        return Err(Corruption {
            what: "a list head whose tail or length is wrong",
            pfn: m.cfg.start,
        });
    }
    Ok(len)
}

/// Checks the blocks in one of a per-cpu list's arrays: each in the zone, a per-cpu head
/// that `entry_ok` accepts, known zero exactly if `zeroed` (the list's known-zero array);
/// returns how many.
/// A block on two lists (or twice on one) shows as more list entries than per-cpu heads.
fn check_hot(
    m: FrameMap<'_>,
    hot: &[FrameIdx],
    zeroed: bool,
    entry_ok: impl Fn(Word) -> bool,
) -> Result<u64, Corruption> {
    for &idx in hot {
        let fail = |what| {
            Err(Corruption {
                what,
                pfn: m.pfn(idx),
            })
        };
        let Some(f) = m.frames.get(idx.get()) else {
            return fail("a per-cpu array entry outside the zone");
        };
        let w = f.load();
        if w.state() != FrameState::Pcp || !entry_ok(w) {
            return fail("a list entry of the wrong state or order");
        }
        if w.zeroed() != zeroed {
            return fail("a per-cpu array entry in the wrong array for its known-zero mark");
        }
    }
    Ok(hot.len() as u64)
}
