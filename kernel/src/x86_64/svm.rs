//! The x86_64 kernel as an AMD SVM host with nested paging, where the CPU has both (QEMU's
//! TCG `-cpu max` does): a guest in 32-bit protected mode without paging, whose RAM the
//! hypervisor maps in NPT on demand with zeroed frames and ages with pte-batch ([`Npt`])
//! between the guest's phases, as `crate::steps::guest` checks. Intel's EPT needs VMX, which
//! TCG does not emulate: EPT is verified by the model and proptest only.
//!
//! The world switch is `VMRUN` on a VMCB from the zone (intercepting `VMMCALL`, the guest's
//! "done", and shutdown); a nested page fault (`#VMEXIT(NPF)`) in the guest's RAM maps a
//! page. Clearing NPT's accessed bit asks for no TLB flush, as KVM on x86 elides it; the
//! VMCB's TLB control flushes the guest's ASID at the start of each command so the next
//! phase's accesses set the accessed bits again (under TCG every world switch flushes
//! anyway).

use core::arch::asm;

use buddy_sim::Pfn;
use pte_batch::format::Npt;
use pte_batch::mm_types::{PageRange, VirtAddr};
use pte_batch::{Prot, PteTable, Stage2, TlbFlush, WorkingSet};

use super::Machine;
use crate::steps::{
    self, GUEST_PAGES, GUEST_RAM, Guest, GuestExit, GuestRam, KernelZone, PAGE, Step, Touch, fail,
};

/// `EFER` and its SVM enable bit.
const MSR_EFER: u32 = 0xC000_0080;
const EFER_SVME: u64 = 1 << 12;
/// The host save area's physical address.
const MSR_VM_HSAVE_PA: u32 = 0xC001_0117;

/// VMCB control-area offsets (AMD APM vol. 2, appendix B).
mod vmcb {
    pub const INTERCEPT_MISC1: usize = 0x00C;
    pub const INTERCEPT_MISC2: usize = 0x010;
    pub const ASID: usize = 0x058;
    pub const TLB_CONTROL: usize = 0x05C;
    pub const EXITCODE: usize = 0x070;
    pub const EXITINFO2: usize = 0x080;
    pub const NP_ENABLE: usize = 0x090;
    pub const N_CR3: usize = 0x0B0;
    /// Save area: segment registers, 16 bytes each from ES.
    pub const ES: usize = 0x400;
    pub const CS: usize = 0x410;
    pub const SS: usize = 0x420;
    pub const DS: usize = 0x430;
    pub const CPL: usize = 0x4CB;
    pub const EFER: usize = 0x4D0;
    pub const CR0: usize = 0x558;
    pub const DR7: usize = 0x560;
    pub const DR6: usize = 0x568;
    pub const RFLAGS: usize = 0x570;
    pub const RIP: usize = 0x578;
    pub const RAX: usize = 0x5F8;
    pub const G_PAT: usize = 0x668;
}

/// Intercepts: shutdown (misc1 bit 31); VMRUN (required) and VMMCALL (misc2 bits 0, 1).
const INTERCEPT_SHUTDOWN: u32 = 1 << 31;
const INTERCEPT_VMRUN_VMMCALL: u32 = 0b11;
/// Exit codes.
const EXIT_VMMCALL: u64 = 0x81;
const EXIT_NPF: u64 = 0x400;
/// TLB control: flush the guest's ASID on the next VMRUN.
const TLB_FLUSH_ASID: u8 = 3;

/// Non-leaf NPT entries: present, writable, user (nested walks are user accesses).
const NPT_TABLE: u64 = 0b111;

/// The guest's general-purpose registers the hardware does not keep in the VMCB.
#[repr(C)]
#[derive(Default)]
struct Gprs {
    rbx: u64,
    rcx: u64,
    rdx: u64,
    rsi: u64,
    rdi: u64,
}

unsafe extern "C" {
    /// Runs the guest of the VMCB at physical address `vmcb` with `gprs` until its next
    /// `#VMEXIT`, saving its registers back.
    fn svm_run(gprs: *mut Gprs, vmcb: u64);
    /// The guest's code (`.guest_text`, 32-bit).
    fn svm_guest_main();
    static __guest_start: u8;
    static __guest_end: u8;
}

