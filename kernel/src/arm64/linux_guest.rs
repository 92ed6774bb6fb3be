//! A guest nobody here wrote: an arm64 image in Linux's boot protocol (today's ArceOS app,
//! `arceos/today` with its `hypervisor-guest` feature) and the device tree of the machine
//! it is shown, both embedded at build time (the build script's `UNIKERNEL_GUEST_IMAGE`
//! and `UNIKERNEL_GUEST_DTB`, which set `cfg(linux_guest)`).
//!
//! - Guest RAM, as the device tree's memory node gives it, is 2 MiB blocks from two zones:
//!   the movable-only zone first, then node 0's, the order a movable allocation walks its
//!   zone list in, so one guest spans more than one host region. Each block is a zeroed
//!   allocation, known zero (no clear) where the second CPU's background zeroing left it
//!   so. Stage 2 maps it in 4 KiB pages without the contiguous hint, one level-3 table a
//!   block, so that pte-batch ages it page by page. Nothing compacts or migrates while the guest runs: a migration of a
//!   movable block would have to remap it at stage 2 first (Linux's MMU notifier).
//! - The image goes 2 MiB into RAM and the device tree at its start, as QEMU places them;
//!   the guest starts at EL1 with its MMU off, x0 the device tree's address.
//! - Devices: the PL011 UART and the GICv2 distributor and CPU interface are passed through
//!   (device memory at stage 2; physical interrupts are taken at EL1, HCR_EL2.IMO clear);
//!   the EL1 physical timer and counter are the guest's (CNTHCTL_EL2); PSCI, whose conduit
//!   the tree names `hvc`, is emulated (VERSION, FEATURES, SYSTEM_OFF); every other device
//!   the tree names reads as zero and ignores writes (a stage-2 fault outside RAM, emulated
//!   when the syndrome names the register).
//! - The guest's calls to the hypervisor ([`HYP_SERVICE`], SMCCC's vendor-specific
//!   hypervisor service): it names a buffer, touches a known set of its pages and then
//!   idles; at each call the hypervisor ages all of stage 2 into a [`WorkingSet`] and checks
//!   the estimate against that set, and that every page written is dirty.
//! - When the guest powers off, stage 2 is torn down and every block and table goes back to
//!   its zone: the zones' free counts are those of before the guest.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering};

use arch_arm64::stage2 as s2;
use buddy_sim::{AllocRequest, FrameClearer, OffsetMap, Order, Pfn};
use fdt::Fdt;
use pte_batch::format::Arm64Stage2;
use pte_batch::mm_types::VirtAddr;
use pte_batch::{IdleRun, Prot, PteFormat, PteTable, WorkingSet};
use zero_core::NoResched;

use super::{__guest_enter, FORMAT, GUEST_SCTLR, GUEST_SPSR, S2_ATTRS, S2Tlb, TABLE, VCPU, Vcpu};
use crate::platform::Machine;
use crate::steps::{self, KernelZone, PAGE, Platform, Step, fail};

/// The guest's image (an arm64 Linux `Image`).
static IMAGE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest.img"));
/// The guest's device tree.
static DTB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest.dtb"));

/// A block of guest RAM: 2 MiB.
const BLOCK: u64 = 2 << 20;
/// The order of a block.
const BLOCK_ORDER: u8 = 9;
/// The most guest RAM: 128 MiB.
const MAX_BLOCKS: usize = 64;
/// Where the image goes in guest RAM (its header's text offset is added).
const IMAGE_OFFSET: u64 = 2 << 20;
/// An arm64 `Image` header's magic, at byte 56: "ARM\x64".
const IMAGE_MAGIC: u32 = 0x644d_5241;

/// `HCR_EL2` while the guest runs: E2H (the host in the EL2&0 regime), RW (an AArch64
/// EL1), VM (stage 2 on). DC clear: the guest runs its own stage 1. IMO, FMO and AMO clear:
/// physical interrupts go to the guest.
const HCR: u64 = (1 << 34) | (1 << 31) | 1;

/// `CNTHCTL_EL2` (E2H layout): EL1PCTEN and EL1PTEN (bits 10 and 11), the guest's access to
/// the physical counter and timer; EL0PCTEN and EL0VCTEN (bits 0 and 1), its EL0's.
const CNTHCTL: u64 = (1 << 11) | (1 << 10) | 0b11;

