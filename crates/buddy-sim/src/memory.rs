//! How the zone reaches its frames' bytes: the embedder's [`FrameMemory`] (an identity map,
//! a direct map at an offset, a VMM's guest-memory mapping) and the [`FrameClearer`] that
//! clears and checks blocks through it with zero-core.
//!
//! buddy-sim knows frames by number only. The one place it touches their memory is here:
//! a block the zone owns at that moment (just taken off a free list for a caller, or taken
//! by background zeroing), turned into a pointer by the embedder's promise and written by
//! zero-core.
// The two unsafe blocks below are the crate's only memory accesses; each relies on the
// `FrameMemory` contract and on the zone owning the block.
#![allow(unsafe_code)]

use crate::contents::Contents;
use crate::decompose::decompose;
use crate::error::alloc::AllocError;
use crate::error::config::ConfigError;
use crate::types::{MAX_SUPPORTED_ORDER, Order};
use core::ptr::NonNull;
use mm_types::Pfn;
use mm_types::{PageSize, PhysAddr};
use zero_core::{ClearConfig, Clearer, Resched, Temperature};

/// The size of the zone's frames (buddy-sim's frame numbers count 4 KiB frames).
pub(crate) const FRAME: PageSize = PageSize::Size4KiB;

/// One frame of zeros, to compare memory with (`memcmp`, not a loop over bytes).
pub(crate) const ZERO_FRAME: [u8; 4096] = [0; 4096];

/// How the embedder reaches the bytes of the zone's frames.
///
/// # Safety
/// For every frame `pfn` of the zones it is used with, [`frame_ptr`](Self::frame_ptr) returns
/// either `None` or a pointer aligned to 4 KiB such that:
/// - the naturally aligned blocks that start at `pfn` and that the zone can hand out (up to
///   its MAX_ORDER) are mapped contiguously from that pointer: frame `pfn + i` at
///   `frame_ptr(pfn) + i * 4 KiB`, valid for reads and writes of the whole block;
/// - nothing but the block's owner accesses those bytes: whoever the zone handed the block
///   to, or the zone itself while the block is free (it clears and reads free blocks);
/// - distinct frames are at distinct, non-overlapping pages.
///
/// [`pfn_at`](Self::pfn_at) is its inverse.
pub unsafe trait FrameMemory {
    /// Where frame `pfn` is mapped, or `None` where the embedder cannot reach it.
    fn frame_ptr(&self, pfn: Pfn) -> Option<NonNull<u8>>;
    /// The frame mapped at `ptr`, if `ptr` is where [`frame_ptr`](Self::frame_ptr) maps one.
    fn pfn_at(&self, ptr: NonNull<u8>) -> Option<Pfn>;
}

/// The memory of a request that clears nothing: it reaches no frame. (An
/// [`AllocRequest`](crate::AllocRequest)'s clearer type until
/// [`zeroed`](crate::AllocRequest::zeroed) names one; no value of it exists.)
#[derive(Clone, Copy, Debug)]
pub enum NoMemory {}

// SAFETY: no value exists, so neither method can be called.
unsafe impl FrameMemory for NoMemory {
    fn frame_ptr(&self, _: Pfn) -> Option<NonNull<u8>> {
        match *self {}
    }

    fn pfn_at(&self, _: NonNull<u8>) -> Option<Pfn> {
        match *self {}
    }
}

/// Frames mapped at their physical address plus a fixed offset (wrapping): an identity map
/// (offset 0), a kernel's direct map, or a buffer that models physical memory.
#[derive(Clone, Copy, Debug)]
pub struct OffsetMap {
    offset: usize,
}

impl OffsetMap {
    /// Frame `pfn` at virtual address `pfn * 4 KiB + offset`.
    ///
    /// # Safety
    /// Every frame of the zones this map is used with is mapped there, readable and writable,
    /// and nothing but the frame's owner (or the zone, while it is free) accesses it: the
    /// [`FrameMemory`] contract.
    #[must_use]
    pub const unsafe fn new(offset: usize) -> Self {
        Self { offset }
    }

