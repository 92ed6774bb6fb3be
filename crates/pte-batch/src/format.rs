//! Page-table entry formats: which bits mean present, young, dirty, writable and contiguous,
//! and what the MMU does to an entry on an access.
//!
//! The bit positions come from the arch crates' host-portable modules
//! ([`arch_arm64::descriptor`], [`arch_x86::pte`]), so an x86 host models arm64 tables and the
//! reverse.

use crate::flush::{Stage1, Stage2, TranslationStage};
use arch_arm64::descriptor as arm;
use arch_arm64::stage2 as s2;
use arch_x86::ept;
use arch_x86::pte as x86;
pub use arch_x86::pte::LeafSize;
use mm_types::{PageSize, Pfn};

/// What a mapping grants, independent of the format: [`PteFormat::mk_pte`] turns it into bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Prot {
    /// Writes are allowed (arm64: DBM, read-only until the first write dirties it).
    pub write: bool,
    /// Mapped young (AF / accessed already set).
    pub young: bool,
    /// Mapped dirty.
    pub dirty: bool,
    /// Accessible from user mode / EL0.
    pub user: bool,
    /// Instructions may be fetched.
    pub exec: bool,
    /// Format-specific attribute bits ORed in as they are (arm64: AttrIndx, SH, nG; x86: PAT,
    /// PCD, PWT, G). Bits that overlap the fields above or the frame number are rejected by
    /// [`PteFormat::mk_pte`].
    pub attrs: u64,
}

/// How an access reached the MMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// A load or an instruction fetch.
    Read,
    /// A store.
    Write,
}

/// Why the MMU refused an access (no entry was changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The entry is not valid / not present.
    NotPresent,
    /// A write to an entry that is neither writable nor dirty-managed.
    Permission,
}

impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::NotPresent => "the entry is not present",
            Self::Permission => {
                "a write through an entry that is neither writable nor dirty-managed"
            }
        })
    }
}

impl core::error::Error for Fault {}

/// A leaf page-table entry format.
///
/// Implemented at stage 1 by [`Arm64`] (one per translation granule) and [`X86_64`], and at
/// stage 2 by [`Arm64Stage2`] (one per granule), [`Ept`] and [`Npt`] (one per leaf size).
/// Every method is a pure function of its arguments; the table applies them with atomics. A
/// format of the caller's own must have a power-of-two `cont_ptes` no larger than a table,
/// and an entry shift at least its page size's: [`PteTable::new`](crate::PteTable::new)
/// checks both.
pub trait PteFormat: Copy + core::fmt::Debug {
    /// The stage of translation the format's tables belong to ([`Stage1`] or [`Stage2`]):
    /// which TLB entries a flush range names.
    type Stage: TranslationStage;

    /// The translation granule: the size of a page-table page's frame and the unit of frame
    /// numbers and flush ranges.
    fn page_size(self) -> PageSize;
    /// log2 of the bytes one entry maps: the granule's shift for last-level page entries
    /// (the default), 21 or 30 for tables of 2 MiB or 1 GiB leaves. A table's entries then map
    /// frames [`PteTable::frames_per_entry`](crate::PteTable::frames_per_entry) apart.
    fn entry_shift(self) -> u32 {
        self.page_size().shift()
    }
    /// Entries in one contiguous block, or 1 where the format has no contiguous hint.
    fn cont_ptes(self) -> usize;
    /// Entries in one page-table page: the granule over 8 bytes.
    fn ptes_per_table(self) -> usize {
        self.page_size().bytes() / 8
    }
    /// Whether the architecture invalidates the TLB after clearing the access flag (arm64
    /// does, for the entries that were young; x86 never does).
    fn flushes_young(self) -> bool;