/// SMCCC's vendor-specific hypervisor service (fast call, SMC64, owner 6): function 0
/// answers [`HYP_MAGIC`]; 1 starts a working-set check (x1 the buffer's guest-physical
/// address, x2 its pages); 2 after the guest wrote every x3-th page of it; 3 after it
/// idled (x2 the buffer's pages again). Each returns the buffer's young pages, or
/// [`INVALID_PARAMETERS`].
pub const HYP_SERVICE: u64 = 0xC600_0000;
/// What [`HYP_SERVICE`]'s function 0 answers: "buddysim" in ASCII.
const HYP_MAGIC: u64 = 0x6275_6464_7973_696d;
/// The most pages a working-set buffer may have.
const MAX_BUFFER: usize = 1024;

/// PSCI functions the guest may call, and the answers.
const PSCI_VERSION: u64 = 0x8400_0000;
const PSCI_FEATURES: u64 = 0x8400_000A;
const PSCI_SYSTEM_OFF: u64 = 0x8400_0008;
const PSCI_SYSTEM_RESET: u64 = 0x8400_0009;
/// PSCI 1.0.
const PSCI_1_0: u64 = 0x1_0000;
/// SMCCC's and PSCI's NOT_SUPPORTED (-1).
const NOT_SUPPORTED: u64 = u64::MAX;
/// PSCI's INVALID_PARAMETERS (-2): what a working-set call with a bad buffer, or out of
/// order, answers.
const INVALID_PARAMETERS: u64 = -2i64 as u64;

/// Runs of the working-set estimate: guest RAM is at most 32 768 pages.
const RUNS: usize = 8192;

/// The estimate's storage (only the boot core uses it).
struct RunStorage(UnsafeCell<[IdleRun; RUNS]>);

// SAFETY: only the boot core runs the guest and ages its tables.
unsafe impl Sync for RunStorage {}

static STORAGE: RunStorage = RunStorage(UnsafeCell::new([IdleRun::EMPTY; RUNS]));

/// The machine the device tree shows the guest: RAM and the devices passed through.
struct Layout {
    /// Guest-physical base and size of RAM (2 MiB multiples).
    ram: (u64, u64),
    /// The pages passed through: the UART's, the GIC distributor's and CPU interface's.
    devices: [(u64, u64); 3],
}

impl Layout {
    /// Reads the embedded device tree.
    fn read() -> Result<Self, &'static str> {
        let fdt = Fdt::new(DTB).map_err(|_| "the guest's device tree does not parse")?;
        let ram = fdt
            .memory()
            .regions()
            .next()
            .ok_or("the guest's device tree names no memory")?;
        let (base, size) = (ram.starting_address as u64, ram.size.unwrap_or(0) as u64);
        if base % BLOCK != 0 || size % BLOCK != 0 || size == 0 || size / BLOCK > MAX_BLOCKS as u64 {
            return Err("guest RAM is not 2 MiB-aligned blocks, 128 MiB at most");
        }
        let reg = |compatible: &str, which: usize| {
            fdt.find_compatible(&[compatible])
                .and_then(|n| n.reg())
                .and_then(|mut r| r.nth(which))
                .map(|r| (r.starting_address as u64, r.size.unwrap_or(0) as u64))
                .ok_or("the guest's device tree lacks the PL011 or the GICv2")
        };
        let devices = [
            reg("arm,pl011", 0)?,
            reg("arm,cortex-a15-gic", 0)?,
            reg("arm,cortex-a15-gic", 1)?,
        ];
        Ok(Self {
            ram: (base, size),
            devices,
        })
    }

    fn blocks(&self) -> usize {
        (self.ram.1 / BLOCK) as usize
    }

    fn in_ram(&self, ipa: u64) -> bool {
        ipa.wrapping_sub(self.ram.0) < self.ram.1
    }
}

/// One block of guest RAM and the zone it came from.
#[derive(Clone, Copy)]
struct Block {
    pfn: Pfn,
    movable: bool,
}

/// Stage 2 of the guest: a level-1 root, a level-2 table per GiB used, a level-3 table per
/// 2 MiB mapped; every frame a zeroed allocation from node 0's zone, reached through the
/// identity map.
struct Tables {
    root: u64,
    /// Level-2 tables, by level-1 index (0: none).
    l2: [u64; 4],
    /// Level-3 tables: the 2 MiB of guest-physical space each maps, and its frame.
    l3: heapless::Vec<(u64, u64), { MAX_BLOCKS + 4 }>,
}

impl Tables {
    fn new(zone: &KernelZone, clearer: &FrameClearer<OffsetMap>) -> Self {
        Self {
            root: steps::alloc_zeroed::<Machine>(zone, 0, 0, clearer).0,
            l2: [0; 4],
            l3: heapless::Vec::new(),
        }
    }