    /// The map that reaches frame `first` at `at`, and frame `first + i` at
    /// `at + i * 4 KiB`: the offset from one frame's address, as a kernel knows its direct
    /// map or a buffer that models memory from `first` on. `at`'s provenance is exposed
    /// (frames are reached through it).
    ///
    /// # Errors
    /// [`ConfigError::DirectMapOffset`] (with `at`'s address) if `at` is not aligned to
    /// 4 KiB or frame `first`'s physical address does not fit a `usize`.
    ///
    /// # Safety
    /// As [`OffsetMap::new`]: every frame of the zones this map is used with is mapped
    /// there, readable and writable, and nothing but the frame's owner (or the zone, while it
    /// is free) accesses it.
    pub unsafe fn with_frame_at(first: Pfn, at: *mut u8) -> Result<Self, ConfigError> {
        let addr = at.expose_provenance();
        let pa = first.start_address(FRAME).and_then(PhysAddr::as_usize);
        match pa {
            Some(pa) if addr.is_multiple_of(FRAME.bytes()) => Ok(Self {
                offset: addr.wrapping_sub(pa),
            }),
            _ => Err(ConfigError::DirectMapOffset(addr)),
        }
    }
}

// SAFETY: `new`'s caller promised the mapping; the arithmetic below is that mapping (linear,
// so blocks are contiguous) and its inverse, and 4 KiB-aligned frames stay 4 KiB-aligned
// under an offset the caller chose (a misaligned offset yields misaligned pointers, which
// `frame_ptr` refuses).
unsafe impl FrameMemory for OffsetMap {
    fn frame_ptr(&self, pfn: Pfn) -> Option<NonNull<u8>> {
        let pa = pfn.start_address(FRAME)?.as_usize()?;
        let va = pa.wrapping_add(self.offset);
        if va % FRAME.bytes() != 0 {
            return None;
        }
        // The mapping's memory is exposed (a kernel's direct map; a buffer the embedder cast
        // to an address), so the pointer takes its provenance from there.
        NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(va))
    }

    fn pfn_at(&self, ptr: NonNull<u8>) -> Option<Pfn> {
        let pa = ptr.as_ptr().addr().wrapping_sub(self.offset);
        Some(Pfn::containing(PhysAddr(u64::try_from(pa).ok()?), FRAME))
    }
}

/// What a zone needs to hand out zeroed frames and to zero free ones in the background
/// ([`Zone::alloc_zeroed`](crate::Zone::alloc_zeroed),
/// [`Zone::zero_some`](crate::Zone::zero_some)): the embedder's [`FrameMemory`] and
/// zero-core's [`ClearConfig`] (strategy policy, preemption model, batch size, folio order).
///
/// With [`verifying`](Self::verifying), every block handed out as known zero is read first
/// (a debug mode: it costs a read of the block).
#[derive(Clone, Copy, Debug)]
pub struct FrameClearer<M> {
    memory: M,
    clear: Clearer,
    verify: bool,
}

impl FrameClearer<OffsetMap> {
    /// Clears through a direct map, the common case in one call: frame `first` at `at`,
    /// frame `first + i` at `at + i * 4 KiB` ([`OffsetMap::with_frame_at`]), with
    /// zero-core's detected policy ([`FrameClearer::detected`]). A kernel whose direct map
    /// starts at `PHYS_OFFSET` passes `Pfn(0)` and `PHYS_OFFSET as *mut u8`; one with an
    /// identity map `Pfn(0)` and a null pointer.
    ///
    /// ```
    /// use buddy_sim::{AllocRequest, FrameClearer, Pfn, StaticZone};
    /// const START: Pfn = Pfn(0x8_0000);
    /// #[repr(C, align(4096))]
    /// struct Page([u8; 4096]);
    /// static ZONE: StaticZone<16, 1> = StaticZone::new_static_at(START);
    /// let mut ram: Vec<Page> = (0..16).map(|_| Page([0xa5; 4096])).collect();
    /// // SAFETY: frame `START + i` is `ram[i]`, which nothing else uses while the zone runs.
    /// let clearer = unsafe { FrameClearer::direct_map(START, ram.as_mut_ptr().cast()) }?;
    /// let cpu = ZONE.cpu(0)?.with_clearer(&clearer);
    /// let page = cpu.alloc(AllocRequest::page().zeroed())?;
    /// let i = (page.pfn().0 - START.0) as usize;
    /// assert!(ram[i].0.iter().all(|&b| b == 0));
    /// # drop(page);
    /// # Ok::<(), buddy_sim::BuddyError>(())
    /// ```
    ///
    /// # Errors
    /// As [`OffsetMap::with_frame_at`].
    ///
    /// # Safety
    /// As [`OffsetMap::new`]: every frame of the zones the clearer is used with is mapped
    /// there, readable and writable, and nothing but the frame's owner (or the zone, while it
    /// is free) accesses it.
    pub unsafe fn direct_map(first: Pfn, at: *mut u8) -> Result<Self, ConfigError> {
        // SAFETY: the caller's promise, passed on.
        let memory = unsafe { OffsetMap::with_frame_at(first, at) }?;
        Ok(Self::detected(memory))
    }
}