    /// Whether the entry maps a page.
    fn is_present(self, pte: u64) -> bool;
    /// Whether the access flag is set.
    fn is_young(self, pte: u64) -> bool;
    /// The entry with the access flag cleared.
    fn mkold(self, pte: u64) -> u64;
    /// The entry with the access flag set.
    fn mkyoung(self, pte: u64) -> u64;
    /// Whether the page is dirty (arm64: `(DBM and not RDONLY)` or the software dirty bit).
    fn is_dirty(self, pte: u64) -> bool;
    /// The entry marked dirty (arm64: software dirty, and writable-clean becomes writable-dirty).
    fn mkdirty(self, pte: u64) -> u64;
    /// The entry marked clean (arm64: a DBM entry becomes read-only again).
    fn mkclean(self, pte: u64) -> u64;
    /// Whether writes are allowed (arm64: DBM, Linux's WRITE bit).
    fn is_writable(self, pte: u64) -> bool;
    /// The entry made read-only, keeping a hardware dirty state as software dirty.
    fn wrprotect(self, pte: u64) -> u64;
    /// Whether the contiguous hint is set (never on x86).
    fn is_cont(self, pte: u64) -> bool;
    /// The entry with the contiguous hint set (unchanged on x86).
    fn mkcont(self, pte: u64) -> u64;
    /// The entry with the contiguous hint cleared.
    fn mknoncont(self, pte: u64) -> u64;
    /// The page frame number the entry maps.
    fn pfn(self, pte: u64) -> Pfn;
    /// The entry mapping `pfn` instead; frame bits beyond the field are dropped.
    fn with_pfn(self, pte: u64, pfn: Pfn) -> u64;
    /// The largest frame number an entry can hold.
    fn max_pfn(self) -> Pfn;
    /// A present entry mapping `pfn` with `prot`; `None` if `pfn` does not fit the frame field
    /// (or is not aligned to a leaf larger than a frame) or `prot.attrs` overlaps bits the
    /// format owns.
    fn mk_pte(self, pfn: Pfn, prot: Prot) -> Option<u64>;
    /// What the MMU writes back for an access through `pte` (a hardware-managed access flag,
    /// and hardware dirty management where the format has it), or why it faults.
    ///
    /// # Errors
    /// The [`Fault`] the MMU raises instead: the entry is not present, or the access is a
    /// write through an entry that does not permit it.
    fn hardware_update(self, pte: u64, access: Access) -> Result<u64, Fault>;
}

/// The `PteFormat` methods stage-1 and stage-2 arm64 descriptors share: the granule, the
/// valid, access-flag and contiguous bits and the output-address field sit in the same
/// places at both stages (they differ in permissions and dirty state).
macro_rules! arm64_descriptor_methods {
    ($stage:ty) => {
        type Stage = $stage;
        fn page_size(self) -> PageSize {
            self.granule
        }
        fn cont_ptes(self) -> usize {
            arm::cont_ptes(self.granule)
        }
        fn flushes_young(self) -> bool {
            true
        }
        fn is_present(self, pte: u64) -> bool {
            pte & arm::VALID != 0
        }
        fn is_young(self, pte: u64) -> bool {
            pte & arm::AF != 0
        }
        fn mkold(self, pte: u64) -> u64 {
            pte & !arm::AF
        }
        fn mkyoung(self, pte: u64) -> u64 {
            pte | arm::AF
        }
        fn is_cont(self, pte: u64) -> bool {
            pte & arm::CONT != 0
        }
        fn mkcont(self, pte: u64) -> u64 {
            pte | arm::CONT
        }
        fn mknoncont(self, pte: u64) -> u64 {
            pte & !arm::CONT
        }
        fn pfn(self, pte: u64) -> Pfn {
            arm::pfn(self.granule, pte)
        }
        fn with_pfn(self, pte: u64, pfn: Pfn) -> u64 {
            arm::with_pfn(self.granule, pte, pfn)
        }
        fn max_pfn(self) -> Pfn {
            Pfn(arm::output_address_mask(self.granule) >> self.granule.shift())
        }
    };
}

/// arm64 stage-1 last-level descriptors with the given translation granule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arm64 {
    /// The translation granule: the page size, which fixes `CONT_PTES`.
    pub granule: PageSize,
}

