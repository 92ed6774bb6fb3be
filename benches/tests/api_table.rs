//! buddy-sim's README compares the calls of common tasks with those of
//! buddy_system_allocator and talc. Each call of those three columns is here, verbatim,
//! compiled and run against the crates themselves (the versions this workspace locks), and
//! the last test checks that every call in the table is found in this file: a table that
//! names a call these crates do not have fails here. (Asterinas ostd's column is quoted from
//! its documentation: ostd builds only inside its own kernel.)
#![allow(non_upper_case_globals, non_snake_case)]

use buddy_sim::{AllocRequest, BoxedZone, FrameClearer, Pfn, StaticZone, ZoneConfig};
use buddy_system_allocator::{FrameAllocator, LockedFrameAllocator};
use std::alloc::{GlobalAlloc, Layout};
use std::error::Error;
use talc::TalcLock;
use talc::source::Claim;

type R = spin::Mutex<()>;
type Result<T = ()> = core::result::Result<T, Box<dyn Error>>;

/// A page-aligned buffer the talc examples claim and the zeroed example clears.
#[repr(C, align(4096))]
struct Pages([u8; 16 * 4096]);

fn pages() -> Box<Pages> {
    Box::new(Pages([0xA5; 16 * 4096]))
}

// Set up over a range.

#[test]
fn set_up_over_a_range() -> Result {
    let (start, n) = (Pfn(0x1000), 1024);
    let zone = BoxedZone::new_boxed(ZoneConfig::new(start, n))?;
    assert_eq!(zone.free_pages_total(), 1024);

    let (start, end) = (0x1000, 0x1400);
    let mut f = FrameAllocator::<33>::new();
    f.add_frame(start, end);
    assert_eq!(f.alloc(1), Some(0x1000));

    let mut heap = pages();
    let (base, size) = (heap.0.as_mut_ptr(), heap.0.len());
    // SAFETY: the buffer outlives the allocator, and only it uses the buffer.
    let t = TalcLock::<R, _>::new(unsafe { Claim::new(base, size) });
    // SAFETY: a non-zero layout; the block goes back below.
    let block = unsafe { t.alloc(Layout::from_size_align(64, 8)?) };
    assert!(!block.is_null());
    // SAFETY: allocated above with this layout.
    unsafe { t.dealloc(block, Layout::from_size_align(64, 8)?) };
    Ok(())
}

// A static allocator.

#[test]
fn a_static_allocator() -> Result {
    {
        const N: usize = 1024;
        const start: Pfn = Pfn(0x1000);
        static Z: StaticZone<N, 1> = StaticZone::new_static_at(start);
        assert_eq!(Z.free_pages_total(), 1024);
    }

    let (start, end) = (0x1000, 0x1400);
    static F: LockedFrameAllocator = LockedFrameAllocator::new();
    F.lock().add_frame(start, end);
    assert_eq!(F.lock().alloc(1), Some(0x1000));

    static mut HEAP: [u8; 16 * 4096] = [0; 16 * 4096];
    // SAFETY: `HEAP` is the allocator's alone, for the program's life.
    static A: TalcLock<R, Claim> = TalcLock::new(unsafe { Claim::array(&raw mut HEAP) });
    // SAFETY: a non-zero layout; the block goes back below.
    let block = unsafe { A.alloc(Layout::from_size_align(64, 8)?) };
    assert!(!block.is_null());
    // SAFETY: allocated above with this layout.
    unsafe { A.dealloc(block, Layout::from_size_align(64, 8)?) };
    Ok(())
}

// One frame, a zeroed frame, free.