impl<M: FrameMemory> FrameClearer<M> {
    /// Clears through `memory` with `clear`.
    ///
    /// # Errors
    /// [`ConfigError::ClearPageSize`] if `clear`'s page size is not 4 KiB (a frame's),
    /// [`ConfigError::ClearStrategy`] if its policy names a strategy this CPU cannot execute.
    pub fn new(memory: M, clear: ClearConfig) -> Result<Self, ConfigError> {
        if clear.page_size != FRAME {
            return Err(ConfigError::ClearPageSize);
        }
        let Ok(clear) = clear.validate() else {
            return Err(ConfigError::ClearStrategy);
        };
        Ok(Self {
            memory,
            clear,
            verify: false,
        })
    }

    /// Clears through `memory` with zero-core's detected policy, whole blocks at a time (no
    /// cooperative batches: [`PreemptModel::None`](zero_core::PreemptModel::None)).
    #[must_use]
    pub fn detected(memory: M) -> Self {
        Self {
            memory,
            clear: Clearer::detected(FRAME, zero_core::PreemptModel::None),
            verify: false,
        }
    }

    /// The same clearer, checking that every block handed out as known zero reads zero
    /// (else the allocation fails with [`AllocError::StaleZero`]).
    #[must_use]
    pub fn verifying(self) -> Self {
        Self {
            verify: true,
            ..self
        }
    }

    /// Whether blocks known zero are checked when handed out.
    #[must_use]
    pub const fn verifies(&self) -> bool {
        self.verify
    }

    /// The memory map the frames are reached through.
    #[must_use]
    pub const fn memory(&self) -> &M {
        &self.memory
    }

    /// How blocks are cleared (its configuration: [`Clearer::config`]).
    #[must_use]
    pub const fn clearer(&self) -> &Clearer {
        &self.clear
    }

    /// The block `[pfn, pfn + 2^order)`'s first byte, or why it cannot be reached.
    fn block_ptr(&self, pfn: Pfn, order: Order) -> Result<(NonNull<u8>, usize), AllocError> {
        let ptr = self
            .memory
            .frame_ptr(pfn)
            .ok_or(AllocError::NotAddressable(pfn))?;
        let pages = usize::try_from(order.pages()).map_err(|_| AllocError::NotAddressable(pfn))?;
        Ok((ptr, pages))
    }

    /// Makes the frames `[pfn, pfn + nr)` the zone just handed out read zero, off the fast
    /// path: checks them if they are known zero (the debug check), else clears them
    /// ([`FrameClearer::clear_run`]; for a block, the block itself with `fault`'s
    /// neighbourhood last), at the temperature `contents` gives where this clearer's is
    /// unknown ([`FrameClearer::clearer_for`]).
    #[cold]
    #[inline(never)]
    pub(crate) fn make_zero(
        &self,
        pfn: Pfn,
        nr: u64,
        contents: Contents,
        fault: Option<usize>,
        resched: &mut impl Resched,
    ) -> Result<(), AllocError> {
        if !contents.known_zero() {
            let clearer = self.clearer_for(contents, nr);
            return self.clear_run_with(&clearer, pfn, nr, fault, resched);
        }
        // The run is the zone's: `pfn + nr` does not overflow.
        for (start, order) in decompose(pfn, nr, Order(MAX_SUPPORTED_ORDER))
            .into_iter()
            .flatten()
        {
            if !self.reads_zero(start, order)? {
                return Err(AllocError::StaleZero(pfn));
            }
        }
        Ok(())
    }