impl Arm64 {
    /// 4 KiB pages, 16-entry (64 KiB) contiguous blocks.
    pub const G4K: Self = Self::new(PageSize::Size4KiB);
    /// 16 KiB pages, 128-entry (2 MiB) contiguous blocks.
    pub const G16K: Self = Self::new(PageSize::Size16KiB);
    /// 64 KiB pages, 32-entry (2 MiB) contiguous blocks.
    pub const G64K: Self = Self::new(PageSize::Size64KiB);

    /// The format for `granule`.
    #[must_use]
    pub const fn new(granule: PageSize) -> Self {
        Self { granule }
    }

    /// Bits `mk_pte` computes itself; `Prot::attrs` may not contain them.
    const OWNED: u64 = arm::VALID
        | arm::PAGE
        | arm::USER
        | arm::RDONLY
        | arm::AF
        | arm::DBM
        | arm::CONT
        | arm::PXN
        | arm::UXN
        | arm::SW_DIRTY;
}

impl PteFormat for Arm64 {
    arm64_descriptor_methods!(Stage1);
    fn is_dirty(self, pte: u64) -> bool {
        arm::is_dirty(pte)
    }
    fn mkdirty(self, pte: u64) -> u64 {
        let pte = pte | arm::SW_DIRTY;
        if pte & arm::DBM != 0 {
            pte & !arm::RDONLY
        } else {
            pte
        }
    }
    fn mkclean(self, pte: u64) -> u64 {
        let pte = pte & !arm::SW_DIRTY;
        if pte & arm::DBM != 0 {
            pte | arm::RDONLY
        } else {
            pte
        }
    }
    fn is_writable(self, pte: u64) -> bool {
        pte & arm::DBM != 0
    }
    fn wrprotect(self, pte: u64) -> u64 {
        let hw_dirty = pte & arm::DBM != 0 && pte & arm::RDONLY == 0;
        let pte = if hw_dirty { pte | arm::SW_DIRTY } else { pte };
        (pte & !arm::DBM) | arm::RDONLY
    }
    fn mk_pte(self, pfn: Pfn, prot: Prot) -> Option<u64> {
        if pfn > self.max_pfn()
            || prot.attrs & (Self::OWNED | arm::output_address_mask(self.granule)) != 0
        {
            return None;
        }
        let mut pte = arm::VALID | arm::PAGE | prot.attrs;
        if prot.user {
            pte |= arm::USER;
        }
        if !prot.exec {
            pte |= arm::PXN | arm::UXN;
        }
        if prot.young {
            pte |= arm::AF;
        }
        // Linux's encoding: a writable page carries DBM and is read-only until dirty.
        pte |= arm::RDONLY;
        if prot.write {
            pte |= arm::DBM;
        }
        if prot.dirty {
            pte = self.mkdirty(pte);
        }
        Some(self.with_pfn(pte, pfn))
    }
    fn hardware_update(self, pte: u64, access: Access) -> Result<u64, Fault> {
        if pte & arm::VALID == 0 {
            return Err(Fault::NotPresent);
        }
        let mut new = pte | arm::AF;
        if access == Access::Write && pte & arm::RDONLY != 0 {
            if pte & arm::DBM == 0 {
                return Err(Fault::Permission);
            }
            new &= !arm::RDONLY;
        }
        Ok(new)
    }
}

/// arm64 stage-2 last-level descriptors (a guest's memory as its hypervisor maps it) with
/// the given translation granule, for an MMU with FEAT_HAFDBS at stage 2 (VTCR_EL2.HA and
/// HD): it sets AF on access and S2AP\[1\] on a write through a DBM descriptor.
///
/// The encoding follows [`Arm64`]'s: a writable page carries DBM and is write-protected
/// (S2AP\[1\] clear) until its first write dirties it; write-protecting keeps a hardware
/// dirty state as the software dirty bit. "User" has no meaning at stage 2 and is ignored;
/// every mapping is readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arm64Stage2 {
    /// The stage-2 translation granule (VTCR_EL2.TG0): the page size, which fixes
    /// `CONT_PTES`.
    pub granule: PageSize,
}

