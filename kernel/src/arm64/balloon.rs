//! A virtio-balloon device on QEMU virt's virtio-mmio transport (virtio 1.x, "modern": run
//! QEMU with `-global virtio-mmio.force-legacy=false`), found through the device tree, with
//! free page reporting only: the feature `VIRTIO_BALLOON_F_REPORTING` and its virtqueue,
//! to which the kernel hands free blocks (device-writable buffers, as Linux's driver adds
//! them) for the host to discard.

use core::sync::atomic::{Ordering, fence};

use buddy_sim::{ReportSink, ReportedBlock};

use super::dtb;
use crate::steps::PAGE;

/// The virtio-mmio registers (virtio 1.2, 4.2.2).
const MAGIC: usize = 0x000;
const VERSION: usize = 0x004;
const DEVICE_ID: usize = 0x008;
const DEVICE_FEATURES: usize = 0x010;
const DEVICE_FEATURES_SEL: usize = 0x014;
const DRIVER_FEATURES: usize = 0x020;
const DRIVER_FEATURES_SEL: usize = 0x024;
const QUEUE_SEL: usize = 0x030;
const QUEUE_NUM_MAX: usize = 0x034;
const QUEUE_NUM: usize = 0x038;
const QUEUE_READY: usize = 0x044;
const QUEUE_NOTIFY: usize = 0x050;
const STATUS: usize = 0x070;
const QUEUE_DESC: usize = 0x080;
const QUEUE_DRIVER: usize = 0x090;
const QUEUE_DEVICE: usize = 0x0a0;

/// "virt" in little-endian.
const VIRTIO_MAGIC: u32 = 0x7472_6976;
const BALLOON_ID: u32 = 5;
/// Device status bits.
const ACKNOWLEDGE: u32 = 1;
const DRIVER: u32 = 2;
const DRIVER_OK: u32 = 4;
const FEATURES_OK: u32 = 8;
/// `VIRTIO_BALLOON_F_REPORTING`, and `VIRTIO_F_VERSION_1` (bit 32: bit 0 of the high word).
const F_REPORTING: u32 = 1 << 5;
const F_VERSION_1_HIGH: u32 = 1;
/// QEMU's queues: inflate 0, deflate 1, statistics 2 (always), free page hints (only with
/// `free-page-hint=on`, which the stage does not set), then reporting.
const REPORTING_QUEUE: u32 = 3;
/// Descriptors in the reporting queue: a round of buddy-sim's reporting at most.
const QUEUE_SIZE: usize = buddy_sim::PageReporting::MAX_CAPACITY;
/// `VIRTQ_DESC_F_NEXT`, `VIRTQ_DESC_F_WRITE`.
const DESC_NEXT: u16 = 1;
const DESC_WRITE: u16 = 2;
/// Polls of the used ring before a report counts as failed.
const POLLS: u64 = 1 << 30;

#[repr(C)]
#[derive(Clone, Copy)]
struct Desc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

#[repr(C)]
struct Avail {
    flags: u16,
    idx: u16,
    ring: [u16; QUEUE_SIZE],
    used_event: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct UsedElem {
    id: u32,
    len: u32,
}

#[repr(C)]
struct Used {
    flags: u16,
    idx: u16,
    ring: [UsedElem; QUEUE_SIZE],
    avail_event: u16,
}

/// The reporting virtqueue's memory: identity-mapped RAM, so its addresses are what the
/// device is given.
#[repr(C, align(4096))]
struct Rings {
    desc: [Desc; QUEUE_SIZE],
    avail: Avail,
    used: Used,
}

static mut RINGS: Rings = Rings {
    desc: [Desc {
        addr: 0,
        len: 0,
        flags: 0,
        next: 0,
    }; QUEUE_SIZE],
    avail: Avail {
        flags: 0,
        idx: 0,
        ring: [0; QUEUE_SIZE],
        used_event: 0,
    },
    used: Used {
        flags: 0,
        idx: 0,
        ring: [UsedElem { id: 0, len: 0 }; QUEUE_SIZE],
        avail_event: 0,
    },
};

/// The balloon device, its reporting queue set up and the device live.
pub struct Balloon {
    base: usize,
    /// The next avail index (and the used index once the device caught up).
    next: u16,
}

fn read(base: usize, reg: usize) -> u32 {
    // SAFETY: a register of a virtio-mmio slot the device tree names, identity-mapped as
    // device memory (`mmu::map_identity`); 32-bit volatile accesses as the transport wants.
    unsafe { core::ptr::read_volatile((base + reg) as *const u32) }
}

fn write(base: usize, reg: usize, value: u32) {
    // SAFETY: as in `read`.
    unsafe { core::ptr::write_volatile((base + reg) as *mut u32, value) }
}

impl Balloon {
    /// The first virtio-balloon device among the device tree's virtio-mmio slots, set up
    /// for free page reporting; `Err` says why there is none.
    ///
    /// # Errors
    /// No device, a legacy transport, or a device without free page reporting.
    pub fn find() -> Result<Self, &'static str> {
        let mut found = Err("no virtio-balloon device in the device tree's virtio-mmio slots");
        dtb::virtio_mmio_slots(|base| {
            if found.is_err()
                && read(base, MAGIC) == VIRTIO_MAGIC
                && read(base, DEVICE_ID) == BALLOON_ID
            {
                found = Self::start(base);
            }
        });
        found
    }