    /// How to clear `nr` frames whose contents are `contents`: with this clearer; or, where
    /// its memory's temperature is not known ([`Temperature::Unknown`]) and the zone has
    /// evidence (this CPU freed the block), told the temperature: hot if it is the last
    /// block of its size this CPU freed and fits under the policy's streaming threshold
    /// (the cache that threshold stands for), else cold ([`Contents::in_cache`]).
    fn clearer_for(&self, contents: Contents, nr: u64) -> Clearer {
        let cfg = self.clear.config();
        if cfg.memory != Temperature::Unknown {
            return self.clear;
        }
        let cache = u64::try_from(cfg.policy.streaming_threshold()).unwrap_or(u64::MAX);
        match contents.in_cache(nr, cache / FRAME.bytes() as u64) {
            Some(true) => self.clear.with_memory(Temperature::Hot),
            Some(false) => self.clear.with_memory(Temperature::Cold),
            None => self.clear,
        }
    }

    /// Zeroes the free block `[pfn, pfn + 2^order)`, which the zone took off its lists for
    /// background zeroing, as memory out of the caches that nobody touches soon
    /// ([`Temperature::Cold`]): streamed from the policy's cold threshold, so that the
    /// background work neither reads it in nor evicts the working set.
    pub(crate) fn clear_in_background(
        &self,
        pfn: Pfn,
        order: Order,
        resched: &mut impl Resched,
    ) -> Result<(), AllocError> {
        let cold = self.clear.with_memory(Temperature::Cold);
        self.clear_with(&cold, pfn, order, None, resched)
    }

    /// Zeroes the block `[pfn, pfn + 2^order)`, which the zone owns or just handed to the
    /// caller, with `clearer`: as one extent in zero-core's batches, or with the bytes around
    /// `fault` (an offset into the block, checked by the caller) cleared last.
    fn clear_with(
        &self,
        clearer: &Clearer,
        pfn: Pfn,
        order: Order,
        fault: Option<usize>,
        resched: &mut impl Resched,
    ) -> Result<(), AllocError> {
        let (ptr, pages) = self.block_ptr(pfn, order)?;
        let ptr = ptr.as_ptr();
        // SAFETY: the zone owns the block (taken off its free list by this call) or handed it
        // to this call, so by the `FrameMemory` contract its `pages` frames from `ptr` are
        // valid for writes and nobody else accesses them until this returns.
        let r = unsafe {
            match fault {
                None => zero_core::clear_contig_pages_raw(ptr, pages, clearer, resched),
                Some(at) => zero_core::folio_zero_user_raw(ptr, pages, at, clearer, resched),
            }
        };
        r.map_err(|error| AllocError::Clear { pfn, error })
    }

    /// Zeroes the run `[pfn, pfn + nr)`, which the zone just handed to the caller, as its
    /// fewest aligned blocks (each mapped contiguously by the `FrameMemory` contract), the
    /// block holding `fault` (a byte offset into the run, checked by the caller) last and
    /// with that neighbourhood last.
    pub(crate) fn clear_run(
        &self,
        pfn: Pfn,
        nr: u64,
        fault: Option<usize>,
        resched: &mut impl Resched,
    ) -> Result<(), AllocError> {
        self.clear_run_with(&self.clear, pfn, nr, fault, resched)
    }

    /// [`FrameClearer::clear_run`] with `clearer`.
    fn clear_run_with(
        &self,
        clearer: &Clearer,
        pfn: Pfn,
        nr: u64,
        fault: Option<usize>,
        resched: &mut impl Resched,
    ) -> Result<(), AllocError> {
        let frame = FRAME.bytes() as u64;
        let fault = fault.and_then(|at| u64::try_from(at).ok());
        // (first frame, order, fault offset inside it) of the block the fault is in.
        let mut last = None;
        // The run is the zone's: `pfn + nr` does not overflow.
        for (start, order) in decompose(pfn, nr, Order(MAX_SUPPORTED_ORDER))
            .into_iter()
            .flatten()
        {
            // Inside the run, whose bytes fit in a u64 (the caller checked the fault).
            let offset = (start.0 - pfn.0) * frame;
            let inside = fault
                .and_then(|at| at.checked_sub(offset))
                .filter(|&at| at < order.pages() * frame);
            match inside {
                Some(at) => last = Some((start, order, at as usize)),
                None => self.clear_with(clearer, start, order, None, resched)?,
            }
        }
        match last {
            Some((start, order, at)) => self.clear_with(clearer, start, order, Some(at), resched),
            None => Ok(()),
        }
    }