    /// Word `i` of the table in `frame`.
    ///
    /// # Safety
    /// `i < 512`; `frame` is one of these tables' (zeroed, identity-mapped).
    unsafe fn word(frame: u64, i: usize) -> &'static AtomicU64 {
        // SAFETY: the caller's; a table frame is 512 aligned words, used only atomically.
        unsafe { &*((frame * PAGE) as *const AtomicU64).add(i) }
    }

    /// The level-3 table mapping the 2 MiB at `ipa`, made (with its level-2 table) if new.
    fn leaf_at(
        &mut self,
        ipa: u64,
        zone: &KernelZone,
        clearer: &FrameClearer<OffsetMap>,
    ) -> PteTable<'_, Arm64Stage2> {
        let base = ipa & !(BLOCK - 1);
        if !self.l3.iter().any(|(b, _)| *b == base) {
            self.make_leaf(ipa, zone, clearer);
        }
        self.leaf(base)
    }

    /// Makes the level-3 table mapping the 2 MiB at `ipa`, and its level-2 table if new.
    fn make_leaf(&mut self, ipa: u64, zone: &KernelZone, clearer: &FrameClearer<OffsetMap>) {
        let base = ipa & !(BLOCK - 1);
        let l1 = ((ipa >> 30) & 3) as usize;
        if ipa >> 32 != 0 {
            fail::<Machine>(
                Step::Mapping,
                format_args!("guest: {ipa:#x} past the 4 GiB of IPA"),
            );
        }
        if self.l2[l1] == 0 {
            self.l2[l1] = steps::alloc_zeroed::<Machine>(zone, 0, 0, clearer).0;
            // SAFETY: l1 < 4; the root is this table set's.
            unsafe { Self::word(self.root, l1) }
                .store((self.l2[l1] * PAGE) | TABLE, Ordering::Relaxed);
        }
        let frame = steps::alloc_zeroed::<Machine>(zone, 0, 0, clearer).0;
        // SAFETY: the index is below 512; the level-2 table is this table set's.
        unsafe { Self::word(self.l2[l1], ((ipa >> 21) & 511) as usize) }
            .store((frame * PAGE) | TABLE, Ordering::Relaxed);
        if self.l3.push((base, frame)).is_err() {
            fail::<Machine>(
                Step::Mapping,
                format_args!("guest: too many level-3 tables"),
            );
        }
    }

    /// The level-3 table mapping the 2 MiB at `base` (one [`Tables::make_leaf`] made), as
    /// pte-batch's table.
    fn leaf(&self, base: u64) -> PteTable<'_, Arm64Stage2> {
        let Some(&(_, frame)) = self.l3.iter().find(|(b, _)| *b == base) else {
            fail::<Machine>(
                Step::Mapping,
                format_args!("guest: no level-3 table maps {base:#x}"),
            )
        };
        // SAFETY: a level-3 table frame of these tables (zeroed, identity-mapped), accessed
        // only atomically (here and by the walker); the borrow of `self` ends before
        // `LinuxGuest::tear_down` gives the frame back.
        let entries = unsafe {
            core::slice::from_raw_parts((frame * PAGE) as *const pte_batch::AtomicU64, 512)
        };
        PteTable::new(FORMAT, VirtAddr(base), entries)
            .unwrap_or_else(|e| fail::<Machine>(Step::Mapping, format_args!("stage-2 table: {e}")))
    }

    /// `VTTBR_EL2`: the root and the VMID.
    fn vttbr(&self) -> u64 {
        (self.root * PAGE) | (super::VMID << 48)
    }

    /// Every table frame: the level-3 ones, the level-2 ones, the root.
    fn frames(&self) -> impl Iterator<Item = u64> + '_ {
        self.l3
            .iter()
            .map(|&(_, f)| f)
            .chain(self.l2.iter().copied().filter(|&f| f != 0))
            .chain([self.root])
    }
}

/// The guest: its RAM, stage 2, the working-set estimate and the counts the run prints.
struct LinuxGuest {
    layout: Layout,
    blocks: heapless::Vec<Block, MAX_BLOCKS>,
    tables: Tables,
    /// Device accesses emulated (read as zero, writes ignored).
    emulated: u64,
    /// The aging passes' total time (ns; guest instructions under `-icount shift=0`).
    aging_ns: u64,
    /// The working-set buffer the guest named: its first page's guest-physical address and
    /// its pages.
    buffer: (u64, usize),
}

/// What the guest's exit asks of the run loop.
enum Next {
    Resume,
    Off,
}

