//! Per-frame metadata: one packed atomic word (state, order, reference count, flags) and the
//! intrusive list links, all atomics so that every CPU can share `&[Frame]`.
//!
//! Who may write a frame's word:
//! - an allocated head with references: anyone, by compare-and-swap only (`get_page`,
//!   `put_page`, `split_page`, `mark_hwpoison`, the claims of `free_contig_range`);
//! - a frame on a free list, or a tail inside a free block: the holder of that list's lock;
//! - a frame whose last reference a call dropped (`Freeing`, or straight to `Tail` when a
//!   multi-page free claims a plain page), or that a call just took off a free list: that
//!   call alone, until it hands the frame to a list or to its caller.

use crate::migratetype::MigrateType;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::types::FrameIdx;

/// What a frame is. Every frame is the head of exactly one block (free in the buddy, free on
/// a per-cpu list, allocated, leaked, being freed, or a reserved order-0 frame) or a `Tail`
/// inside one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum FrameState {
    /// Not usable memory: a hole in the memory map, or a range not yet given to the zone
    /// ([`Zone::add_memory`](crate::Zone::add_memory)). Never handed out, never merged.
    #[default]
    Reserved,
    /// Inside a block whose head is another frame.
    Tail,
    /// Head of a free block on the buddy free list of its order.
    Buddy,
    /// Head of a free block on a per-cpu list.
    Pcp,
    /// Head of an allocated block (an order-0 page after `split_page`).
    Allocated,
    /// An order-0 page that failed the free-time check (hwpoison) and is leaked for good.
    Leaked,
    /// A page whose last reference a call in progress dropped, not yet on a free list. Seen
    /// only while another CPU is inside a free.
    Freeing,
    /// Head of a free block that background zeroing ([`Zone::zero_some`](crate::Zone::zero_some))
    /// took off its free list to clear outside the zone lock; it goes back as known zero.
    /// Seen only while another CPU is inside `zero_some`.
    Zeroing,
    /// Head of a free block that free page reporting
    /// ([`Zone::report_free_pages`](crate::Zone::report_free_pages)) took off its free list
    /// to hand to the embedder's sink outside the zone lock; it goes back marked reported
    /// (or as it was, if the sink failed). Seen only while another CPU is reporting.
    Reporting,
    /// Head of a frozen block that its owner keeps in a cache of its own, to hand out
    /// again without the zone ([`Zone::cache_frozen`](crate::Zone::cache_frozen)): allocated
    /// as far as the zone knows, free as far as the owner's callers know. Every free and
    /// reference of it is refused until its owner takes it back out
    /// ([`Zone::uncache_frozen`](crate::Zone::uncache_frozen)): a second free of a block
    /// waiting in such a cache is reported, as a second free of a block on a free list is.
    Cached,
}

/// A frame's metadata word, unpacked from or to its atomic.
///
/// Bits 0..32 reference count, 32..40 order, 40..44 state, 44 hwpoison, 45 "vmalloc holds
/// a reference", 46 "known zero" (a free block head whose every byte is zero), 47 "frozen"
/// (an allocated head with no reference count: a frozen contiguous page, or a movable block
/// being migrated), 48..51 the migratetype (of an allocated head: the kind of allocation; of a
/// free head: the free list it is on, [`MigrateType`]'s index, 3 for CMA reservations' lists,
/// 4 for the isolated lists), 51 "reported" (a free buddy head that free page reporting
/// handed to the embedder's sink, and that no merge, split or allocation has taken since),
/// 52..64 when a per-cpu list head was freed there ([`Word::freed_at`]).
/// All zero is a reserved frame.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(u64);

const ORDER_SHIFT: u32 = 32;
const STATE_SHIFT: u32 = 40;
const POISONED: u64 = 1 << 44;
const VMALLOC: u64 = 1 << 45;
const ZEROED: u64 = 1 << 46;
const FROZEN: u64 = 1 << 47;
const MT_SHIFT: u32 = 48;
const MT: u64 = 0x7 << MT_SHIFT;
const REPORTED: u64 = 1 << 51;
const FREED_SHIFT: u32 = 52;
const FREED: u64 = 0xfff << FREED_SHIFT;
const REFCOUNT: u64 = u32::MAX as u64;
const STATE: u64 = 0xf << STATE_SHIFT;

impl Word {
    /// A block head (or tail, or reserved frame) with no references and no flags.
    #[inline]
    pub(crate) const fn new(state: FrameState, order: u8) -> Self {
        Self(((state as u64) << STATE_SHIFT) | ((order as u64) << ORDER_SHIFT))
    }