core::arch::global_asm!(
    r#"
.section .text, "ax"
.global svm_run
svm_run:
    push    rbx
    push    rbp
    push    r12
    push    r13
    push    r14
    push    r15
    push    rdi
    mov     rax, rsi
    mov     rbx, [rdi]
    mov     rcx, [rdi + 8]
    mov     rdx, [rdi + 16]
    mov     rsi, [rdi + 24]
    mov     rdi, [rdi + 32]
    clgi
    vmrun   rax
    push    rdi
    mov     rdi, [rsp + 8]
    mov     [rdi], rbx
    mov     [rdi + 8], rcx
    mov     [rdi + 16], rdx
    mov     [rdi + 24], rsi
    pop     rsi
    mov     [rdi + 32], rsi
    stgi
    pop     rdi
    pop     r15
    pop     r14
    pop     r13
    pop     r12
    pop     rbp
    pop     rbx
    ret

// The guest, 32-bit protected mode without paging: eax the address of the first page, ecx
// how many, edx the stride in bytes, ebx whether to write. Each page's first word must be 0
// or its own address (the stamp); written pages get the stamp. Then `vmmcall` with edi 0,
// or with edi 1 and eax the page that held old data.
.section .guest_text, "ax"
.balign 4096
.code32
.global svm_guest_main
svm_guest_main:
    test    ecx, ecx
    jz      3f
2:  mov     esi, [eax]
    test    esi, esi
    jz      4f
    cmp     esi, eax
    jne     5f
4:  test    ebx, ebx
    jz      6f
    mov     [eax], eax
6:  add     eax, edx
    dec     ecx
    jnz     2b
3:  xor     edi, edi
    vmmcall
    jmp     svm_guest_main
5:  mov     edi, 1
    vmmcall
    jmp     svm_guest_main
.code64
"#
);

/// Whether the CPU has SVM (CPUID 8000_0001h ECX bit 2) with nested paging (8000_000Ah EDX
/// bit 0).
pub fn has_npt() -> bool {
    let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
    max >= 0x8000_000A
        && core::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 2) != 0
        && core::arch::x86_64::__cpuid(0x8000_000A).edx & 1 != 0
}

fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: EFER and VM_HSAVE_PA exist on every CPU with SVM (checked by the caller).
    unsafe { asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    u64::from(lo) | (u64::from(hi) << 32)
}

/// # Safety
/// `value` is valid for `msr`, and what it enables is set up.
unsafe fn wrmsr(msr: u32, value: u64) {
    // SAFETY: forwarded from the caller.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32,
            options(nostack));
    }
}

/// Writes `value` at byte `offset` of the frame `pfn` (identity-mapped, owned here).
fn poke<T>(pfn: Pfn, offset: usize, value: T) {
    // SAFETY: `pfn` is a zone frame this module allocated (identity-mapped); every offset
    // used is a field of the VMCB or a table entry inside the page, aligned for `T`.
    unsafe {
        ((pfn.0 * PAGE) as *mut u8)
            .add(offset)
            .cast::<T>()
            .write_volatile(value)
    };
}

fn peek(pfn: Pfn, offset: usize) -> u64 {
    // SAFETY: as `poke`.
    unsafe {
        ((pfn.0 * PAGE) as *const u8)
            .add(offset)
            .cast::<u64>()
            .read_volatile()
    }
}

/// A flat 4 GiB segment for the VMCB: selector, attributes (type, S, P, DB, G), limit, base.
fn segment(vmcb_pfn: Pfn, at: usize, selector: u16, kind: u16) {
    poke(vmcb_pfn, at, selector);
    poke(
        vmcb_pfn,
        at + 2,
        kind | (1 << 4) | (1 << 7) | (1 << 10) | (1 << 11),
    );
    poke(vmcb_pfn, at + 4, u32::MAX);
    poke(vmcb_pfn, at + 8, 0u64);
}