impl LinuxGuest {
    /// Guest RAM of `layout` from the zones (movable-only first); returns the guest and
    /// how many blocks were known zero.
    fn allocate(
        layout: Layout,
        zone: &KernelZone,
        clearer: &FrameClearer<OffsetMap>,
    ) -> (Self, usize) {
        let order = Order::new(BLOCK_ORDER)
            .unwrap_or_else(|e| fail::<Machine>(Step::Zone, format_args!("{e}")));
        let mut blocks = heapless::Vec::new();
        let mut known_zero = 0;
        let mut movable = steps::movable_zone();
        for b in 0..layout.blocks() {
            let from = |z: &KernelZone, is_movable: bool| {
                let before = z.zeroed_pages();
                let request = AllocRequest::order(order).zeroed_with(clearer);
                let request = if is_movable {
                    request.movable(b as u64)
                } else {
                    request
                };
                let pfn = z.cpu(0).ok()?.alloc_raw(request).ok()?;
                Some((pfn, z.zeroed_pages() + order.pages() <= before))
            };
            let got = movable
                .and_then(|z| from(z, true).map(|(p, k)| (p, k, true)))
                .or_else(|| {
                    // The movable-only zone is full: node 0's from here on.
                    movable = None;
                    from(zone, false).map(|(p, k)| (p, k, false))
                });
            let Some((pfn, known, is_movable)) = got else {
                fail::<Machine>(
                    Step::Zone,
                    format_args!("guest RAM: no free 2 MiB block for block {b}"),
                )
            };
            known_zero += usize::from(known);
            let _ = blocks.push(Block {
                pfn,
                movable: is_movable,
            });
        }
        let guest = Self {
            layout,
            blocks,
            tables: Tables::new(zone, clearer),
            emulated: 0,
            aging_ns: 0,
            buffer: (0, 0),
        };
        (guest, known_zero)
    }

    /// Checks every word of guest RAM reads zero.
    fn check_zeroed(&self) {
        for (i, b) in self.blocks.iter().enumerate() {
            // SAFETY: the block is the guest's, identity-mapped, and the guest has not
            // started.
            unsafe {
                steps::check_zero::<Machine>(
                    b.pfn,
                    BLOCK / PAGE,
                    format_args!("guest RAM block {i}"),
                )
            };
        }
    }

    /// Maps guest RAM (read, write, execute; normal write-back) and the passed-through
    /// devices (read, write; device memory) at stage 2.
    fn map(&mut self, zone: &KernelZone, clearer: &FrameClearer<OffsetMap>) {
        let ram = Prot {
            write: true,
            exec: true,
            attrs: S2_ATTRS,
            ..Prot::default()
        };
        for i in 0..self.blocks.len() {
            let ipa = self.layout.ram.0 + i as u64 * BLOCK;
            let table = self.tables.leaf_at(ipa, zone, clearer);
            // A page at a time: no contiguous hint, so that aging sees each page.
            for p in 0..512 {
                let pfn = Pfn(self.blocks[i].pfn.0 + p as u64);
                table.set_ptes(p, pfn, 1, ram).unwrap_or_else(|e| {
                    fail::<Machine>(Step::Mapping, format_args!("guest RAM block {i}: {e}"))
                });
            }
        }
        let device = Prot {
            write: true,
            attrs: s2::MEMATTR_DEVICE_NGNRE,
            ..Prot::default()
        };
        for (base, size) in self.layout.devices {
            let pages = size.div_ceil(PAGE);
            for p in 0..pages {
                let ipa = base + p * PAGE;
                self.tables
                    .leaf_at(ipa, zone, clearer)
                    .set_ptes(((ipa >> 12) & 511) as usize, Pfn(ipa / PAGE), 1, device)
                    .unwrap_or_else(|e| {
                        fail::<Machine>(Step::Mapping, format_args!("device at {ipa:#x}: {e}"))
                    });
            }
        }
        super::super::mmu::publish_tables();
    }

    /// Where guest-physical `ipa` (in RAM) is in the host's identity map, and the bytes
    /// left in its block.
    fn host(&self, ipa: u64) -> (*mut u8, usize) {
        let off = ipa - self.layout.ram.0;
        let block = self.blocks[(off / BLOCK) as usize];
        let within = off % BLOCK;
        (
            (block.pfn.0 * PAGE + within) as *mut u8,
            (BLOCK - within) as usize,
        )
    }

