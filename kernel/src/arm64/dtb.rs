//! The device tree QEMU's virt machine leaves at the start of RAM for a kernel it boots
//! directly (an ELF image that starts past it, as this one does): the RAM of each
//! `memory@` node and its NUMA node (`numa-node-id`), each CPU's node, and the distances
//! between nodes (`/distance-map`'s `distance-matrix`), read with the `fdt` crate.

use buddy_sim::Pfn;
use fdt::Fdt;
use pte_batch::mm_types::FrameRange;

use super::mmu::RAM_START;
use crate::steps::{MAX_RAM, NodeMap, PAGE};

/// The flattened device tree's magic number (big-endian in its header).
const FDT_MAGIC: u32 = 0xd00d_feed;

/// The most the device tree may take: the image starts 2 MiB into RAM (the linker script).
const MAX_FDT_BYTES: usize = 2 << 20;

/// The node layout the device tree at the start of RAM describes; without one (or with one
/// that names no memory), one node of [`MAX_RAM`] from [`RAM_START`].
///
/// # Errors
/// What is wrong with the device tree: a node, CPU or distance the kernel cannot take.
pub fn node_map() -> Result<NodeMap, &'static str> {
    let fallback = || {
        NodeMap::one_node(
            FrameRange::new(Pfn(RAM_START / PAGE), MAX_RAM / PAGE),
            "no device tree at the start of RAM: one node",
        )
    };
    let header = RAM_START as *const u32;
    // SAFETY: the start of RAM is identity-mapped normal memory (the boot map) that only
    // QEMU wrote: the device tree, or whatever else RAM holds, which is read, never used.
    let (magic, size) = unsafe { (header.read_volatile(), header.add(1).read_volatile()) };
    let size = u32::from_be(size) as usize;
    if u32::from_be(magic) != FDT_MAGIC || size > MAX_FDT_BYTES {
        return Ok(fallback());
    }
    // SAFETY: `size` bytes from the start of RAM hold the device tree (its header says so,
    // and they end before the image); nothing writes them while the kernel runs.
    let bytes = unsafe { core::slice::from_raw_parts(RAM_START as *const u8, size) };
    let fdt = Fdt::new(bytes).map_err(|_| "a device tree the fdt crate cannot read")?;
    let mut map = NodeMap::new("the device tree");
    let node_id = |n: fdt::node::FdtNode<'_, '_>| {
        n.property("numa-node-id")
            .and_then(|p| p.as_usize())
            .unwrap_or(0) as u64
    };
    for mem in fdt.find_all_nodes("/memory") {
        let node = node_id(mem);
        for r in mem.reg().into_iter().flatten() {
            let size = r.size.unwrap_or(0) as u64;
            map.add_memory(node, r.starting_address as u64, size)?;
        }
    }
    if map.nodes() == 0 {
        return Ok(fallback());
    }
    for cpu in fdt.cpus() {
        // The kernel's CPU number is the MPIDR's affinity level 0 (PSCI starts CPU 1 by
        // that MPIDR).
        let mpidr = cpu.ids().first() as u64;
        let node = cpu
            .property("numa-node-id")
            .and_then(|p| p.as_usize())
            .unwrap_or(0) as u64;
        map.set_cpu(mpidr & 0xff, node)?;
    }
    if let Some(matrix) = fdt
        .find_node("/distance-map")
        .and_then(|n| n.property("distance-matrix"))
    {
        let cell = |c: &[u8]| u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
        for entry in matrix.value.chunks_exact(12) {
            map.set_distance(cell(&entry[..4]), cell(&entry[4..8]), cell(&entry[8..]))?;
        }
    }
    Ok(map)
}

/// Calls `slot` with the base address of every `virtio,mmio` node of the device tree (QEMU
/// virt has 32 slots; a device sits in some of them).
pub fn virtio_mmio_slots(mut slot: impl FnMut(usize)) {
    let header = RAM_START as *const u32;
    // SAFETY: as in `node_map`.
    let (magic, size) = unsafe { (header.read_volatile(), header.add(1).read_volatile()) };
    let size = u32::from_be(size) as usize;
    if u32::from_be(magic) != FDT_MAGIC || size > MAX_FDT_BYTES {
        return;
    }
    // SAFETY: as in `node_map`.
    let bytes = unsafe { core::slice::from_raw_parts(RAM_START as *const u8, size) };
    let Ok(fdt) = Fdt::new(bytes) else {
        return;
    };
    for node in fdt.all_nodes() {
        let virtio = node
            .compatible()
            .is_some_and(|c| c.all().any(|s| s == "virtio,mmio"));
        if let (true, Some(mut reg)) = (virtio, node.reg())
            && let Some(r) = reg.next()
        {
            slot(r.starting_address as usize);
        }
    }
}