    /// The packed bits.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) const fn bits(self) -> u64 {
        self.0
    }

    /// Packed bits without the reported mark.
    #[cfg(feature = "testing")]
    pub(crate) const fn without_reported_bits(bits: u64) -> u64 {
        bits & !REPORTED
    }

    /// A tail inside another frame's block.
    pub(crate) const TAIL: Self = Self::new(FrameState::Tail, 0);

    /// A frame that is not usable memory: a hole, deferred, or offline.
    pub(crate) const RESERVED: Self = Self::new(FrameState::Reserved, 0);

    /// The head of a freshly allocated unmovable block: one reference, no flags.
    #[inline]
    pub(crate) const fn allocated(order: u8) -> Self {
        Self(Self::new(FrameState::Allocated, order).0 | 1)
    }

    /// The head of a freshly allocated block of kind `mt`: one reference, no flags.
    #[inline]
    pub(crate) const fn allocated_as(order: u8, mt: MigrateType) -> Self {
        Self::allocated(order).with_mt(mt as u8)
    }

    /// An allocated order-0 page with no reference count (`alloc_frozen_page`,
    /// `alloc_contig_frozen_range`).
    pub(crate) const FROZEN_PAGE: Self = Self::frozen_block(0);

    /// The head of an unmovable block of `order` handed out with no reference count
    /// (`alloc_frozen_pages`): its caller owns it whole.
    #[inline]
    pub(crate) const fn frozen_block(order: u8) -> Self {
        Self(Self::new(FrameState::Allocated, order).0 | FROZEN)
    }

    /// The head of a frozen block of `order` that its owner keeps in a cache of its own
    /// ([`FrameState::Cached`]).
    #[inline]
    pub(crate) const fn cached_block(order: u8) -> Self {
        Self::new(FrameState::Cached, order)
    }

    /// Whether this is the head of a frozen unmovable block of some order
    /// ([`Word::frozen_block`]), not a movable block frozen by a migration.
    #[inline]
    pub(crate) const fn is_frozen_block(self) -> bool {
        self.0 == Self::frozen_block(self.order()).0
    }

    /// The list index (0..=4: [`MigrateType`]'s, CMA, isolated) of a free head, or the kind
    /// of an allocated one.
    #[inline]
    pub(crate) const fn mt(self) -> u8 {
        ((self.0 & MT) >> MT_SHIFT) as u8
    }

    /// The same word with list index or kind `mt` (0..=4).
    #[inline]
    pub(crate) const fn with_mt(self, mt: u8) -> Self {
        Self((self.0 & !MT) | (((mt & 7) as u64) << MT_SHIFT))
    }

    /// An allocated head without a reference count: frozen by `alloc_frozen_pages` or
    /// `alloc_contig_frozen_range`, or by a migration in progress.
    #[inline]
    pub(crate) const fn frozen(self) -> bool {
        self.0 & FROZEN != 0
    }

    /// The same allocated head frozen: no references, nobody but the freezer may change it.
    #[inline]
    pub(crate) const fn freeze(self) -> Self {
        Self((self.0 & !REFCOUNT) | FROZEN)
    }

    #[inline]
    pub(crate) const fn state(self) -> FrameState {
        // Only this module builds words, always from a FrameState.
        match (self.0 >> STATE_SHIFT) & 0xf {
            0 => FrameState::Reserved,
            1 => FrameState::Tail,
            2 => FrameState::Buddy,
            3 => FrameState::Pcp,
            4 => FrameState::Allocated,
            5 => FrameState::Leaked,
            6 => FrameState::Freeing,
            7 => FrameState::Zeroing,
            8 => FrameState::Reporting,
            _ => FrameState::Cached,
        }
    }

    #[inline]
    pub(crate) const fn order(self) -> u8 {
        (self.0 >> ORDER_SHIFT) as u8
    }

    #[inline]
    pub(crate) const fn refcount(self) -> u32 {
        (self.0 & REFCOUNT) as u32
    }

    #[inline]
    pub(crate) const fn poisoned(self) -> bool {
        self.0 & POISONED != 0
    }

    #[inline]
    pub(crate) const fn vmalloc(self) -> bool {
        self.0 & VMALLOC != 0
    }

    /// A free block known to read zero in every byte.
    #[inline]
    pub(crate) const fn zeroed(self) -> bool {
        self.0 & ZEROED != 0
    }

    /// The head of a free block of `order` in `state` (`Buddy` or `Pcp`), known zero or not,
    /// on the lists of index `list` (0..=3).
    #[inline]
    pub(crate) const fn free(state: FrameState, order: u8, zeroed: bool, list: u8) -> Self {
        let w = Self::new(state, order).with_mt(list);
        if zeroed { Self(w.0 | ZEROED) } else { w }
    }

    /// A free buddy head reported to the embedder's sink and not taken since.
    #[inline]
    pub(crate) const fn reported(self) -> bool {
        self.0 & REPORTED != 0
    }

    /// The same free buddy head marked reported.
    #[inline]
    pub(crate) const fn with_reported(self) -> Self {
        Self(self.0 | REPORTED)
    }

    /// The word without its "known zero" and "reported" marks: what merging compares.
    #[inline]
    pub(crate) const fn ignoring_zeroed(self) -> Self {
        Self(self.0 & !(ZEROED | REPORTED))
    }

    /// The word without its "reported" mark.
    #[inline]
    pub(crate) const fn ignoring_reported(self) -> Self {
        Self(self.0 & !REPORTED)
    }

    /// Of a per-cpu list head: the stamp its CPU gave it when it freed the block there
    /// ([`PcpLists::push_freed`](crate::zone::pcp::PcpLists::push_freed)), 0 for a block
    /// the list took from the buddy.
    #[inline]
    pub(crate) const fn freed_at(self) -> u16 {
        ((self.0 & FREED) >> FREED_SHIFT) as u16
    }

    /// The same per-cpu list head stamped `at` (12 bits).
    #[inline]
    pub(crate) const fn with_freed_at(self, at: u16) -> Self {
        Self((self.0 & !FREED) | (((at as u64) << FREED_SHIFT) & FREED))
    }

    /// The word without its migratetype.
    #[inline]
    pub(crate) const fn ignoring_mt(self) -> Self {
        Self(self.0 & !MT)
    }

    /// An allocated head with at least one reference: the only words anyone but their owner
    /// may change (by compare-and-swap).
    #[inline]
    pub(crate) const fn is_live(self) -> bool {
        self.0 & STATE == (FrameState::Allocated as u64) << STATE_SHIFT && self.0 & REFCOUNT != 0
    }

    /// Taken by a free in progress.
    #[inline]
    pub(crate) const fn is_freeing(self) -> bool {
        self.0 & STATE == (FrameState::Freeing as u64) << STATE_SHIFT
    }

    #[inline]
    pub(crate) const fn with_refcount(self, refcount: u32) -> Self {
        Self((self.0 & !REFCOUNT) | refcount as u64)
    }

    #[inline]
    pub(crate) const fn with_order(self, order: u8) -> Self {
        Self((self.0 & !(0xff << ORDER_SHIFT)) | ((order as u64) << ORDER_SHIFT))
    }

    #[inline]
    pub(crate) const fn with_state(self, state: FrameState) -> Self {
        Self((self.0 & !STATE) | ((state as u64) << STATE_SHIFT))
    }

    #[inline]
    pub(crate) const fn with_poison(self) -> Self {
        Self(self.0 | POISONED)
    }

    #[inline]
    pub(crate) const fn with_vmalloc(self, on: bool) -> Self {
        if on {
            Self(self.0 | VMALLOC)
        } else {
            Self(self.0 & !VMALLOC)
        }
    }

    /// One reference fewer; at the last one, `Freeing`.
    #[inline]
    pub(crate) const fn without_a_reference(self) -> Self {
        match self.refcount() {
            1 => self.freeing(),
            n => self.with_refcount(n - 1),
        }
    }

    /// The last reference dropped: the frame now belongs to the call that dropped it.
    #[inline]
    pub(crate) const fn freeing(self) -> Self {
        self.with_state(FrameState::Freeing).with_refcount(0)
    }
}