impl Arm64Stage2 {
    /// 4 KiB pages, 16-entry (64 KiB) contiguous blocks.
    pub const G4K: Self = Self::new(PageSize::Size4KiB);
    /// 16 KiB pages, 128-entry (2 MiB) contiguous blocks.
    pub const G16K: Self = Self::new(PageSize::Size16KiB);
    /// 64 KiB pages, 32-entry (2 MiB) contiguous blocks.
    pub const G64K: Self = Self::new(PageSize::Size64KiB);

    /// The format for `granule`.
    #[must_use]
    pub const fn new(granule: PageSize) -> Self {
        Self { granule }
    }

    /// Bits `mk_pte` computes itself; `Prot::attrs` may not contain them.
    const OWNED: u64 = arm::VALID
        | arm::PAGE
        | s2::S2AP_READ
        | s2::S2AP_WRITE
        | arm::AF
        | arm::DBM
        | arm::CONT
        | s2::XN_MASK
        | s2::SW_DIRTY;
}

impl PteFormat for Arm64Stage2 {
    arm64_descriptor_methods!(Stage2);
    fn is_dirty(self, pte: u64) -> bool {
        s2::is_dirty(pte)
    }
    fn mkdirty(self, pte: u64) -> u64 {
        let pte = pte | s2::SW_DIRTY;
        if pte & arm::DBM != 0 {
            pte | s2::S2AP_WRITE
        } else {
            pte
        }
    }
    fn mkclean(self, pte: u64) -> u64 {
        let pte = pte & !s2::SW_DIRTY;
        if pte & arm::DBM != 0 {
            pte & !s2::S2AP_WRITE
        } else {
            pte
        }
    }
    fn is_writable(self, pte: u64) -> bool {
        pte & arm::DBM != 0
    }
    fn wrprotect(self, pte: u64) -> u64 {
        let hw_dirty = pte & arm::DBM != 0 && pte & s2::S2AP_WRITE != 0;
        let pte = if hw_dirty { pte | s2::SW_DIRTY } else { pte };
        pte & !(arm::DBM | s2::S2AP_WRITE)
    }
    fn mk_pte(self, pfn: Pfn, prot: Prot) -> Option<u64> {
        if pfn > self.max_pfn()
            || prot.attrs & (Self::OWNED | arm::output_address_mask(self.granule)) != 0
        {
            return None;
        }
        let mut pte = arm::VALID | arm::PAGE | s2::S2AP_READ | prot.attrs;
        if !prot.exec {
            pte |= s2::XN;
        }
        if prot.young {
            pte |= arm::AF;
        }
        if prot.write {
            pte |= arm::DBM;
        }
        if prot.dirty {
            pte = self.mkdirty(pte);
        }
        Some(self.with_pfn(pte, pfn))
    }
    fn hardware_update(self, pte: u64, access: Access) -> Result<u64, Fault> {
        if pte & arm::VALID == 0 {
            return Err(Fault::NotPresent);
        }
        let mut new = pte | arm::AF;
        if access == Access::Write && pte & s2::S2AP_WRITE == 0 {
            if pte & arm::DBM == 0 {
                return Err(Fault::Permission);
            }
            new |= s2::S2AP_WRITE;
        }
        Ok(new)
    }
}

