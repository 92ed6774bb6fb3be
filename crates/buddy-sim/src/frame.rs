//! Per-frame metadata and the intrusive doubly linked lists that thread through it.

/// "No frame" in a list link.
pub(crate) const NIL: u32 = u32::MAX;

/// What a frame is. Every frame is either the head of exactly one block (free in the buddy,
/// free on a per-cpu list, allocated, or leaked) or a `Tail` inside one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FrameState {
    /// Inside a block whose head is another frame.
    #[default]
    Tail,
    /// Head of a free block on the buddy free list of its order.
    Buddy,
    /// Head of a free block on a per-cpu list.
    Pcp,
    /// Head of an allocated block (an order-0 page after `split_page`).
    Allocated,
    /// An order-0 page that failed the free-time check (hwpoison) and is leaked for good.
    Leaked,
}

/// One frame's metadata: the kernel's `struct page`, reduced to what a buddy allocator needs.
/// Callers provide a slice of these, one per frame of the zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub(crate) state: FrameState,
    pub(crate) order: u8,
    pub(crate) poisoned: bool,
    pub(crate) refcount: u32,
    pub(crate) prev: u32,
    pub(crate) next: u32,
}

impl Frame {
    /// Metadata before the zone initializes it.
    pub const EMPTY: Self = Self {
        state: FrameState::Tail,
        order: 0,
        poisoned: false,
        refcount: 0,
        prev: NIL,
        next: NIL,
    };

    /// What the frame is.
    #[must_use]
    pub const fn state(&self) -> FrameState {
        self.state
    }

    /// The order of the block this frame heads (meaningless for a `Tail`).
    #[must_use]
    pub const fn order(&self) -> u8 {
        self.order
    }

    /// The reference count of an allocated block's head.
    #[must_use]
    pub const fn refcount(&self) -> u32 {
        self.refcount
    }

    /// Whether the frame is marked hardware-poisoned.
    #[must_use]
    pub const fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Makes the frame a tail inside another frame's block.
    pub(crate) fn make_tail(&mut self) {
        self.state = FrameState::Tail;
        self.order = 0;
    }

    pub(crate) fn set_head(&mut self, state: FrameState, order: u8) {
        self.state = state;
        self.order = order;
    }
}

impl Default for Frame {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// An intrusive list of block heads, linked through their frames by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct List {
    pub(crate) head: u32,
    pub(crate) tail: u32,
    pub(crate) len: u32,
}

impl List {
    pub(crate) const EMPTY: Self = Self {
        head: NIL,
        tail: NIL,
        len: 0,
    };

    /// Adds `idx` at the front (most recently freed: handed out first, still cache-hot).
    pub(crate) fn push_front(&mut self, frames: &mut [Frame], idx: u32) {
        frames[idx as usize].prev = NIL;
        frames[idx as usize].next = self.head;
        match self.head {
            NIL => self.tail = idx,
            h => frames[h as usize].prev = idx,
        }
        self.head = idx;
        self.len += 1;
    }

    /// Unlinks `idx`, which must be on this list. O(1).
    pub(crate) fn remove(&mut self, frames: &mut [Frame], idx: u32) {
        let Frame { prev, next, .. } = frames[idx as usize];
        match prev {
            NIL => self.head = next,
            p => frames[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => frames[n as usize].prev = prev,
        }
        frames[idx as usize].prev = NIL;
        frames[idx as usize].next = NIL;
        self.len -= 1;
    }

    pub(crate) fn pop_front(&mut self, frames: &mut [Frame]) -> Option<u32> {
        let idx = self.head;
        (idx != NIL).then(|| {
            self.remove(frames, idx);
            idx
        })
    }

    /// Removes the oldest entry (what a drain returns to the buddy first).
    pub(crate) fn pop_back(&mut self, frames: &mut [Frame]) -> Option<u32> {
        let idx = self.tail;
        (idx != NIL).then(|| {
            self.remove(frames, idx);
            idx
        })
    }
}

/// One CPU's free lists: orders 0..=3 and the pageblock order, as the kernel's per-cpu pages.
/// Callers provide a slice of these, one per CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerCpu {
    pub(crate) lists: [List; PCP_LISTS],
    pub(crate) pages: u64,
}

/// Per-cpu lists per CPU: orders 0, 1, 2, 3 (PAGE_ALLOC_COSTLY_ORDER) and the pageblock order.
pub(crate) const PCP_LISTS: usize = 5;

impl PerCpu {
    /// Empty lists.
    pub const EMPTY: Self = Self {
        lists: [List::EMPTY; PCP_LISTS],
        pages: 0,
    };

    /// Frames held on this CPU's lists.
    #[must_use]
    pub const fn pages(&self) -> u64 {
        self.pages
    }
}

impl Default for PerCpu {
    fn default() -> Self {
        Self::EMPTY
    }
}