    /// Copies `bytes` to guest RAM at `ipa` and cleans them to the point of coherency (the
    /// guest reads them with its MMU off).
    fn load(&self, mut ipa: u64, mut bytes: &[u8]) {
        let last = ipa.saturating_add((bytes.len() as u64).saturating_sub(1));
        if !self.layout.in_ram(ipa) || !self.layout.in_ram(last) {
            fail::<Machine>(
                Step::Mapping,
                format_args!("guest: {} bytes at {ipa:#x} past its RAM", bytes.len()),
            );
        }
        while !bytes.is_empty() {
            let (to, room) = self.host(ipa);
            let n = room.min(bytes.len());
            // SAFETY: `to..to + n` is inside one block of guest RAM, which the guest has not
            // started on; the identity map maps it as normal memory.
            unsafe {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), to, n);
                super::super::mmu::clean_to_poc(to, n);
            }
            bytes = &bytes[n..];
            ipa += n as u64;
        }
    }

    /// One aging pass over all of guest RAM (KVM's clear_flush_young) into `ws`; returns
    /// the pages found young.
    fn age(&mut self, ws: &mut WorkingSet<'_>, tlb: &mut S2Tlb) -> u64 {
        let start = Machine::now_ns();
        let mut pass = ws.pass();
        for i in 0..self.blocks.len() {
            let ipa = self.layout.ram.0 + i as u64 * BLOCK;
            steps::age_table::<Machine, _>(&self.tables.leaf(ipa), &mut pass, tlb);
        }
        let young = pass
            .finish()
            .unwrap_or_else(|e| fail::<Machine>(Step::Aging, format_args!("working set: {e}")))
            .young_pages;
        self.aging_ns += Machine::now_ns() - start;
        young
    }

    /// Which pages of the buffer the last pass found idle.
    fn buffer_idle(&self, ws: &WorkingSet<'_>) -> [bool; MAX_BUFFER] {
        let (first, pages) = self.buffer;
        let mut idle = [false; MAX_BUFFER];
        for r in ws.idle_ranges(1) {
            let (start, end) = (r.start.0, r.start.0 + r.pages * PAGE);
            for (p, slot) in idle.iter_mut().enumerate().take(pages) {
                let ipa = first + p as u64 * PAGE;
                *slot |= start <= ipa && ipa < end;
            }
        }
        idle
    }

    /// Whether the stage-2 entry of guest page `ipa` is dirty.
    fn dirty(&self, ipa: u64) -> bool {
        let table = self.tables.leaf(ipa & !(BLOCK - 1));
        let entry = table.get(((ipa >> 12) & 511) as usize).unwrap_or(0);
        FORMAT.is_present(entry) && FORMAT.is_dirty(entry)
    }

    /// A call of the guest's to [`HYP_SERVICE`] or PSCI: the answer goes in x0.
    fn call(&mut self, vcpu: &mut Vcpu, ws: &mut WorkingSet<'_>, tlb: &mut S2Tlb) -> Next {
        let [f, a, b, c] = [vcpu.regs[0], vcpu.regs[1], vcpu.regs[2], vcpu.regs[3]];
        let answer = match f {
            PSCI_VERSION => PSCI_1_0,
            PSCI_FEATURES => match a {
                PSCI_VERSION | PSCI_FEATURES | PSCI_SYSTEM_OFF => 0,
                _ => NOT_SUPPORTED,
            },
            PSCI_SYSTEM_OFF => return Next::Off,
            PSCI_SYSTEM_RESET => fail::<Machine>(
                Step::Exception,
                format_args!("guest: PSCI SYSTEM_RESET (it failed?)"),
            ),
            HYP_SERVICE => HYP_MAGIC,
            f if f == HYP_SERVICE + 1 => {
                let pages = b as usize;
                let end = a.saturating_add(b.saturating_mul(PAGE));
                if pages == 0
                    || pages > MAX_BUFFER
                    || !self.layout.in_ram(a)
                    || !self.layout.in_ram(end - 1)
                {
                    INVALID_PARAMETERS
                } else {
                    self.buffer = (a, pages);
                    self.age(ws, tlb)
                }
            }
            f if f == HYP_SERVICE + 2 || f == HYP_SERVICE + 3 => {
                if self.buffer.1 == 0
                    || b != self.buffer.1 as u64
                    || (f == HYP_SERVICE + 2 && c == 0)
                {
                    INVALID_PARAMETERS
                } else if f == HYP_SERVICE + 2 {
                    self.touched(c, ws, tlb)
                } else {
                    self.idled(ws, tlb)
                }
            }
            _ => NOT_SUPPORTED,
        };
        vcpu.regs[0] = answer;
        Next::Resume
    }

    /// The guest wrote every `stride`-th page of its buffer: a pass must find exactly those
    /// young, and each dirty.
    fn touched(&mut self, stride: u64, ws: &mut WorkingSet<'_>, tlb: &mut S2Tlb) -> u64 {
        let (first, n) = self.buffer;
        let young_all = self.age(ws, tlb);
        let idle = self.buffer_idle(ws);
        let mut young = 0;
        for (p, &idle) in idle.iter().enumerate().take(n) {
            let written = (p as u64).is_multiple_of(stride);
            let ipa = first + p as u64 * PAGE;
            if idle == written || (written && !self.dirty(ipa)) {
                fail::<Machine>(
                    Step::Aging,
                    format_args!(
                        "guest working set: page {p} of the buffer idle {idle}, written {written}, dirty {}",
                        self.dirty(ipa)
                    ),
                );
            }
            young += u64::from(!idle);
        }
        println!(
            "linux guest: working set after the guest wrote one page in {stride} of its {n}-page buffer: {young} young = exactly the pages written, each dirty ({} young in all of its RAM, its kernel's own)",
            young_all
        );
        young
    }

    /// The guest idled: a pass must find its whole buffer idle.
    fn idled(&mut self, ws: &mut WorkingSet<'_>, tlb: &mut S2Tlb) -> u64 {
        let (_, n) = self.buffer;
        let young_all = self.age(ws, tlb);
        let idle = self.buffer_idle(ws);
        let young = idle.iter().take(n).filter(|&&i| !i).count() as u64;
        if young != 0 {
            fail::<Machine>(
                Step::Aging,
                format_args!("guest working set: {young} of {n} buffer pages young after idling"),
            );
        }
        println!(
            "linux guest: after the guest idled, all {n} buffer pages idle; working set {young_all} pages of {}",
            self.blocks.len() * 512
        );
        young
    }

    /// A data abort: a device the tree names but the guest does not get reads as zero and
    /// ignores writes, where the syndrome names the register.
    fn data_abort(&mut self, vcpu: &mut Vcpu, esr: u64) {
        let hpfar: u64;
        let far: u64;
        // SAFETY: HPFAR_EL2 and FAR_EL2 hold this stage-2 fault's addresses.
        unsafe {
            core::arch::asm!("mrs {}, hpfar_el2", out(reg) hpfar, options(nomem, nostack));
            core::arch::asm!("mrs {}, far_el2", out(reg) far, options(nomem, nostack));
        }
        let ipa = (((hpfar >> 4) & ((1 << 40) - 1)) << 12) | (far & 0xfff);
        let iss = esr & 0x1ff_ffff;
        let (isv, srt, write, dfsc) = (
            iss & (1 << 24) != 0,
            ((iss >> 16) & 31) as usize,
            iss & (1 << 6) != 0,
            iss & 0x3f,
        );
        // Translation (0b0001xx) or address-size (0b0000xx) faults outside RAM.
        if !isv || dfsc > 0b0111 || self.layout.in_ram(ipa) {
            fail::<Machine>(
                Step::Exception,
                format_args!(
                    "guest: data abort at IPA {ipa:#x} ESR {esr:#x} ELR {:#x}",
                    vcpu.elr
                ),
            );
        }
        if !write && srt != 31 {
            vcpu.regs[srt] = 0;
        }
        vcpu.elr += 4;
        self.emulated += 1;
    }

    /// Runs the guest until it powers off.
    fn run(&mut self, ws: &mut WorkingSet<'_>, tlb: &mut S2Tlb) {
        // SAFETY: only the boot core uses the vCPU, and not while the guest runs.
        let vcpu = unsafe { &mut *VCPU.0.get() };
        loop {
            // SAFETY: stage 2 maps the guest's RAM and devices, and the registers are its
            // own; it leaves only through the vectors' guest exit.
            let esr = unsafe { __guest_enter(vcpu) };
            match esr >> 26 {
                // HVC from AArch64: PSCI or the hypervisor service.
                0x16 => {
                    if let Next::Off = self.call(vcpu, ws, tlb) {
                        return;
                    }
                }
                0x24 => self.data_abort(vcpu, esr),
                _ => fail::<Machine>(
                    Step::Exception,
                    format_args!("guest exit ESR {esr:#x} at {:#x}", vcpu.elr),
                ),
            }
        }
    }

    /// Unmaps everything at stage 2 (one invalidation per table), drops the VMID's
    /// translations, and gives every block and table back to its zone.
    fn tear_down(self, zone: &KernelZone, tlb: &mut S2Tlb) -> (usize, usize) {
        let mut dirty = 0;
        for &(base, _) in &self.tables.l3 {
            let gone = self
                .tables
                .leaf(base)
                .unmap_ptes(0, 512, tlb)
                .unwrap_or_else(|e| fail::<Machine>(Step::Free, format_args!("unmap: {e}")));
            dirty += usize::from(gone.dirty);
        }
        // SAFETY: at EL2 with the guest's VMID current: its translations go with its tables.
        unsafe { arch_arm64::tlb::flush_vmid() };
        let movable = steps::movable_zone();
        let mut from_movable = 0;
        for b in &self.blocks {
            let z = if b.movable {
                from_movable += 1;
                movable.unwrap_or(zone)
            } else {
                zone
            };
            // SAFETY: the guest's block, unmapped at stage 2 above with its translations
            // dropped: the guest no longer reaches it, nor does anything else.
            unsafe { steps::free_block::<Machine>(z, 0, b.pfn.0, BLOCK_ORDER, Step::Free) };
        }
        for frame in self.tables.frames() {
            // SAFETY: a stage-2 table frame, which no walk uses any more (the VMID was
            // flushed).
            unsafe { steps::free_block::<Machine>(zone, 0, frame, 0, Step::Free) };
        }
        (dirty, from_movable)
    }
}