/// The `PteFormat` methods of a format whose access flag, dirty state and write permission
/// are one bit each, set by the MMU and cleared by software (x86-64, NPT, EPT; arm64 encodes
/// dirty state in its permissions instead).
macro_rules! flag_bit_methods {
    ($young:expr, $dirty:expr, $write:expr) => {
        fn is_young(self, pte: u64) -> bool {
            pte & $young != 0
        }
        fn mkold(self, pte: u64) -> u64 {
            pte & !$young
        }
        fn mkyoung(self, pte: u64) -> u64 {
            pte | $young
        }
        fn is_dirty(self, pte: u64) -> bool {
            pte & $dirty != 0
        }
        fn mkdirty(self, pte: u64) -> u64 {
            pte | $dirty
        }
        fn mkclean(self, pte: u64) -> u64 {
            pte & !$dirty
        }
        fn is_writable(self, pte: u64) -> bool {
            pte & $write != 0
        }
        fn wrprotect(self, pte: u64) -> u64 {
            pte & !$write
        }
    };
}

/// The `PteFormat` methods every x86 leaf format shares (x86-64 at stage 1, NPT and EPT at
/// stage 2): 4 KiB frames, no contiguous hint, no flush for young clearing (x86 never asks
/// for one, and KVM elides it at the second stage), and the frame field of the leaf size
/// (`leaf_size`, an inherent method).
macro_rules! x86_leaf_geometry {
    ($stage:ty) => {
        type Stage = $stage;
        fn page_size(self) -> PageSize {
            x86::PAGE_SIZE
        }
        fn entry_shift(self) -> u32 {
            self.leaf_size().shift()
        }
        fn cont_ptes(self) -> usize {
            1
        }
        fn flushes_young(self) -> bool {
            false
        }
        fn is_cont(self, _pte: u64) -> bool {
            false
        }
        fn mkcont(self, pte: u64) -> u64 {
            pte
        }
        fn mknoncont(self, pte: u64) -> u64 {
            pte
        }
        fn pfn(self, pte: u64) -> Pfn {
            x86::leaf_pfn(self.leaf_size(), pte)
        }
        fn with_pfn(self, pte: u64, pfn: Pfn) -> u64 {
            x86::with_leaf_pfn(self.leaf_size(), pte, pfn)
        }
        fn max_pfn(self) -> Pfn {
            Pfn(self.leaf_size().frame_mask() >> x86::PFN_SHIFT)
        }
    };
}

/// The `PteFormat` methods the x86-64 entry format shares at both stages (stage 1, and AMD
/// NPT at stage 2): the geometry, the bits and the MMU's updates.
macro_rules! x86_entry_methods {
    ($stage:ty) => {
        x86_leaf_geometry!($stage);
        fn is_present(self, pte: u64) -> bool {
            pte & x86::PRESENT != 0
        }
        flag_bit_methods!(x86::ACCESSED, x86::DIRTY, x86::WRITABLE);
        fn hardware_update(self, pte: u64, access: Access) -> Result<u64, Fault> {
            if pte & x86::PRESENT == 0 {
                return Err(Fault::NotPresent);
            }
            match access {
                Access::Read => Ok(pte | x86::ACCESSED),
                Access::Write if pte & x86::WRITABLE != 0 => Ok(pte | x86::ACCESSED | x86::DIRTY),
                Access::Write => Err(Fault::Permission),
            }
        }
    };
}

/// Whether `pfn` can start a leaf of `leaf_frames` frames in a frame field ending at `max`.
fn leaf_fits(pfn: Pfn, leaf_frames: u64, max: Pfn) -> bool {
    pfn <= max && pfn.0.is_multiple_of(leaf_frames)
}

/// x86_64 last-level entries (4 KiB pages, no contiguous hint).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct X86_64;

impl X86_64 {
    /// Bits `mk_pte` computes itself; `Prot::attrs` may not contain them.
    const OWNED: u64 =
        x86::PRESENT | x86::WRITABLE | x86::USER | x86::ACCESSED | x86::DIRTY | x86::NO_EXECUTE;

    /// Stage-1 tables of this crate are last-level page tables.
    const fn leaf_size(self) -> LeafSize {
        LeafSize::Size4KiB
    }
}

