//! `AxPagingHandler` under `page_table_multiarch`: real page tables of this architecture
//! built in zone frames backed by memory (mapped, queried, unmapped, dropped: every table
//! frame back in the zone), and the handler's own calls (alignment, bad frees reported).
#![cfg(all(not(loom), any(target_arch = "x86_64", target_arch = "aarch64")))]

mod common;
use common::TestZone;

use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, OnceLock};

use buddy_sim::{
    AxPagingHandler, AxPagingZone, BuddyError, DefaultRawMutex, PerCpu, Pfn, ZoneConfig,
};
use memory_addr::{PhysAddr, VirtAddr};
use page_table_multiarch::{MappingFlags, PageSize, PagingHandler};

#[cfg(target_arch = "aarch64")]
type PageTable<H> = page_table_multiarch::aarch64::A64PageTable<H>;
#[cfg(target_arch = "x86_64")]
type PageTable<H> = page_table_multiarch::x86_64::X64PageTable<H>;

/// Frames per zone, and the first one (physical 1 MiB).
const FRAMES: usize = 64;
const FIRST: u64 = 0x100;

/// One frame of memory. Atomic words: the tables are written through pointers derived from
/// a shared reference, which an `UnsafeCell` inside permits.
#[repr(C, align(4096))]
struct Page([AtomicU64; 512]);

/// One zone over its own memory per test (`Tables<0>`, `Tables<1>`: tests run in parallel).
struct Tables<const N: usize>;

struct Backing {
    zone: TestZone,
    /// The frames' memory, frame `FIRST` first (kept here: the zone's memory lives as long
    /// as the zone).
    ram: &'static [Page],
    /// What `dealloc_failed` was told.
    failed: Mutex<Vec<(usize, usize, BuddyError)>>,
}

static BACKING: [OnceLock<Backing>; 2] = [OnceLock::new(), OnceLock::new()];

impl<const N: usize> Tables<N> {
    fn backing() -> &'static Backing {
        BACKING[N].get_or_init(|| {
            // Not zero: the tables must clear what they take.
            let ram = (0..FRAMES)
                .map(|_| Page(std::array::from_fn(|_| AtomicU64::new(!0))))
                .collect::<Vec<_>>();
            let cfg = ZoneConfig::new(Pfn(FIRST), FRAMES as u64).with_cpus(2);
            Backing {
                zone: common::zone(cfg).unwrap(),
                ram: Vec::leak(ram),
                failed: Mutex::new(Vec::new()),
            }
        })
    }
}

// SAFETY: only the page tables of these tests use the handler; they hand back the frames it
// allocated for them (and the tests' deliberate bad frees name frames it can tell are wrong).
unsafe impl<const N: usize> AxPagingZone for Tables<N> {
    type Frames = common::FrameVec;
    type PerCpus = Vec<PerCpu>;
    type Lock = DefaultRawMutex;

    fn zone() -> &'static TestZone {
        &Self::backing().zone
    }

    fn cpu() -> usize {
        N
    }

    fn direct_map_offset() -> usize {
        let base = Self::backing().ram.as_ptr().expose_provenance();
        base.wrapping_sub(FIRST as usize * 4096)
    }

    fn dealloc_failed(paddr: PhysAddr, frames: usize, error: BuddyError) {
        let failed = &Self::backing().failed;
        failed
            .lock()
            .unwrap()
            .push((paddr.as_usize(), frames, error));
    }
}

#[test]
fn page_tables_live_in_zone_frames_and_go_back() {
    type T = Tables<0>;
    let zone = T::zone();
    let mut table = PageTable::<AxPagingHandler<T>>::try_new().unwrap();
    let root = table.root_paddr().as_usize();
    assert!((FIRST as usize * 4096..(FIRST as usize + FRAMES) * 4096).contains(&root));
    // A leaf table's worth of 4 KiB pages (16 under Miri, where each map is slow) and one
    // 2 MiB page elsewhere: a few tables.
    let pages = if cfg!(miri) { 16 } else { 512 };
    let small = VirtAddr::from_usize(0x4000_0000);
    let huge = VirtAddr::from_usize(0x8000_0000);
    let flags = MappingFlags::READ | MappingFlags::WRITE;
    {
        let mut c = table.cursor();
        c.map_region(
            small,
            |va| PhysAddr::from_usize(va.as_usize() - 0x3000_0000),
            pages * 4096,
            flags,
            false,
        )
        .unwrap();
        c.map(
            huge,
            PhysAddr::from_usize(0x20_0000),
            PageSize::Size2M,
            flags,
        )
        .unwrap();
    }
    let tables = 64 - zone.free_pages_total();
    // The root, one table per level down to the 4 KiB leaves, and one more level-2 table
    // for the huge page (sharing the top-level table where the format allows).
    assert!((4..=6).contains(&tables), "{tables} table frames");
    for i in [0, 1, pages - 1] {
        let va = VirtAddr::from_usize(small.as_usize() + i * 4096);
        let (pa, _, size) = table.query(va).unwrap();
        assert_eq!(
            (pa.as_usize(), size),
            (0x1000_0000 + i * 4096, PageSize::Size4K)
        );
    }
    assert_eq!(table.query(huge).unwrap().2, PageSize::Size2M);
    table.cursor().unmap_region(small, pages * 4096).unwrap();
    assert!(table.query(small).is_err());
    zone.check().unwrap();
    drop(table);
    zone.drain_all();
    assert_eq!(zone.free_pages_total(), FRAMES as u64);
    assert!(T::backing().failed.lock().unwrap().is_empty());
    zone.check().unwrap();
}

#[test]
fn handler_allocates_aligned_runs_and_reports_bad_frees() {
    type T = Tables<1>;
    type H = AxPagingHandler<T>;
    let zone = T::zone();
    let one = H::alloc_frame().unwrap();
    let run = H::alloc_frames(3, 16 << 10).unwrap();
    assert_eq!(run.as_usize() % (16 << 10), 0);
    // Exactly three frames held, the rest of the 16 KiB block given back.
    assert_eq!(zone.free_pages_total(), FRAMES as u64 - 1 - 3);
    // Not a power of two; larger than the zone's largest block.
    assert_eq!(H::alloc_frames(1, 3 << 12), None);
    assert_eq!(H::alloc_frames(1, 1 << 40), None);
    // phys_to_virt reaches the frame's memory.
    let va = H::phys_to_virt(run).as_usize();
    let base = T::backing().ram.as_ptr().expose_provenance();
    assert_eq!(va - base, run.as_usize() - FIRST as usize * 4096);
    H::dealloc_frames(run, 3);
    H::dealloc_frame(one);
    assert!(T::backing().failed.lock().unwrap().is_empty());
    // Twice, and an address that is no frame: reported, nothing freed.
    H::dealloc_frame(one);
    H::dealloc_frame(PhysAddr::from_usize(0x1234));
    let failed = T::backing().failed.lock().unwrap().clone();
    assert!(matches!(
        failed.as_slice(),
        [
            (a, 1, BuddyError::DoubleFree(_)),
            (0x1234, 1, BuddyError::NotAFrame { addr: 0x1234 }),
        ] if *a == one.as_usize()
    ));
    zone.drain_all();
    assert_eq!(zone.free_pages_total(), FRAMES as u64);
    zone.check().unwrap();
}