    fn start(base: usize) -> Result<Self, &'static str> {
        if read(base, VERSION) != 2 {
            return Err(
                "a legacy virtio-mmio transport (QEMU: -global virtio-mmio.force-legacy=false)",
            );
        }
        write(base, STATUS, 0);
        write(base, STATUS, ACKNOWLEDGE);
        write(base, STATUS, ACKNOWLEDGE | DRIVER);
        write(base, DEVICE_FEATURES_SEL, 0);
        let low = read(base, DEVICE_FEATURES);
        write(base, DEVICE_FEATURES_SEL, 1);
        let high = read(base, DEVICE_FEATURES);
        if low & F_REPORTING == 0 || high & F_VERSION_1_HIGH == 0 {
            return Err("the balloon offers no free page reporting (QEMU: free-page-reporting=on)");
        }
        write(base, DRIVER_FEATURES_SEL, 0);
        write(base, DRIVER_FEATURES, F_REPORTING);
        write(base, DRIVER_FEATURES_SEL, 1);
        write(base, DRIVER_FEATURES, F_VERSION_1_HIGH);
        write(base, STATUS, ACKNOWLEDGE | DRIVER | FEATURES_OK);
        if read(base, STATUS) & FEATURES_OK == 0 {
            return Err("the balloon refused the features");
        }
        write(base, QUEUE_SEL, REPORTING_QUEUE);
        if (read(base, QUEUE_NUM_MAX) as usize) < QUEUE_SIZE {
            return Err("the reporting queue is too small");
        }
        write(base, QUEUE_NUM, QUEUE_SIZE as u32);
        let rings = &raw const RINGS;
        // SAFETY: only the addresses of the static's fields are taken.
        let (desc, avail, used) = unsafe {
            (
                (&raw const (*rings).desc) as u64,
                (&raw const (*rings).avail) as u64,
                (&raw const (*rings).used) as u64,
            )
        };
        for (reg, addr) in [
            (QUEUE_DESC, desc),
            (QUEUE_DRIVER, avail),
            (QUEUE_DEVICE, used),
        ] {
            write(base, reg, addr as u32);
            write(base, reg + 4, (addr >> 32) as u32);
        }
        write(base, QUEUE_READY, 1);
        write(base, STATUS, ACKNOWLEDGE | DRIVER | FEATURES_OK | DRIVER_OK);
        Ok(Self { base, next: 0 })
    }

    /// Hands `blocks` to the device as one chain of device-writable buffers and waits until
    /// it has used them (discarded their memory). False if it does not within the polls.
    fn report_blocks(&mut self, blocks: &[ReportedBlock]) -> bool {
        let n = blocks.len().min(QUEUE_SIZE);
        if n == 0 {
            return true;
        }
        let rings = &raw mut RINGS;
        for (i, b) in blocks[..n].iter().enumerate() {
            let d = Desc {
                addr: b.pfn.0 * PAGE,
                len: (b.pages() * PAGE) as u32,
                flags: DESC_WRITE | if i + 1 < n { DESC_NEXT } else { 0 },
                next: (i + 1) as u16,
            };
            // SAFETY: the ring memory is this driver's; the device reads it only after the
            // avail index published below (one report at a time: the device is idle now).
            unsafe { core::ptr::write_volatile(&raw mut (*rings).desc[i], d) };
        }
        let slot = usize::from(self.next) % QUEUE_SIZE;
        // SAFETY: as above.
        unsafe { core::ptr::write_volatile(&raw mut (*rings).avail.ring[slot], 0) };
        self.next = self.next.wrapping_add(1);
        fence(Ordering::SeqCst);
        // SAFETY: as above; the index publishes the chain.
        unsafe { core::ptr::write_volatile(&raw mut (*rings).avail.idx, self.next) };
        fence(Ordering::SeqCst);
        write(self.base, QUEUE_NOTIFY, REPORTING_QUEUE);
        for _ in 0..POLLS {
            // SAFETY: the used index, which the device writes.
            let used = unsafe { core::ptr::read_volatile(&raw const (*rings).used.idx) };
            if used == self.next {
                fence(Ordering::SeqCst);
                return true;
            }
            core::hint::spin_loop();
        }
        false
    }
}

impl ReportSink for Balloon {
    fn report(&mut self, blocks: &[ReportedBlock]) -> bool {
        self.report_blocks(blocks)
    }
}