/// One frame's metadata: the kernel's `struct page`, reduced to what a buddy allocator needs.
/// Callers provide a slice of these, one per frame the zone spans.
///
/// A `Frame` is made of integer atomics only, so any initialized memory of the right size and
/// alignment (zeroed boot memory, a `static` array) is a valid `[Frame]`; the zone
/// overwrites it when it starts.
///
/// Laid out as C lays it out, 24 bytes with no padding (every field an atomic), so that
/// initializing a range of frames can write whole cache lines with streaming stores.
#[repr(C)]
pub struct Frame {
    word: AtomicU64,
    /// List links, stored as index + 1 (0: none), so that an all-zero frame is empty. An
    /// allocated head is on no list: its links hold the 64-bit key of a movable allocation
    /// ([`Zone::alloc_movable`](crate::Zone::alloc_movable)).
    prev: AtomicU32,
    next: AtomicU32,
    /// In one frame of each pageblock, three before its last
    /// (`FrameMap::pageblock_bits_index` says which and why): the pageblock's
    /// [`MigrateType`] index (bits 0..2) and whether it is isolated (bit 2). Written under
    /// the zone lock only. 64 bits wide (the upper 32 are always zero) so that the frame
    /// has no padding.
    pageblock: AtomicU64,
}

#[cfg(not(loom))]
const _: () = assert!(size_of::<Frame>() == 24);