    /// Whether every byte of the block `[pfn, pfn + 2^order)`, which the zone owns or just
    /// handed to the caller, reads zero.
    pub(crate) fn reads_zero(&self, pfn: Pfn, order: Order) -> Result<bool, AllocError> {
        let (ptr, pages) = self.block_ptr(pfn, order)?;
        let len = pages
            .checked_mul(FRAME.bytes())
            .ok_or(AllocError::NotAddressable(pfn))?;
        // SAFETY: as in `clear`: the block is the zone's or this call's, readable for its
        // `len` bytes from `ptr` (the `FrameMemory` contract), and nobody writes it meanwhile.
        let bytes = unsafe { core::slice::from_raw_parts(ptr.as_ptr(), len) };
        // A frame at a time against a zero frame: slice comparisons (`memcmp`), not a loop
        // over bytes.
        Ok(bytes
            .chunks(ZERO_FRAME.len())
            .all(|f| f == &ZERO_FRAME[..f.len()]))
    }
}

impl<M: FrameMemory> FrameClearer<M> {
    /// Writes `byte` over every byte of the block `[pfn, pfn + 2^order)`, which the zone
    /// owns (free, or just added) (page poisoning's write on free).
    pub(crate) fn fill(&self, pfn: Pfn, order: Order, byte: u8) -> Result<(), AllocError> {
        let (ptr, pages) = self.block_ptr(pfn, order)?;
        let len = pages
            .checked_mul(FRAME.bytes())
            .ok_or(AllocError::NotAddressable(pfn))?;
        // SAFETY: as in `clear`: the block is the zone's, writable for its `len` bytes from
        // `ptr` (the `FrameMemory` contract), and nobody else accesses it meanwhile.
        unsafe { ptr.as_ptr().write_bytes(byte, len) };
        Ok(())
    }

    /// The offset of the first byte of the block `[pfn, pfn + 2^order)`, which the zone
    /// just took for a caller, that does not read `byte`, and what it reads (page
    /// poisoning's check on allocation).
    pub(crate) fn first_difference(
        &self,
        pfn: Pfn,
        order: Order,
        byte: u8,
    ) -> Result<Option<(u64, u8)>, AllocError> {
        let (ptr, pages) = self.block_ptr(pfn, order)?;
        let len = pages
            .checked_mul(FRAME.bytes())
            .ok_or(AllocError::NotAddressable(pfn))?;
        // SAFETY: as in `reads_zero`: the block is this call's, readable for its `len` bytes
        // from `ptr`, and nobody writes it meanwhile.
        let bytes = unsafe { core::slice::from_raw_parts(ptr.as_ptr(), len) };
        let pattern = [byte; 4096];
        // A frame at a time (`memcmp`); the byte found only in the frame that differs.
        for (k, f) in bytes.chunks(pattern.len()).enumerate() {
            if f != &pattern[..f.len()] {
                let at = f.iter().position(|&b| b != byte).unwrap_or(0);
                let found = f.get(at).copied().unwrap_or(byte);
                return Ok(Some(((k * pattern.len() + at) as u64, found)));
            }
        }
        Ok(None)
    }
}

/// What a zeroed allocation needs of a clearer, with the memory type erased: a
/// [`FrameClearer`] of any [`FrameMemory`], whether a request names it
/// ([`AllocRequest::zeroed_with`](crate::AllocRequest::zeroed_with)) or a CPU handle carries
/// it ([`Cpu::with_clearer`](crate::Cpu::with_clearer)).
pub(crate) trait ZeroFrames {
    /// [`FrameClearer::make_zero`].
    fn make_zero(
        &self,
        pfn: Pfn,
        nr: u64,
        contents: Contents,
        fault: Option<usize>,
        resched: &mut dyn Resched,
    ) -> Result<(), AllocError>;

    /// [`FrameClearer::clear_run`].
    fn clear_run(
        &self,
        pfn: Pfn,
        nr: u64,
        fault: Option<usize>,
        resched: &mut dyn Resched,
    ) -> Result<(), AllocError>;
}

