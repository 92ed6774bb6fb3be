//! The NUMA layout from ACPI: the RSDP (the PVH start info's `rsdp_paddr`, else the BIOS
//! area's signature), its RSDT or XSDT, and in them the SRAT (each memory range's and each
//! local APIC's proximity domain) and the SLIT (the distances between domains). QEMU builds
//! both for `-numa node,...` (the SLIT with `-numa dist,...`); without `-numa` there is no
//! SRAT, and the layout is one node.

use crate::steps::NodeMap;

/// Where the BIOS keeps the RSDP when the start info does not say: its read-only area.
const BIOS_AREA: core::ops::Range<u64> = 0xe_0000..0x10_0000;

/// The boot map identity-maps the first GiB: tables past it are not read.
const MAPPED: u64 = 1 << 30;

/// The `len` bytes at physical address `addr`, if they lie below [`MAPPED`].
///
/// # Safety
/// Nothing writes `[addr, addr + len)` while the slice lives (the firmware's tables, or the
/// BIOS area, which no one writes after boot).
unsafe fn bytes(addr: u64, len: usize) -> Option<&'static [u8]> {
    let end = addr.checked_add(len as u64)?;
    if end > MAPPED {
        return None;
    }
    // SAFETY: below the first GiB, which the boot map identity-maps (and the kernel's map
    // too), and nothing writes it: the caller's contract.
    Some(unsafe { core::slice::from_raw_parts(addr as usize as *const u8, len) })
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Whether `b`'s bytes sum to 0 (ACPI's checksum).
fn sums_to_zero(b: &[u8]) -> bool {
    b.iter().fold(0u8, |s, &x| s.wrapping_add(x)) == 0
}

/// The RSDP at `rsdp` (from the start info; 0: search the BIOS area), if its signature and
/// checksum hold.
fn find_rsdp(rsdp: u64) -> Option<&'static [u8]> {
    let valid = |at: u64| {
        // SAFETY: the BIOS area and the RSDP the start info names are firmware memory that
        // nothing writes.
        let b = unsafe { bytes(at, 20) }?;
        (&b[..8] == b"RSD PTR " && sums_to_zero(b)).then_some(b)
    };
    if rsdp != 0 {
        return valid(rsdp);
    }
    BIOS_AREA.step_by(16).find_map(valid)
}

/// The system description table at `addr`, whole, if its checksum holds.
fn table(addr: u64) -> Option<&'static [u8]> {
    // SAFETY: as in `find_rsdp`: the firmware's tables, read only.
    let header = unsafe { bytes(addr, 36) }?;
    let len = u32_at(header, 4)? as usize;
    if !(36..=1 << 20).contains(&len) {
        return None;
    }
    // SAFETY: as above, for the length the table's header gives.
    let t = unsafe { bytes(addr, len) }?;
    sums_to_zero(t).then_some(t)
}

/// The table with `signature` the RSDT (4-byte entries) or XSDT (8-byte) lists.
fn find_table(rsdp: &[u8], signature: &[u8; 4]) -> Option<&'static [u8]> {
    // ACPI 2.0's XSDT where the RSDP has one (revision 2 and a nonzero address).
    let revision = rsdp[15];
    let (root, width) = match (revision >= 2).then(|| {
        // SAFETY: a version-2 RSDP is 36 bytes, at the address just validated.
        let full = unsafe { bytes(rsdp.as_ptr() as u64, 36) }?;
        u64_at(full, 24).filter(|&x| x != 0)
    }) {
        Some(Some(xsdt)) => (xsdt, 8),
        _ => (u64::from(u32_at(rsdp, 16)?), 4),
    };
    let root = table(root)?;
    root[36..].chunks_exact(width).find_map(|e| {
        let addr = if width == 8 {
            u64_at(e, 0)?
        } else {
            u64::from(u32_at(e, 0)?)
        };
        table(addr).filter(|t| &t[..4] == signature)
    })
}

/// The node layout ACPI describes (the RSDP at `rsdp`, 0 if the start info names none): the
/// SRAT's enabled memory ranges and local APICs (the kernel's CPU `n` is APIC ID `n`), the
/// SLIT's distances. `None` without an SRAT.
///
/// # Errors
/// A domain, CPU or distance the kernel cannot take.
pub fn node_map(rsdp: u64) -> Result<Option<NodeMap>, &'static str> {
    let Some(rsdp) = find_rsdp(rsdp) else {
        return Ok(None);
    };
    let Some(srat) = find_table(rsdp, b"SRAT") else {
        return Ok(None);
    };
    let slit = find_table(rsdp, b"SLIT");
    let mut map = NodeMap::new(if slit.is_some() {
        "ACPI SRAT and SLIT"
    } else {
        "ACPI SRAT (no SLIT: distance 20)"
    });
    // The entries follow the 36-byte header and 12 reserved bytes.
    let mut at = 48;
    while let (Some(&kind), Some(&len)) = (srat.get(at), srat.get(at + 1)) {
        let e = srat
            .get(at..at + usize::from(len))
            .ok_or("a cut SRAT entry")?;
        if len < 2 {
            return Err("an SRAT entry of length < 2");
        }
        match kind {
            // Processor local APIC affinity: domain bits 0-7 at 2, APIC ID at 3, flags at 4,
            // domain bits 8-31 at 9.
            0 if u32_at(e, 4).is_some_and(|f| f & 1 != 0) => {
                let hi = e.get(9..12).ok_or("a short SRAT APIC entry")?;
                let domain = u32::from_le_bytes([e[2], hi[0], hi[1], hi[2]]);
                map.set_cpu(u64::from(e[3]), u64::from(domain))?;
            }
            // Memory affinity: domain at 2, base at 8, length at 16, flags at 28 (bit 0
            // enabled).
            1 if u32_at(e, 28).is_some_and(|f| f & 1 != 0) => {
                let domain = u32_at(e, 2).ok_or("a short SRAT memory entry")?;
                let base = u64_at(e, 8).ok_or("a short SRAT memory entry")?;
                let length = u64_at(e, 16).ok_or("a short SRAT memory entry")?;
                map.add_memory(u64::from(domain), base, length)?;
            }
            // Processor local x2APIC affinity: domain at 4, x2APIC ID at 8, flags at 12.
            2 if u32_at(e, 12).is_some_and(|f| f & 1 != 0) => {
                let domain = u32_at(e, 4).ok_or("a short SRAT x2APIC entry")?;
                let id = u32_at(e, 8).ok_or("a short SRAT x2APIC entry")?;
                map.set_cpu(u64::from(id), u64::from(domain))?;
            }
            _ => {}
        }
        at += usize::from(len);
    }
    if let Some(slit) = slit {
        // Localities at 36 (a u64), then the matrix, row by row.
        let n = u64_at(slit, 36).ok_or("a short SLIT")?;
        let n = usize::try_from(n).map_err(|_| "a SLIT too large")?;
        let matrix = slit
            .get(44..44 + n.saturating_mul(n))
            .ok_or("a SLIT shorter than its matrix")?;
        for (i, &d) in matrix.iter().enumerate() {
            map.set_distance((i / n) as u64, (i % n) as u64, u64::from(d))?;
        }
    }
    Ok(Some(map))
}