#[test]
fn one_frame_zeroed_and_freed() -> Result {
    let zone = BoxedZone::new_boxed(ZoneConfig::new(Pfn(0x1000), 16))?;
    let cpu = zone.cpu(0)?;
    let block = cpu.alloc(AllocRequest::page())?;
    assert_eq!(zone.free_pages_total(), 15);
    drop(block);
    assert_eq!(zone.free_pages_total(), 16);
    let mut ram = pages();
    let PHYS_OFFSET = ram
        .0
        .as_mut_ptr()
        .wrapping_sub(0x1000 * 4096)
        .expose_provenance();
    // SAFETY: frame 0x1000 + i is the buffer's page i, which only the zone and the blocks'
    // owners touch while the zone runs.
    let clearer = unsafe { FrameClearer::direct_map(Pfn(0), PHYS_OFFSET as *mut u8) }?;
    let cpu = zone.cpu(0)?.with_clearer(&clearer);
    let page = cpu.alloc(AllocRequest::page().zeroed())?;
    let i = (page.pfn().0 - 0x1000) as usize * 4096;
    assert!(ram.0[i..i + 4096].iter().all(|&b| b == 0));
    drop(page);

    let mut f = FrameAllocator::<33>::new();
    f.add_frame(0x1000, 0x1010);
    let frame = f.alloc(1).ok_or("no frame")?;
    f.dealloc(frame, 1);

    let mut heap = pages();
    // SAFETY: the buffer outlives the allocator, and only it uses the buffer.
    let t = TalcLock::<R, _>::new(unsafe { Claim::new(heap.0.as_mut_ptr(), heap.0.len()) });
    // SAFETY: a non-zero layout; the block goes back below.
    let ptr = unsafe { t.lock().allocate(Layout::from_size_align(4096, 4096)?) };
    let (ptr, layout) = (
        ptr.ok_or("no frame")?.as_ptr(),
        Layout::from_size_align(4096, 4096)?,
    );
    // SAFETY: allocated above with this layout.
    unsafe { t.lock().deallocate(ptr, layout) };
    // SAFETY: a non-zero layout.
    let zeroed = unsafe { t.alloc_zeroed(Layout::from_size_align(4096, 4096)?) };
    assert!(!zeroed.is_null());
    // SAFETY: 4096 bytes just allocated, initialized (zeroed) and not null.
    let bytes = unsafe { core::slice::from_raw_parts(zeroed, 4096) };
    assert!(bytes.iter().all(|&b| b == 0));
    // SAFETY: allocated above with this layout.
    unsafe { t.dealloc(zeroed, layout) };
    Ok(())
}

// n contiguous frames, aligned; free part of a run.

#[test]
fn a_run_aligned_and_part_of_it_freed() -> Result {
    let zone = BoxedZone::new_boxed(ZoneConfig::new(Pfn(0x1000), 1024))?;
    let cpu = zone.cpu(0)?;
    let (n, o) = (300, buddy_sim::Order::new(4)?);
    let run = cpu.alloc(AllocRequest::frames(n).aligned(o))?.into_raw();
    assert_eq!(run.0 % 16, 0);
    let (pfn, k) = (Pfn(run.0 + 200), 100);
    // SAFETY: the run's last 100 frames are this test's, and it uses them no more.
    unsafe { cpu.free_contig_range(pfn, k) }?;
    assert_eq!(zone.free_pages_total(), 1024 - 200);

    let mut f = FrameAllocator::<33>::new();
    f.add_frame(0x1000, 0x1400);
    let (n, a) = (300, 16);
    let first = f
        .alloc_aligned(Layout::from_size_align(n, a)?)
        .ok_or("no run")?;
    assert_eq!(first % 16, 0);

    let mut heap = vec![Pages([0; 16 * 4096]); 2].into_boxed_slice();
    // SAFETY: the buffer outlives the allocator, and only it uses the buffer.
    let t = TalcLock::<R, _>::new(unsafe { Claim::new(heap.as_mut_ptr().cast(), 2 * 65536) });
    let (n, a) = (4, 16384);
    // SAFETY: a non-zero layout; the run goes back below.
    let ptr = unsafe { t.lock().allocate(Layout::from_size_align(n * 4096, a)?) };
    let (ptr, layout) = (
        ptr.ok_or("no run")?.as_ptr(),
        Layout::from_size_align(n * 4096, a)?,
    );
    assert_eq!(ptr.addr() % a, 0);
    let size = 4096;
    // SAFETY: allocated above with `layout`; `size` is smaller and not zero.
    unsafe { t.lock().shrink(ptr, layout, size) };
    // SAFETY: what is left, with its layout now.
    unsafe { t.lock().deallocate(ptr, Layout::from_size_align(size, a)?) };
    Ok(())
}

impl Clone for Pages {
    fn clone(&self) -> Self {
        Self(self.0)
    }
}

/// The code spans of the table's buddy-sim, buddy_system_allocator and talc columns.
fn table_calls(readme: &str) -> Vec<String> {
    let mut calls = Vec::new();
    let rows = readme
        .lines()
        .skip_while(|l| !l.starts_with("| task |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'));
    for row in rows {
        let cells: Vec<&str> = row.split(" | ").collect();
        // The task, then buddy-sim, buddy_system_allocator, talc; ostd's last.
        for cell in &cells[1..4] {
            calls.extend(cell.split('`').skip(1).step_by(2).map(str::to_owned));
        }
    }
    calls
}

/// Whitespace-insensitive text.
fn squeezed(text: &str) -> String {
    text.split_whitespace().collect()
}

#[test]
fn every_call_in_the_readme_table_is_compiled_here() {
    let readme = include_str!("../../crates/buddy-sim/README.md");
    let here = squeezed(include_str!("api_table.rs"));
    let calls = table_calls(readme);
    assert!(calls.len() >= 20, "the table was not found: {calls:?}");
    let missing: Vec<_> = calls
        .iter()
        .filter(|c| !here.contains(&squeezed(c)))
        .collect();
    assert!(
        missing.is_empty(),
        "calls in the README table not compiled here: {missing:?}"
    );
}