impl PteFormat for X86_64 {
    x86_entry_methods!(Stage1);
    fn mk_pte(self, pfn: Pfn, prot: Prot) -> Option<u64> {
        if pfn > self.max_pfn() || prot.attrs & (Self::OWNED | x86::PFN_MASK) != 0 {
            return None;
        }
        let mut pte = x86::PRESENT | prot.attrs;
        if prot.write {
            pte |= x86::WRITABLE;
        }
        if prot.user {
            pte |= x86::USER;
        }
        if !prot.exec {
            pte |= x86::NO_EXECUTE;
        }
        if prot.young {
            pte |= x86::ACCESSED;
        }
        if prot.dirty {
            pte |= x86::DIRTY;
        }
        Some(x86::with_pfn(pte, pfn))
    }
}

/// AMD NPT (nested page tables) leaf entries of one size: the x86-64 format at the second
/// stage, guest-physical to host-physical. The processor treats every nested walk as a
/// user access, so every entry carries the user bit whatever [`Prot::user`] says; 2 MiB and
/// 1 GiB leaves carry the page-size bit. Like KVM on x86, clearing the accessed bit asks for
/// no TLB flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Npt {
    /// What one entry maps: the table's level.
    pub leaf: LeafSize,
}

impl Npt {
    /// Last-level tables of 4 KiB pages.
    pub const L4K: Self = Self::new(LeafSize::Size4KiB);
    /// Level-2 tables of 2 MiB leaves.
    pub const L2M: Self = Self::new(LeafSize::Size2MiB);
    /// Level-3 tables of 1 GiB leaves.
    pub const L1G: Self = Self::new(LeafSize::Size1GiB);

    /// The format of tables of `leaf` entries.
    #[must_use]
    pub const fn new(leaf: LeafSize) -> Self {
        Self { leaf }
    }

    const fn leaf_size(self) -> LeafSize {
        self.leaf
    }
}

impl PteFormat for Npt {
    x86_entry_methods!(Stage2);
    fn mk_pte(self, pfn: Pfn, prot: Prot) -> Option<u64> {
        let huge = if self.leaf.is_huge() { x86::HUGE } else { 0 };
        if !leaf_fits(pfn, self.leaf.frames(), self.max_pfn()) || prot.attrs & huge != 0 {
            return None;
        }
        let pte = X86_64.mk_pte(pfn, Prot { user: true, ..prot })?;
        Some(pte | huge)
    }
}

/// Intel EPT leaf entries of one size, for an EPTP with accessed and dirty flags enabled: the
/// processor sets the accessed bit (8) on any access and the dirty bit (9) on a write. Every
/// mapping is readable; [`Prot::user`] has no meaning at this stage and is ignored; 2 MiB and
/// 1 GiB leaves carry bit 7. Like KVM on x86, clearing the accessed bit asks for no TLB flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ept {
    /// What one entry maps: the table's level.
    pub leaf: LeafSize,
}

impl Ept {
    /// Last-level tables of 4 KiB pages.
    pub const L4K: Self = Self::new(LeafSize::Size4KiB);
    /// Level-2 tables of 2 MiB leaves.
    pub const L2M: Self = Self::new(LeafSize::Size2MiB);
    /// Level-3 tables of 1 GiB leaves.
    pub const L1G: Self = Self::new(LeafSize::Size1GiB);

    /// The format of tables of `leaf` entries.
    #[must_use]
    pub const fn new(leaf: LeafSize) -> Self {
        Self { leaf }
    }

    /// Bits `mk_pte` computes itself; `Prot::attrs` may not contain them (the memory type
    /// and the ignore-PAT bit are the caller's).
    const OWNED: u64 = ept::RWX_MASK | ept::HUGE | ept::ACCESSED | ept::DIRTY | ept::USER_EXEC;

    const fn leaf_size(self) -> LeafSize {
        self.leaf
    }
}