/// Where in a frame its word and its pageblock bits lie, in bytes (for tests of which cache
/// lines the bits share).
#[cfg(test)]
pub(crate) const WORD_AND_PAGEBLOCK_AT: (usize, usize) = (
    core::mem::offset_of!(Frame, word),
    core::mem::offset_of!(Frame, pageblock),
);

/// Writes a range's frames as tails inside the blocks being initialized over them: what
/// initializing free memory writes over every frame after a block's head. For frames that
/// only the caller writes (off every list, inside blocks it is initializing).
///
/// On x86_64, with streaming stores (`movnti`): they write whole cache lines without reading
/// them first, where a store to each frame's word reads every line of the metadata and
/// writes it back, twice the memory traffic (deferred initialization writes gigabytes of
/// metadata that no CPU needs in its cache yet). Streaming stores are weakly ordered: the
/// writer fences them when dropped, before the caller's next lock release publishes the
/// frames. Elsewhere, and under Miri and loom, atomic stores.
pub(crate) struct TailStores(());

impl TailStores {
    /// A writer; nothing written yet.
    pub(crate) const fn new() -> Self {
        Self(())
    }

    /// `frame` as a tail with no links and no pageblock bits (a frame that does not hold
    /// its pageblock's bits: every other frame's are zero already).
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn whole(&mut self, frame: &Frame) {
        self.keeping_pageblock(frame);
        #[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
        // SAFETY: as in `keeping_pageblock`, for `pageblock` (bytes 16..24), zero already:
        // the store of zero completes the frame's cache lines for the streaming stores.
        unsafe {
            core::arch::asm!(
                "movnti qword ptr [{at} + 16], {zero}",
                at = in(reg) core::ptr::from_ref(frame).cast_mut().cast::<u64>(),
                zero = in(reg) 0u64,
                options(nostack, preserves_flags),
            );
        }
    }

    /// `frame` as a tail with no links, its pageblock bits kept (the frame that holds them).
    #[inline]
    #[allow(unsafe_code)]
    pub(crate) fn keeping_pageblock(&mut self, frame: &Frame) {
        #[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
        // SAFETY: `at` points at the frame's 24 bytes, 8-aligned (a `Frame` is `repr(C)`,
        // an `AtomicU64` first), every byte inside an atomic (no padding): `word` at 0,
        // the links at 8 and 12, `pageblock` at 16. Each `movnti` is an aligned 8-byte
        // store, single-copy atomic on x86_64, so the block does what relaxed atomic stores
        // of the same values would (two 4-byte ones for the links): a CPU that reads the
        // word meanwhile (to name an error) sees the old value or `TAIL`. The fence in
        // `drop` orders the stores before anything the caller does after it.
        unsafe {
            core::arch::asm!(
                "movnti qword ptr [{at}], {tail}",
                "movnti qword ptr [{at} + 8], {zero}",
                at = in(reg) core::ptr::from_ref(frame).cast_mut().cast::<u64>(),
                tail = in(reg) Word::TAIL.0,
                zero = in(reg) 0u64,
                options(nostack, preserves_flags),
            );
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri), not(loom))))]
        {
            frame.set_prev_raw(0);
            frame.set_next_raw(0);
            frame.store(Word::TAIL);
        }
    }
}

impl Drop for TailStores {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        #[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
        // SAFETY: a store fence reads and writes no memory.
        unsafe {
            core::arch::asm!("sfence", options(nostack, preserves_flags));
        }
    }
}

impl Frame {
    /// Metadata before the zone initializes it (all zero: a reserved frame). `const`, so a
    /// kernel can keep the metadata in a `static`: `[const { Frame::new() }; N]`.
    #[cfg(not(loom))]
    #[must_use]
    #[inline]
    pub const fn new() -> Self {
        Self {
            word: AtomicU64::new(0),
            prev: AtomicU32::new(0),
            next: AtomicU32::new(0),
            pageblock: AtomicU64::new(0),
        }
    }

    /// Metadata before the zone initializes it (all zero: a reserved frame).
    #[cfg(loom)]
    #[must_use]
    #[inline]
    pub fn new() -> Self {
        Self {
            word: AtomicU64::new(0),
            prev: AtomicU32::new(0),
            next: AtomicU32::new(0),
            pageblock: AtomicU64::new(0),
        }
    }