/// The guest: its VMCB and the registers VMRUN does not keep.
struct SvmGuest {
    vmcb: Pfn,
    gprs: Gprs,
}

impl Guest for SvmGuest {
    fn enter(&mut self, command: Option<Touch>) -> GuestExit {
        if let Some(t) = command {
            poke(self.vmcb, vmcb::RAX, t.first_ipa());
            self.gprs.rcx = t.count as u64;
            self.gprs.rdx = t.stride_bytes();
            self.gprs.rbx = u64::from(t.write);
        }
        // Each command (after an aging pass) starts with the guest's ASID flushed, so its
        // accesses set the accessed bits the pass cleared: KVM elides this flush, the exact
        // checks need it. Resuming after a fault flushes nothing.
        let tlb = if command.is_some() { TLB_FLUSH_ASID } else { 0 };
        poke(self.vmcb, vmcb::TLB_CONTROL, tlb);
        // SAFETY: EFER.SVME and the host save area are set, the VMCB describes a guest whose
        // code and RAM are in NPT, and it leaves through the intercepts only.
        unsafe { svm_run(&mut self.gprs, self.vmcb.0 * PAGE) };
        let (code, rip) = (peek(self.vmcb, vmcb::EXITCODE), peek(self.vmcb, vmcb::RIP));
        match code {
            EXIT_VMMCALL => {
                poke(self.vmcb, vmcb::RIP, rip + 3); // past the 3-byte VMMCALL
                if self.gprs.rdi == 0 {
                    GuestExit::Done
                } else {
                    GuestExit::OldData(peek(self.vmcb, vmcb::RAX) & 0xffff_ffff)
                }
            }
            EXIT_NPF => GuestExit::Fault(peek(self.vmcb, vmcb::EXITINFO2)),
            _ => GuestExit::Other(code, rip),
        }
    }
}

/// NPT invalidations for pte-batch's tokens: x86 asks for none on young clearing; the
/// teardown's unmap asks for one, which flushing the ASID at the next VMRUN would perform
/// (there is none: the guest is gone). Counted.
struct AsidFlush {
    flushes: u64,
}

impl TlbFlush<Stage2> for AsidFlush {
    fn flush_range(&mut self, _: PageRange) {
        self.flushes += 1;
    }
}

