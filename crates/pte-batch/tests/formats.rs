//! A caller's own `PteFormat` with an impossible geometry is an error from `PteTable::new`,
//! in release builds too, never a shift overflow or a panic.

use pte_batch::format::{MAX_PAGE_SHIFT, MIN_PAGE_SHIFT};
use pte_batch::{Access, AtomicU64, Fault, Prot, PteError, PteFormat, PteTable, X86_64};

/// x86_64's entry bits with a page shift and contiguous block of the test's choosing.
#[derive(Clone, Copy, Debug)]
struct Odd {
    shift: u32,
    cont: usize,
}

impl PteFormat for Odd {
    fn page_shift(self) -> u32 {
        self.shift
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
    fn pfn(self, pte: u64) -> u64 {
        X86_64.pfn(pte)
    }
    fn with_pfn(self, pte: u64, pfn: u64) -> u64 {
        X86_64.with_pfn(pte, pfn)
    }
    fn max_pfn(self) -> u64 {
        X86_64.max_pfn()
    }
    fn mk_pte(self, pfn: u64, prot: Prot) -> Option<u64> {
        X86_64.mk_pte(pfn, prot)
    }
    fn hardware_update(self, pte: u64, access: Access) -> Result<u64, Fault> {
        X86_64.hardware_update(pte, access)
    }
}

#[test]
fn impossible_formats_are_errors() {
    let entries: Vec<AtomicU64> = (0..16).map(|_| AtomicU64::new(0)).collect();
    for shift in [0, 2, 3, 11, 17, 40, 63, 64, 200, u32::MAX] {
        let f = Odd { shift, cont: 1 };
        assert_eq!(f.ptes_per_table(), 0, "shift {shift}");
        assert_eq!(
            PteTable::new(f, 0, &entries).err(),
            Some(PteError::BadFormat {
                page_shift: shift,
                cont_ptes: 1
            })
        );
    }
    for cont in [0, 3, 12, 1 << 20] {
        let f = Odd { shift: 12, cont };
        assert!(matches!(
            PteTable::new(f, 0, &entries),
            Err(PteError::BadFormat { .. })
        ));
    }
    // The edges of the range are fine.
    for shift in [MIN_PAGE_SHIFT, MAX_PAGE_SHIFT] {
        let f = Odd { shift, cont: 16 };
        assert!(PteTable::new(f, 0, &entries).is_ok(), "shift {shift}");
    }
}
