//! `ZoneTables` under aarch64-paging: table pages come from the zone, zeroed, and go back;
//! the failures aarch64-paging's infallible trait leaves room for are reported or refused.

mod common;
use common::TestZone;

use aarch64_paging::Mapping;
use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, PageTable, Translation, VaRange};
use buddy_sim::{BuddyError, OffsetMap, Pfn, ZoneConfig, ZoneTables};
use common::Nowhere;
use core::ptr::NonNull;

const FRAMES: u64 = if cfg!(miri) { 16 } else { 64 };
/// Physical address of the first frame the tests' zones hold.
const BASE_PA: usize = 0x4000_0000;

#[repr(C, align(4096))]
struct Page([u8; 4096]);

/// Zone frames `0x40000..` backed by `ram`, each page filled with 0xA5 first.
fn ram() -> Vec<Page> {
    (0..FRAMES).map(|_| Page([0xA5; 4096])).collect()
}

fn memory(ram: &mut [Page]) -> OffsetMap {
    let offset = (ram.as_mut_ptr() as usize).wrapping_sub(BASE_PA);
    // SAFETY: frame 0x40000 + i is ram[i], used only through the zone's owners in each test.
    unsafe { OffsetMap::new(offset) }
}

fn zone() -> TestZone {
    common::zone(ZoneConfig::new(Pfn((BASE_PA >> 12) as u64), FRAMES)).unwrap()
}

const NORMAL: El1Attributes = El1Attributes::ATTRIBUTE_INDEX_1
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::VALID)
    .union(El1Attributes::ACCESSED);

fn free_frames(z: &TestZone) -> u64 {
    z.buddy_pages() + z.pcp_pages(0).unwrap()
}

#[test]
fn tables_come_from_the_zone_zeroed_and_go_back() {
    let mut ram = ram();
    let mem = memory(&mut ram);
    let z = zone();
    let mut map = Mapping::with_asid_and_va_range(
        ZoneTables::new(&z, 0, mem).unwrap(),
        1,
        1,
        El1And0,
        VaRange::Lower,
    );
    // Pages in two separate GiBs: a root, two level-2 and two level-3 tables.
    for va in [0x8000_0000usize, 0x1_0000_0000] {
        map.map_range(
            &MemoryRegion::new(va, va + 0x2000),
            PhysicalAddress(BASE_PA),
            NORMAL,
            Constraints::NO_BLOCK_MAPPINGS,
        )
        .unwrap();
    }
    assert_eq!(map.translation().tables(), 5);
    assert_eq!(free_frames(&z), FRAMES - 5);
    // Every word of every table page reads zero but the descriptors aarch64-paging wrote: two
    // in the root, one in each level-2 table, two in each level-3 table.
    let nonzero: usize = ram
        .iter()
        .take(FRAMES as usize)
        .filter(|p| p.0[0] != 0xA5)
        .map(|p| p.0.chunks(8).filter(|e| e.iter().any(|&b| b != 0)).count())
        .sum();
    assert_eq!(nonzero, 2 + 2 + 4);
    // Unmapping one GiB's pages and compacting frees its level-2 and level-3 tables.
    map.map_range(
        &MemoryRegion::new(0x1_0000_0000, 0x1_0000_2000),
        PhysicalAddress(0),
        El1Attributes::empty(),
        Constraints::NO_BLOCK_MAPPINGS,
    )
    .unwrap();
    map.compact_subtables();
    assert_eq!(map.translation().tables(), 3);
    assert_eq!(map.translation().last_error(), None);
    drop(map);
    assert_eq!(free_frames(&z), FRAMES);
    z.check().unwrap();
}

#[test]
#[should_panic(expected = "aarch64-paging needs a table page")]
fn an_empty_zone_is_a_panic_with_the_reason() {
    let mut ram = ram();
    let mem = memory(&mut ram);
    let z = zone();
    let all = buddy_sim::Order::new(FRAMES.trailing_zeros() as u8).unwrap();
    z.alloc_pages(0, all).unwrap();
    let _map = Mapping::with_asid_and_va_range(
        ZoneTables::new(&z, 0, mem).unwrap(),
        1,
        1,
        El1And0,
        VaRange::Lower,
    );
}

#[test]
fn an_unreachable_frame_is_given_back_before_the_panic() {
    let z = zone();
    let zone_ref = &z;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut tables = ZoneTables::new(zone_ref, 0, Nowhere).unwrap();
        let _: (NonNull<PageTable<El1Attributes>>, PhysicalAddress) = tables.allocate_table();
    }));
    let msg = r.unwrap_err();
    let msg = msg.downcast_ref::<String>().unwrap();
    assert!(msg.contains("cannot be reached"), "{msg}");
    assert_eq!(free_frames(&z), FRAMES);
    z.check().unwrap();
}

#[test]
fn freeing_a_foreign_table_is_reported_not_done() {
    let mut ram = ram();
    let mem = memory(&mut ram);
    let z = zone();
    let mut tables = ZoneTables::new(&z, 0, mem).unwrap();
    let (table, _): (NonNull<PageTable<El1Attributes>>, _) = tables.allocate_table();
    // A page-table page the zone never handed out (a frame outside it).
    let mut outside = Box::new(PageTable::<El1Attributes>::EMPTY);
    // SAFETY: exercising the error path; the adapter frees nothing for a foreign page.
    unsafe { tables.deallocate_table(NonNull::from(&mut *outside)) };
    assert!(
        matches!(tables.last_error(), Some(BuddyError::OutOfZone(_))),
        "{:?}",
        tables.last_error()
    );
    assert_eq!(tables.tables(), 1);
    // SAFETY: `table` came from this translation and is not in use.
    unsafe { tables.deallocate_table(table) };
    assert_eq!((tables.last_error(), tables.tables()), (None, 0));
    assert_eq!(free_frames(&z), FRAMES);
}

#[test]
fn bad_cpus_and_configs_are_errors() {
    let mut ram = ram();
    let mem = memory(&mut ram);
    let z = zone();
    assert!(matches!(
        ZoneTables::new(&z, 7, mem),
        Err(buddy_sim::BuddyError::BadCpu(7))
    ));
    let big = zero_core::ClearConfig::new(
        buddy_sim::mm_types::PageSize::Size64KiB,
        zero_core::PreemptModel::None,
    );
    // A clearer for other page sizes is refused before it can reach a zone's tables.
    assert!(matches!(
        buddy_sim::FrameClearer::new(mem, big),
        Err(buddy_sim::ConfigError::ClearPageSize)
    ));
}

#[test]
fn freeing_a_pointer_the_memory_does_not_map_names_its_address() {
    let z = zone();
    let mut tables = ZoneTables::new(&z, 0, Nowhere).unwrap();
    let mut unmapped = Box::new(PageTable::<El1Attributes>::EMPTY);
    let ptr = NonNull::from(&mut *unmapped);
    // SAFETY: exercising the error path; nothing is freed for a pointer `Nowhere` cannot map.
    unsafe { tables.deallocate_table(ptr) };
    let addr = ptr.as_ptr().addr();
    assert_eq!(tables.last_error(), Some(BuddyError::NotAFrame { addr }));
    assert_eq!(free_frames(&z), FRAMES);
    z.check().unwrap();
}