/// Runs the SVM guest's phases if the CPU has nested paging, else says why not; every frame
/// goes back to the zone.
pub fn run(zone: &'static KernelZone) {
    if !has_npt() {
        println!(
            "npt: this CPU has no SVM with nested paging: EPT and NPT are verified by the model and proptest only"
        );
        return;
    }
    let clearer = steps::clearer();
    let alloc = || steps::alloc_zeroed::<Machine>(zone, 0, 0, &clearer);
    // VMCB, host save area, PML4, PDPT, and a PD and a PT each for the code and the RAM.
    let [vmcb, hsave, pml4, pdpt, pd_code, pt_code, pd_ram, pt_ram] =
        core::array::from_fn(|_| alloc());
    let code = core::ptr::addr_of!(__guest_start) as u64;
    let code_pages = (core::ptr::addr_of!(__guest_end) as u64 - code).div_ceil(PAGE) as usize;
    let table = |pfn: Pfn| (pfn.0 * PAGE) | NPT_TABLE;
    let index = |addr: u64, shift: u32| ((addr >> shift) & 511) as usize * 8;
    poke(pml4, 0, table(pdpt));
    poke(pdpt, index(code, 30), table(pd_code));
    poke(pd_code, index(code, 21), table(pt_code));
    poke(pdpt, index(GUEST_RAM, 30), table(pd_ram));
    poke(pd_ram, index(GUEST_RAM, 21), table(pt_ram));
    let leaf = |pfn: Pfn, base: u64| {
        // SAFETY: a zone frame allocated above, identity-mapped, used only as this table
        // (atomically, by pte-batch and the nested walker) until it is freed below, after
        // the last use of the table.
        let entries = unsafe {
            core::slice::from_raw_parts((pfn.0 * PAGE) as *const pte_batch::AtomicU64, 512)
        };
        PteTable::new(Npt::L4K, VirtAddr(base), entries)
            .unwrap_or_else(|e| fail::<Machine>(Step::Mapping, format_args!("NPT table: {e}")))
    };
    let code_table = leaf(pt_code, code & !((2 << 20) - 1));
    let guest_code = Prot {
        exec: true,
        young: true,
        ..Prot::default()
    };
    code_table
        .set_ptes(
            index(code, 12) / 8,
            Pfn(code / PAGE),
            code_pages,
            guest_code,
        )
        .unwrap_or_else(|e| fail::<Machine>(Step::Mapping, format_args!("guest code: {e}")));

    // The guest: 32-bit flat protected mode, paging off, interrupts off.
    poke(vmcb, vmcb::INTERCEPT_MISC1, INTERCEPT_SHUTDOWN);
    poke(vmcb, vmcb::INTERCEPT_MISC2, INTERCEPT_VMRUN_VMMCALL);
    poke(vmcb, vmcb::ASID, 1u32);
    poke(vmcb, vmcb::NP_ENABLE, 1u64);
    poke(vmcb, vmcb::N_CR3, pml4.0 * PAGE);
    segment(vmcb, vmcb::CS, 0x08, 0xB);
    for seg in [vmcb::ES, vmcb::SS, vmcb::DS] {
        segment(vmcb, seg, 0x10, 0x3);
    }
    poke(vmcb, vmcb::CPL, 0u8);
    poke(vmcb, vmcb::EFER, EFER_SVME);
    poke(vmcb, vmcb::CR0, 0x11u64); // PE, ET
    poke(vmcb, vmcb::DR7, 0x400u64);
    poke(vmcb, vmcb::DR6, 0xffff_0ff0u64);
    poke(vmcb, vmcb::RFLAGS, 0x2u64);
    poke(vmcb, vmcb::RIP, svm_guest_main as *const () as u64);
    poke(vmcb, vmcb::G_PAT, 0x0007_0406_0007_0406u64);
    // SAFETY: the CPU has SVM; the host save area is a zone frame of ours for as long as
    // SVM stays enabled (it is disabled before the frame is freed).
    unsafe {
        wrmsr(MSR_VM_HSAVE_PA, hsave.0 * PAGE);
        wrmsr(MSR_EFER, rdmsr(MSR_EFER) | EFER_SVME);
    }
    println!(
        "npt: SVM with nested paging on this CPU (QEMU's TCG emulates it): the x86_64 kernel as an SVM host; guest RAM at GPA {GUEST_RAM:#x}, {GUEST_PAGES} pages, none mapped (EPT needs VMX, which TCG lacks: verified by the model and proptest only)"
    );

    let mut guest = SvmGuest {
        vmcb,
        gprs: Gprs::default(),
    };
    let mut ram = GuestRam::new(leaf(pt_ram, GUEST_RAM), 0);
    let mut storage = steps::working_set_storage();
    let mut ws = WorkingSet::new(&mut storage)
        .unwrap_or_else(|e| fail::<Machine>(Step::Aging, format_args!("{e}")));
    let mut tlb = AsidFlush { flushes: 0 };
    let publish = || core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    ram.phases::<Machine>(&mut guest, &mut ws, &mut tlb, zone, &clearer, publish);
    let faults = ram.faults;
    ram.tear_down::<Machine>(&mut tlb, zone);
    // SAFETY: no guest runs any more; SVM off before its host save area is freed.
    unsafe { wrmsr(MSR_EFER, rdmsr(MSR_EFER) & !EFER_SVME) };
    for pfn in [vmcb, hsave, pml4, pdpt, pd_code, pt_code, pd_ram, pt_ram] {
        // SAFETY: allocated by this step for the guest, which runs no more (SVM is off).
        unsafe { steps::free_block::<Machine>(zone, 0, pfn.0, 0, Step::Free) };
    }
    println!(
        "npt: {faults} nested page faults served with zeroed frames, {} invalidation asked for (the teardown's); guest frames and NPT tables given back",
        tlb.flushes
    );
}