impl PteFormat for Ept {
    x86_leaf_geometry!(Stage2);
    fn is_present(self, pte: u64) -> bool {
        ept::is_present(pte)
    }
    flag_bit_methods!(ept::ACCESSED, ept::DIRTY, ept::WRITE);
    fn mk_pte(self, pfn: Pfn, prot: Prot) -> Option<u64> {
        if !leaf_fits(pfn, self.leaf.frames(), self.max_pfn())
            || prot.attrs & (Self::OWNED | x86::PFN_MASK) != 0
        {
            return None;
        }
        let mut pte = ept::READ | prot.attrs;
        if self.leaf.is_huge() {
            pte |= ept::HUGE;
        }
        if prot.write {
            pte |= ept::WRITE;
        }
        if prot.exec {
            pte |= ept::EXEC;
        }
        if prot.young {
            pte |= ept::ACCESSED;
        }
        if prot.dirty {
            pte |= ept::DIRTY;
        }
        Some(self.with_pfn(pte, pfn))
    }
    fn hardware_update(self, pte: u64, access: Access) -> Result<u64, Fault> {
        if !ept::is_present(pte) {
            return Err(Fault::NotPresent);
        }
        let (needed, set) = match access {
            Access::Read => (ept::READ, ept::ACCESSED),
            Access::Write => (ept::WRITE, ept::ACCESSED | ept::DIRTY),
        };
        if pte & needed == 0 {
            return Err(Fault::Permission);
        }
        Ok(pte | set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_format<F: PteFormat>(f: F) {
        let rw = Prot {
            write: true,
            ..Prot::default()
        };
        let step = 1 << (f.entry_shift() - f.page_size().shift());
        let (p3, p7) = (Pfn(3 * step), Pfn(7 * step));
        let clean = f.mk_pte(p7, rw).unwrap();
        assert!(f.is_present(clean) && f.is_writable(clean));
        assert!(!f.is_young(clean) && !f.is_dirty(clean) && !f.is_cont(clean));
        assert_eq!(f.pfn(clean), p7);
        // A read sets only the access flag; a write also dirties.
        let read = f.hardware_update(clean, Access::Read).unwrap();
        assert!(f.is_young(read) && !f.is_dirty(read));
        let written = f.hardware_update(clean, Access::Write).unwrap();
        assert!(f.is_young(written) && f.is_dirty(written));
        // Clearing AF never touches dirty; clean/dirty round-trip.
        assert!(f.is_dirty(f.mkold(written)) && !f.is_young(f.mkold(written)));
        assert!(!f.is_dirty(f.mkclean(written)));
        assert_eq!(f.mkdirty(clean), f.mkold(f.mkdirty(f.mkclean(written))));
        // Write-protecting keeps the dirty state and makes writes fault.
        let wp = f.wrprotect(written);
        assert!(f.is_dirty(wp) && !f.is_writable(wp));
        assert_eq!(f.hardware_update(wp, Access::Write), Err(Fault::Permission));
        let ro = f.mk_pte(p7, Prot::default()).unwrap();
        assert_eq!(f.hardware_update(ro, Access::Write), Err(Fault::Permission));
        assert_eq!(f.hardware_update(0, Access::Read), Err(Fault::NotPresent));
        // Out-of-range frames and owned attribute bits are refused.
        assert!(f.mk_pte(Pfn(f.max_pfn().0 + 1), rw).is_none());
        assert!(f.mk_pte(f.max_pfn(), rw).is_some());
        assert!(
            f.mk_pte(
                Pfn(0),
                Prot {
                    attrs: f.mkyoung(0),
                    ..rw
                }
            )
            .is_none()
        );
        assert_eq!(f.with_pfn(f.mk_pte(p3, rw).unwrap(), p7), clean);
        // A leaf larger than a frame starts at a frame aligned to it.
        assert_eq!(f.mk_pte(Pfn(p7.0 + 1), rw).is_none(), step > 1);
        assert_eq!(f.ptes_per_table() << 3, f.page_size().bytes());
    }

    #[test]
    fn formats_behave_as_reference_md_says() {
        for g in PageSize::ALL {
            check_format(Arm64::new(g));
            check_format(Arm64Stage2::new(g));
        }
        check_format(X86_64);
        for leaf in LeafSize::ALL {
            check_format(Ept::new(leaf));
            check_format(Npt::new(leaf));
        }
    }

    #[test]
    fn arm64_encoding_is_linuxs() {
        let f = Arm64::G4K;
        let rw = Prot {
            write: true,
            ..Prot::default()
        };
        let clean = f.mk_pte(Pfn(1), rw).unwrap();
        assert_eq!(clean & (arm::DBM | arm::RDONLY), arm::DBM | arm::RDONLY);
        let dirty = f.hardware_update(clean, Access::Write).unwrap();
        assert_eq!(
            dirty & (arm::DBM | arm::RDONLY | arm::AF),
            arm::DBM | arm::AF
        );
        // wrprotect moves the hardware dirty state into the software bit.
        assert_ne!(f.wrprotect(dirty) & arm::SW_DIRTY, 0);
        assert!(f.is_cont(f.mkcont(clean)) && !f.is_cont(f.mknoncont(f.mkcont(clean))));
        assert_eq!(Arm64::G16K.cont_ptes(), 128);
        assert_eq!(Arm64::G64K.ptes_per_table(), 8192);
        assert!(!X86_64.is_cont(X86_64.mkcont(1)));
        // Stage 2: hardware dirty sets the write permission instead of clearing read-only.
        let s = Arm64Stage2::G4K;
        let clean = s.mk_pte(Pfn(1), rw).unwrap();
        assert_eq!(
            clean & (arm::DBM | s2::S2AP_WRITE | s2::S2AP_READ),
            arm::DBM | s2::S2AP_READ
        );
        let dirty = s.hardware_update(clean, Access::Write).unwrap();
        assert_eq!(
            dirty & (arm::DBM | s2::S2AP_WRITE | arm::AF),
            arm::DBM | s2::S2AP_WRITE | arm::AF
        );
        assert_eq!(
            s.wrprotect(dirty) & (s2::SW_DIRTY | s2::S2AP_WRITE),
            s2::SW_DIRTY
        );
        assert_eq!(
            s.mk_pte(Pfn(1), Prot::default()).unwrap() & s2::XN_MASK,
            s2::XN
        );
        assert_eq!(X86_64.cont_ptes(), 1);
    }

    #[test]
    fn second_stage_x86_encodings() {
        let rw = Prot {
            write: true,
            ..Prot::default()
        };
        // EPT: readable always, A/D at bits 8/9, bit 7 on large leaves, user ignored.
        let e = Ept::L2M
            .mk_pte(Pfn(512), Prot { user: true, ..rw })
            .unwrap();
        assert_eq!(e, ept::READ | ept::WRITE | ept::HUGE | (512 << 12));
        assert_eq!(
            Ept::L4K.hardware_update(e & !ept::HUGE, Access::Write),
            Ok((e & !ept::HUGE) | ept::ACCESSED | ept::DIRTY)
        );
        assert_eq!(
            (Ept::L1G.leaf.frames(), Ept::L1G.entry_shift()),
            (1 << 18, 30)
        );
        // NPT: the user bit always, PS on large leaves, bit 12 not a frame bit there.
        let n = Npt::L2M.mk_pte(Pfn(1024), rw).unwrap();
        assert_eq!(n & (x86::USER | x86::HUGE), x86::USER | x86::HUGE);
        assert_eq!(Npt::L2M.pfn(n | 1 << 12), Pfn(1024));
        assert!(
            Npt::L2M
                .mk_pte(
                    Pfn(0),
                    Prot {
                        attrs: x86::HUGE,
                        ..rw
                    }
                )
                .is_none()
        );
        assert!(
            Npt::L4K
                .mk_pte(
                    Pfn(0),
                    Prot {
                        attrs: x86::PAT,
                        ..rw
                    }
                )
                .is_some()
        );
        assert!(!Ept::L4K.flushes_young() && !Npt::L4K.flushes_young());
        assert!(Arm64Stage2::G4K.flushes_young());
    }
}