impl<M: FrameMemory> ZeroFrames for FrameClearer<M> {
    fn make_zero(
        &self,
        pfn: Pfn,
        nr: u64,
        contents: Contents,
        fault: Option<usize>,
        mut resched: &mut dyn Resched,
    ) -> Result<(), AllocError> {
        FrameClearer::make_zero(self, pfn, nr, contents, fault, &mut resched)
    }

    fn clear_run(
        &self,
        pfn: Pfn,
        nr: u64,
        fault: Option<usize>,
        mut resched: &mut dyn Resched,
    ) -> Result<(), AllocError> {
        FrameClearer::clear_run(self, pfn, nr, fault, &mut resched)
    }
}

/// A clearer as a zeroed allocation uses it: the clearer, and whether it checks blocks
/// known zero (read once, where the clearer is named, so that a block known zero is handed
/// out without a call through it).
#[derive(Clone, Copy)]
pub(crate) struct Clearing<'c> {
    pub(crate) clearer: &'c dyn ZeroFrames,
    pub(crate) verify: bool,
}

impl<'c> Clearing<'c> {
    /// Through `clearer`.
    pub(crate) fn of<M: FrameMemory + 'c>(clearer: &'c FrameClearer<M>) -> Self {
        Self {
            clearer,
            verify: clearer.verifies(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_from_one_frames_address_reaches_the_others_and_refuses_what_it_cannot_be() {
        let at = core::ptr::without_provenance_mut::<u8>(0x20_0000);
        // SAFETY: the map is only asked for addresses, never dereferenced.
        let map = unsafe { OffsetMap::with_frame_at(Pfn(0x100), at) }.unwrap();
        let ptr = map.frame_ptr(Pfn(0x102)).unwrap();
        assert_eq!(ptr.as_ptr().addr(), 0x20_2000);
        assert_eq!(map.pfn_at(ptr), Some(Pfn(0x102)));
        // A first frame above the pointer: the offset wraps, frames still land in place.
        // SAFETY: as above.
        let low = unsafe { OffsetMap::with_frame_at(Pfn(0x1000), at) }.unwrap();
        assert_eq!(
            low.frame_ptr(Pfn(0x1001)).unwrap().as_ptr().addr(),
            0x20_1000
        );
        let misaligned = at.wrapping_add(8);
        // SAFETY: as above.
        let bad = unsafe { OffsetMap::with_frame_at(Pfn(0x100), misaligned) };
        assert_eq!(bad.unwrap_err(), ConfigError::DirectMapOffset(0x20_0008));
        // SAFETY: as above.
        let beyond = unsafe { FrameClearer::direct_map(Pfn(u64::MAX), at) };
        assert_eq!(beyond.unwrap_err(), ConfigError::DirectMapOffset(0x20_0000));
    }

    #[test]
    fn the_block_this_cpu_freed_last_is_cleared_hot_and_one_freed_before_others_cold() {
        let at = core::ptr::without_provenance_mut::<u8>(0x20_0000);
        // SAFETY: the map is only asked for addresses, never dereferenced.
        let map = unsafe { OffsetMap::with_frame_at(Pfn(0x100), at) }.unwrap();
        let policy = zero_core::Policy::detect().with_streaming_threshold(4 << 20);
        let config = ClearConfig::new(FRAME, zero_core::PreemptModel::None).with_policy(policy);
        let clearer = FrameClearer::new(map, config).unwrap();
        let told = |contents, nr| clearer.clearer_for(contents, nr).config().memory;
        // 2 MiB freed last: within the 4 MiB the policy streams from. With 2 MiB freed
        // after it: cold, though both would fit. 8 MiB freed last: past the threshold.
        assert_eq!(
            told(Contents::FreedHere { since: 0 }, 512),
            Temperature::Hot
        );
        assert_eq!(
            told(Contents::FreedHere { since: 512 }, 512),
            Temperature::Cold
        );
        assert_eq!(
            told(Contents::FreedHere { since: 0 }, 2048),
            Temperature::Cold
        );
        // No evidence: the clearer's own (unknown).
        assert_eq!(told(Contents::Unknown, 512), Temperature::Unknown);
        // A clearer told its memory's temperature keeps it.
        let cold = FrameClearer::new(map, config.with_memory(Temperature::Cold)).unwrap();
        let c = cold.clearer_for(Contents::FreedHere { since: 0 }, 512);
        assert_eq!(c.config().memory, Temperature::Cold);
    }
}