    /// What the frame is, its order, references and flags, read at one instant.
    #[must_use]
    #[inline]
    pub fn info(&self) -> FrameInfo {
        let w = self.load();
        FrameInfo {
            state: w.state(),
            order: w.order(),
            refcount: w.refcount(),
            poisoned: w.poisoned(),
            vmalloc: w.vmalloc(),
            zeroed: w.zeroed(),
            frozen: w.frozen(),
            migratetype: MigrateType::from_index(w.mt()),
        }
    }

    #[inline]
    pub(crate) fn load(&self) -> Word {
        Word(self.word.load(Ordering::Acquire))
    }

    /// For the frame's owner only (see the module docs).
    #[inline]
    pub(crate) fn store(&self, w: Word) {
        self.word.store(w.0, Ordering::Release);
    }

    /// Replaces `old` by `new` if the word still is `old`; else returns what it is.
    #[inline]
    pub(crate) fn cas(&self, old: Word, new: Word) -> Result<(), Word> {
        self.word
            .compare_exchange(old.0, new.0, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
            .map_err(Word)
    }

    #[inline]
    pub(crate) fn prev(&self) -> Option<FrameIdx> {
        self.prev_raw().checked_sub(1).map(FrameIdx)
    }

    #[inline]
    pub(crate) fn next(&self) -> Option<FrameIdx> {
        self.next_raw().checked_sub(1).map(FrameIdx)
    }

    /// Links as stored (index + 1, 0 for none). Link writes happen under the lock of the list
    /// the frame is on.
    #[inline]
    pub(crate) fn prev_raw(&self) -> u32 {
        self.prev.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn next_raw(&self) -> u32 {
        self.next.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn set_prev_raw(&self, link: u32) {
        self.prev.store(link, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn set_next_raw(&self, link: u32) {
        self.next.store(link, Ordering::Relaxed);
    }

    /// Back to all zero.
    #[inline]
    pub(crate) fn reset(&self) {
        self.store(Word(0));
        self.set_prev_raw(0);
        self.set_next_raw(0);
        self.pageblock.store(0, Ordering::Relaxed);
    }

    /// The key of a movable allocation this frame heads (set before its word is stored).
    #[inline]
    pub(crate) fn key(&self) -> u64 {
        (u64::from(self.prev_raw()) << 32) | u64::from(self.next_raw())
    }

    /// Stores the key of the allocation this frame heads; the caller owns the frame, off
    /// every list.
    #[inline]
    pub(crate) fn set_key(&self, key: u64) {
        self.set_prev_raw((key >> 32) as u32);
        self.set_next_raw(key as u32);
    }

    /// The pageblock bits (in the frame that holds a pageblock's).
    #[inline]
    pub(crate) fn pageblock_bits(&self) -> u32 {
        self.pageblock.load(Ordering::Relaxed) as u32
    }

    /// Sets the pageblock bits; under the zone lock.
    #[inline]
    pub(crate) fn set_pageblock_bits(&self, bits: u32) {
        self.pageblock.store(u64::from(bits), Ordering::Relaxed);
    }
}

impl Default for Frame {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Frame {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.info().fmt(f)
    }
}

/// A frame's metadata read at one instant ([`Frame::info`], [`Zone::frame`](crate::Zone::frame)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameInfo {
    /// What the frame is.
    pub state: FrameState,
    /// The order of the block this frame heads (0 for a tail or a reserved frame).
    pub order: u8,
    /// References to an allocated block's head (0 otherwise).
    pub refcount: u32,
    /// Marked hardware-poisoned: freeing it leaks it.
    pub poisoned: bool,
    /// An order-0 page that [`Zone::vmalloc`](crate::Zone::vmalloc) handed out and no
    /// [`Zone::vfree`](crate::Zone::vfree) has released since.
    pub vmalloc: bool,
    /// A free block known to read zero in every byte: cleared by the zone (at background
    /// zeroing) and not handed out since, or declared zero by the embedder
    /// ([`Zone::add_zeroed_memory`](crate::Zone::add_zeroed_memory)).
    pub zeroed: bool,
    /// An allocated head without a reference count: a page of
    /// [`Zone::alloc_contig_frozen_range`](crate::Zone::alloc_contig_frozen_range), or a
    /// movable block compaction is migrating at that instant.
    pub frozen: bool,
    /// Of an allocated head, the kind of allocation; of a free head, the free lists it is on
    /// (`None`: the isolated lists of a pageblock being isolated, or a CMA reservation's
    /// lists); else unspecified.
    pub migratetype: Option<MigrateType>,
}