/// The free frames of node 0's zone and of the movable-only zone.
fn free_counts(zone: &KernelZone) -> (u64, u64) {
    (
        zone.free_pages_total(),
        steps::movable_zone().map_or(0, |z| z.free_pages_total()),
    )
}

/// Frames of the guest's RAM (0 if its device tree names none).
pub fn ram_pages() -> u64 {
    Layout::read().map_or(0, |l| l.ram.1 / PAGE)
}

/// A plain allocation of `blocks` blocks from node 0's zone, each cleared by zero-core,
/// then freed: what setting up guest RAM costs without known-zero blocks. Returns the time
/// of the allocations and clears.
fn plain_setup(zone: &KernelZone, clearer: &FrameClearer<OffsetMap>, blocks: usize) -> u64 {
    let order = Order::new(BLOCK_ORDER)
        .unwrap_or_else(|e| fail::<Machine>(Step::Zone, format_args!("{e}")));
    let mut taken: heapless::Vec<Pfn, MAX_BLOCKS> = heapless::Vec::new();
    let start = Machine::now_ns();
    for _ in 0..blocks {
        let pfn = zone
            .alloc_pages(0, order)
            .unwrap_or_else(|e| fail::<Machine>(Step::Zone, format_args!("plain block: {e}")));
        // SAFETY: the block was just allocated to this core and is identity-mapped.
        let cleared = unsafe {
            zero_core::clear_contig_pages_raw(
                (pfn.0 * PAGE) as *mut u8,
                512,
                clearer.clearer(),
                &mut NoResched,
            )
        };
        cleared.unwrap_or_else(|e| fail::<Machine>(Step::Zeroing, format_args!("clear: {e}")));
        let _ = taken.push(pfn);
    }
    let took = Machine::now_ns() - start;
    for pfn in taken {
        // SAFETY: allocated above, and nothing holds it.
        unsafe { steps::free_block::<Machine>(zone, 0, pfn.0, BLOCK_ORDER, Step::Free) };
    }
    took
}

