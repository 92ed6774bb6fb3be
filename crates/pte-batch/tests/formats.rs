//! A caller's own `PteFormat` with an impossible geometry is an error from `PteTable::new`,
//! in release builds too, never an overflow or a panic. (The page size is a closed
//! `PageSize`, so only the contiguous block and the entry shift can be wrong.)

use pte_batch::mm_types::{PageSize, Pfn, VirtAddr};
use pte_batch::{Access, AtomicU64, Fault, Prot, PteError, PteFormat, PteTable, X86_64};

/// x86_64's entry bits with a page size, contiguous block and entry shift of the test's
/// choosing.
#[derive(Clone, Copy, Debug)]
struct Odd {
    size: PageSize,
    cont: usize,
    shift: Option<u32>,
}

impl PteFormat for Odd {
    type Stage = pte_batch::Stage1;
    fn page_size(self) -> PageSize {
        self.size
    }
    fn entry_shift(self) -> u32 {
        self.shift.unwrap_or(self.size.shift())
    }
    fn cont_ptes(self) -> usize {
        self.cont
    }
    fn flushes_young(self) -> bool {
        X86_64.flushes_young()
    }
    fn is_present(self, pte: u64) -> bool {
        X86_64.is_present(pte)
    }
    fn is_young(self, pte: u64) -> bool {
        X86_64.is_young(pte)
    }
    fn mkold(self, pte: u64) -> u64 {
        X86_64.mkold(pte)
    }
    fn mkyoung(self, pte: u64) -> u64 {
        X86_64.mkyoung(pte)
    }
    fn is_dirty(self, pte: u64) -> bool {
        X86_64.is_dirty(pte)
    }
    fn mkdirty(self, pte: u64) -> u64 {
        X86_64.mkdirty(pte)
    }
    fn mkclean(self, pte: u64) -> u64 {
        X86_64.mkclean(pte)
    }
    fn is_writable(self, pte: u64) -> bool {
        X86_64.is_writable(pte)
    }
    fn wrprotect(self, pte: u64) -> u64 {
        X86_64.wrprotect(pte)
    }
    fn is_cont(self, pte: u64) -> bool {
        X86_64.is_cont(pte)
    }
    fn mkcont(self, pte: u64) -> u64 {
        X86_64.mkcont(pte)
    }
    fn mknoncont(self, pte: u64) -> u64 {
        X86_64.mknoncont(pte)
    }
    fn pfn(self, pte: u64) -> Pfn {
        X86_64.pfn(pte)
    }
    fn with_pfn(self, pte: u64, pfn: Pfn) -> u64 {
        X86_64.with_pfn(pte, pfn)
    }
    fn max_pfn(self) -> Pfn {
        X86_64.max_pfn()
    }
    fn mk_pte(self, pfn: Pfn, prot: Prot) -> Option<u64> {
        X86_64.mk_pte(pfn, prot)
    }
    fn hardware_update(self, pte: u64, access: Access) -> Result<u64, Fault> {
        X86_64.hardware_update(pte, access)
    }
}

#[test]
fn impossible_formats_are_errors() {
    let entries: Vec<AtomicU64> = (0..16).map(|_| AtomicU64::new(0)).collect();
    for size in PageSize::ALL {
        for cont in [0, 3, 12, size.bytes() / 4, 1 << 20] {
            let f = Odd {
                size,
                cont,
                shift: None,
            };
            assert_eq!(
                PteTable::new(f, VirtAddr(0), &entries).err(),
                Some(PteError::BadFormat { cont_ptes: cont }),
                "{size}, {cont}-entry blocks"
            );
        }
        // A block of one entry, of 16, and of a whole table are fine.
        for cont in [1, 16, size.bytes() / 8] {
            let f = Odd {
                size,
                cont,
                shift: None,
            };
            let entries: Vec<AtomicU64> = (0..cont).map(|_| AtomicU64::new(0)).collect();
            assert!(
                PteTable::new(f, VirtAddr(0), &entries).is_ok(),
                "{size}, {cont}"
            );
        }
    }
}

#[test]
fn impossible_entry_shifts_are_errors() {
    let entries: Vec<AtomicU64> = (0..16).map(|_| AtomicU64::new(0)).collect();
    for size in PageSize::ALL {
        for shift in [0, size.shift() - 1, 41, 63, 64, 200, u32::MAX] {
            let f = Odd {
                size,
                cont: 1,
                shift: Some(shift),
            };
            assert_eq!(
                PteTable::new(f, VirtAddr(0), &entries).err(),
                Some(PteError::BadFormat { cont_ptes: 1 }),
                "{size}, entries of 2^{shift} bytes"
            );
        }
        // Entries of a page, of 2 MiB and of 1 GiB are fine; the base follows the entry size.
        for shift in [size.shift(), 21, 30] {
            let f = Odd {
                size,
                cont: 1,
                shift: Some(shift),
            };
            let table = PteTable::new(f, VirtAddr(1 << shift), &entries).unwrap();
            assert_eq!(table.frames_per_entry(), 1 << (shift - size.shift()));
        }
    }
}