/// Runs the embedded guest to its power-off on the hypervisor's stage 2 (VTCR_EL2 already
/// set), ages it at its calls, tears it down, and checks the zones' free counts are back.
pub fn run(zone: &KernelZone, clearer: &FrameClearer<OffsetMap>) {
    let layout =
        Layout::read().unwrap_or_else(|e| fail::<Machine>(Step::Mapping, format_args!("{e}")));
    if IMAGE.len() < 64
        || u32::from_le_bytes([IMAGE[56], IMAGE[57], IMAGE[58], IMAGE[59]]) != IMAGE_MAGIC
    {
        fail::<Machine>(Step::Mapping, format_args!("guest: not an arm64 Image"));
    }
    let mut word = [0; 8];
    word.copy_from_slice(&IMAGE[8..16]);
    let text_offset = u64::from_le_bytes(word);
    let free_before = free_counts(zone);
    let pool_before = zone.zeroed_pages();

    let start = Machine::now_ns();
    let (mut guest, known_zero) = LinuxGuest::allocate(layout, zone, clearer);
    let took = Machine::now_ns() - start;
    guest.check_zeroed();
    guest.map(zone, clearer);
    let blocks = guest.blocks.len();
    let movable = guest.blocks.iter().filter(|b| b.movable).count();
    println!(
        "linux guest: {} MiB of RAM at IPA {:#x} in {blocks} blocks of 2 MiB from two zones ({movable} from the movable-only zone, {} from node 0's), {known_zero} known zero ({} clears saved; {pool_before} frames in the pool before), every word read back zero; {} stage-2 tables",
        guest.layout.ram.1 >> 20,
        guest.layout.ram.0,
        blocks - movable,
        known_zero,
        guest.tables.frames().count()
    );
    let entry = guest.layout.ram.0 + IMAGE_OFFSET + text_offset;
    guest.load(entry, IMAGE);
    guest.load(guest.layout.ram.0, DTB);

    // SAFETY: at EL2, the guest not running: its VMID's tables are built and published, its
    // EL1 state is reset (SCTLR_EL12: MMU and caches off), the timer's EL1 controls are its
    // own, and the instruction cache drops any stale copy of the image.
    unsafe {
        core::arch::asm!(
            "msr vttbr_el2, {vttbr}",
            "msr hcr_el2, {hcr}",
            "msr cnthctl_el2, {cnthctl}",
            "msr cntvoff_el2, xzr",
            "msr s3_5_c1_c0_0, {sctlr}", // SCTLR_EL12: the guest's SCTLR_EL1
            "ic ialluis",
            "dsb ish",
            "isb",
            vttbr = in(reg) guest.tables.vttbr(),
            hcr = in(reg) HCR,
            cnthctl = in(reg) CNTHCTL,
            sctlr = in(reg) GUEST_SCTLR,
            options(nostack),
        );
        arch_arm64::tlb::flush_vmid();
    }
    // SAFETY: only the boot core uses the vCPU, and the guest is not running.
    let vcpu = unsafe { &mut *VCPU.0.get() };
    vcpu.regs = [0; 31];
    vcpu.regs[0] = guest.layout.ram.0;
    vcpu.elr = entry;
    vcpu.spsr = GUEST_SPSR;
    println!(
        "linux guest: a {} KiB Image at IPA {entry:#x}, device tree at {:#x}; PL011 and GICv2 passed through, PSCI emulated; entering at EL1",
        IMAGE.len() >> 10,
        guest.layout.ram.0
    );

    // SAFETY: only the boot core uses the storage.
    let storage = unsafe { &mut *STORAGE.0.get() };
    let mut ws = WorkingSet::new(storage)
        .unwrap_or_else(|e| fail::<Machine>(Step::Aging, format_args!("{e}")));
    let mut tlb = S2Tlb {
        skip: false,
        flushes: 0,
    };
    guest.run(&mut ws, &mut tlb);
    // The guest's timers stop with it: the host never takes their interrupts.
    // SAFETY: CNTP_CTL_EL02 and CNTV_CTL_EL02 are the guest's EL1 timers' controls.
    unsafe {
        core::arch::asm!(
            "msr s3_5_c14_c2_1, xzr", // CNTP_CTL_EL02
            "msr s3_5_c14_c3_1, xzr", // CNTV_CTL_EL02
            "isb",
            options(nostack)
        );
    }
    if guest.buffer.1 == 0 {
        fail::<Machine>(
            Step::Aging,
            format_args!("guest: powered off without its working-set calls"),
        );
    }
    let (passes, aging_ns) = (ws.passes(), guest.aging_ns);
    println!(
        "linux guest: powered off (PSCI SYSTEM_OFF); {} device accesses emulated; {passes} aging passes over {} pages, {} ns each on average (guest instructions under -icount shift=0)",
        guest.emulated,
        blocks * 512,
        aging_ns / passes.max(1)
    );
    let (dirty, from_movable) = guest.tear_down(zone, &mut tlb);
    let free_after = free_counts(zone);
    if free_after != free_before {
        fail::<Machine>(
            Step::Free,
            format_args!(
                "guest RAM not all back: free frames {free_after:?}, {free_before:?} before the guest"
            ),
        );
    }
    println!(
        "linux guest: torn down ({dirty} tables held dirty pages); {blocks} blocks back to their zones ({from_movable} to the movable-only zone), free counts as before the guest: node 0 {} frames, movable-only zone {}",
        free_after.0, free_after.1
    );
    let plain = plain_setup(zone, clearer, blocks);
    println!(
        "linux guest: RAM set-up {} ns with zoned zeroed blocks, {} ns with plain blocks each cleared by zero-core ({:.2}x)",
        took,
        plain,
        plain as f64 / took.max(1) as f64
    );
    // The same, for `cargo xtask report`'s "hypervisor guest" section.
    println!(
        "linux guest figures: blocks={blocks} known_zero={known_zero} setup_ns={took} plain_setup_ns={plain} aging_ns={} pages={}",
        aging_ns / passes.max(1),
        blocks * 512
    );
}
