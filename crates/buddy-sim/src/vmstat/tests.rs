//! The files on constructed zones, against text written from Linux's format strings.

use std::format;
use std::string::String;

use crate::types::Order;
use crate::vmstat::buddyinfo::BuddyInfo;
use crate::vmstat::fragindex::{ExtfragIndex, UnusableIndex};
use crate::vmstat::pagetypeinfo::PageTypeInfo;
use crate::vmstat::vmstat_file::VmStat;
use crate::vmstat::zoneinfo::ZoneInfo;
use crate::zone::StaticZone;
use crate::zone::config::ZoneConfig;
use mm_types::Pfn;

/// A DMA32 zone of 2048 frames at 16 MiB, two CPUs, each list holding up to 64 frames and
/// refilled one block at a time: a movable order-4 block and an unmovable order-5 block
/// taken on CPU 0, an order-0 page taken and freed on CPU 1.
fn constructed() -> StaticZone<2048, 2> {
    let zone = StaticZone::new_static_empty(
        ZoneConfig::new(Pfn(0x1000), 2048)
            .with_cpus(2)
            .with_pcp(64, 1),
    );
    zone.add_memory(Pfn(0x1000), 2048).unwrap();
    assert_eq!(zone.alloc_movable(0, Order(4), 1), Ok(Pfn(0x1400)));
    let unmovable = zone.alloc_pages(0, Order(5)).unwrap();
    let page = zone.alloc_movable(1, Order(0), 2).unwrap();
    // SAFETY: the page was allocated just above and is freed once.
    #[allow(unsafe_code)]
    unsafe { zone.free_pages(1, page, Order(0)) }.unwrap();
    let _ = unmovable;
    zone
}

/// `frag_show_print`: `"Node %d, zone %8s "`, then `"%6lu "` per order, then `'\n'`.
#[test]
fn buddyinfo_prints_linux_lines() {
    let zone = constructed();
    // Free blocks: orders 0-3 one each (the order-4 block split for the page), orders 5-9
    // two each (one of each type, from the two order-10 blocks split).
    let expected = "Node 0, zone    DMA32      1      1      1      1      0      2      2      2      2      2      0 \n";
    assert_eq!(format!("{}", BuddyInfo(&zone)), expected);
}

/// `pagetypeinfo_show`, `pagetypeinfo_showfree_print` (`"Node %4d, zone %8s, type %12s "`,
/// `"%s%6lu "`), `pagetypeinfo_showblockcount_print` (`"%-23s"`, `"%12s "`, `"%12lu "`).
#[test]
fn pagetypeinfo_prints_linux_lines() {
    let zone = constructed();
    let expected = concat!(
        "Page block order: 9\n",
        "Pages per block:  512\n",
        "\n",
        "Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 \n",
        "Node    0, zone    DMA32, type    Unmovable      0      0      0      0      0      1      1      1      1      1      0 \n",
        "Node    0, zone    DMA32, type      Movable      1      1      1      1      0      1      1      1      1      1      0 \n",
        "Node    0, zone    DMA32, type  Reclaimable      0      0      0      0      0      0      0      0      0      0      0 \n",
        "Node    0, zone    DMA32, type   HighAtomic      0      0      0      0      0      0      0      0      0      0      0 \n",
        "Node    0, zone    DMA32, type          CMA      0      0      0      0      0      0      0      0      0      0      0 \n",
        "Node    0, zone    DMA32, type      Isolate      0      0      0      0      0      0      0      0      0      0      0 \n",
        "\n",
        "Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic          CMA      Isolate \n",
        "Node 0, zone    DMA32            2            2            0            0            0            0 \n",
    );
    assert_eq!(format!("{}", PageTypeInfo(&zone)), expected);
}

/// A CPU's tuned mark in `zoneinfo`: `high` where the refills of a burst raised it (a batch
/// each), between `high_min` and `high_max`.
#[test]
fn zoneinfo_prints_a_tuned_high_mark_between_its_bounds() {
    let zone: StaticZone<2048, 1> = StaticZone::new_static_empty(
        ZoneConfig::new(Pfn(0x1000), 2048)
            .with_pcp(64, 8)
            .with_pcp_high_max(1024),
    );
    zone.add_memory(Pfn(0x1000), 2048).unwrap();
    let pages: std::vec::Vec<_> = (0..100)
        .map(|_| zone.alloc_pages(0, Order(0)).unwrap())
        .collect();
    for page in pages {
        // SAFETY: each page was allocated just above and is freed once.
        #[allow(unsafe_code)]
        unsafe { zone.free_pages(0, page, Order(0)) }.unwrap();
    }
    // 13 refills of 8 pages: the mark 64 + 13 x 8; 104 taken, 100 given back.
    let info = format!("{}", ZoneInfo(&zone));
    let pagesets = "    cpu: 0\n              count: 104\n              high:  168\n              batch: 8\n              high_min: 64\n              high_max: 1024\n";
    assert!(info.contains(pagesets), "{info}");
}

/// `zoneinfo_show_print`: the watermarks of a 2048-frame zone (min 90: sqrt(16 x 8192 KiB)
/// = 362 KiB; the step a quarter of it, 22), 2048 - 16 - 32 - 1 frames free in the buddy
/// (the page is on CPU 1's list), two order-9 blocks free.
#[test]
fn zoneinfo_prints_linux_lines() {
    let zone = constructed();
    let cpu = |n: u8, count: u8| {
        format!(
            "    cpu: {n}\n              count: {count}\n              high:  64\n              batch: 1\n              high_min: 64\n              high_max: 64\n  vm stats threshold: 0\n"
        )
    };
    let expected = String::from(concat!(
        "Node 0, zone    DMA32\n",
        "  pages free     1999\n",
        "        boost    0\n",
        "        min      90\n",
        "        low      112\n",
        "        high     134\n",
        "        promo    156\n",
        "        spanned  2048\n",
        "        present  2048\n",
        "        managed  2048\n",
        "        cma      0\n",
        "        protection: (0, 0, 0, 0)\n",
        "      nr_free_pages 1999\n",
        "      nr_free_pages_blocks 1024\n",
        "      nr_free_cma  0\n",
        "  pagesets\n",
    )) + &cpu(0, 0)
        + &cpu(1, 1)
        + concat!(
            "  node_unreclaimable:  0\n",
            "  start_pfn:           4096\n",
            "  reserved_highatomic: 0\n",
            "  free_highatomic:     0\n",
        );
    assert_eq!(format!("{}", ZoneInfo(&zone)), expected);
}

/// `vmstat_show`: `"%s %lu\n"`; 16 + 32 + 1 frames allocated, one freed, one fallback that
/// claimed the pageblocks of the order-10 block it split.
#[test]
fn vmstat_prints_linux_lines() {
    let zone = constructed();
    let expected = concat!(
        "nr_free_pages 1999\n",
        "nr_free_pages_blocks 1024\n",
        "nr_free_cma 0\n",
        "pgalloc_dma 0\n",
        "pgalloc_dma32 49\n",
        "pgalloc_normal 0\n",
        "pgalloc_movable 0\n",
        "pgfree 1\n",
        "compact_stall 0\n",
        "compact_fail 0\n",
        "compact_success 0\n",
        "thp_fault_alloc 0\n",
        "thp_fault_fallback 0\n",
        "extfrag_claim 1\n",
        "extfrag_steal_unmovable 0\n",
        "extfrag_steal_reclaimable 0\n",
        "extfrag_steal_movable 0\n",
        "extfrag_steal_from_movable 0\n",
    );
    assert_eq!(format!("{}", VmStat(&zone)), expected);
}

/// `extfrag_show_print` (`"%2d.%03d "`) and `unusable_show_print` (`"%d.%03d "`): 1999 free
/// frames in 14 blocks. Order 10 has no free block: 1000 - (1000 + 1999 x 1000 / 1024) / 14
/// = 790. Unusable at order 2: the frames in blocks below it, 1 + 2, of 1999.
#[test]
fn fragmentation_indices_print_as_linux_computes_them() {
    let zone = constructed();
    assert_eq!(
        format!("{}", ExtfragIndex(&zone)),
        "Node 0, zone    DMA32 -1.000 -1.000 -1.000 -1.000 -1.000 -1.000 -1.000 -1.000 -1.000 -1.000  0.790 \n"
    );
    assert_eq!(
        format!("{}", UnusableIndex(&zone)),
        "Node 0, zone    DMA32 0.000 0.000 0.001 0.003 0.007 0.007 0.039 0.103 0.231 0.487 1.000 \n"
    );
    let s = zone.snapshot();
    // One block of half the order asked for: Linux's index goes below zero, and prints so.
    let mut half = s;
    half.free_blocks = [[0; 6]; crate::types::MAX_SUPPORTED_ORDER as usize + 1];
    half.free_blocks[9][1] = 1;
    assert_eq!(half.extfrag_index(Order(10)), -500);
    half.free_blocks[9][1] = 0;
    assert_eq!(half.extfrag_index(Order(10)), 0);
    assert_eq!(half.unusable_index(Order(10)), 1000);
}

/// How procps and mmtests read the files back: `/proc/vmstat` with `"%s %lu"` per line,
/// `/proc/buddyinfo` split on whitespace (node in field 2, zone in field 4, order `n` in
/// field `5 + n`), `/proc/zoneinfo`'s `key value` lines under each `Node` header, and the
/// `type` rows of `/proc/pagetypeinfo` by `Node\s+(\d+), zone\s+(\S+), type\s+(\S+)`.
#[test]
fn the_files_parse_back_with_the_layout_their_readers_use() {
    let zone = constructed();
    let snapshot = zone.snapshot();

    let vmstat = format!("{}", VmStat(&zone));
    let value = |name: &str| {
        vmstat.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.parse::<u64>().unwrap())
        })
    };
    assert_eq!(value("nr_free_pages"), Some(snapshot.free_pages));
    assert_eq!(value("pgalloc_dma32"), Some(snapshot.events.pgalloc));
    assert_eq!(value("pgfree"), Some(snapshot.events.pgfree));

    let buddyinfo = format!("{}", BuddyInfo(&zone));
    let fields: std::vec::Vec<&str> = buddyinfo.split_whitespace().collect();
    assert_eq!((fields[1], fields[3]), ("0,", "DMA32"));
    for order in 0..=10u8 {
        let n: u64 = fields[4 + order as usize].parse().unwrap();
        assert_eq!(n, snapshot.nr_free(Order(order)));
    }

    let zoneinfo = format!("{}", ZoneInfo(&zone));
    let mut header = zoneinfo.lines().next().unwrap().split_whitespace();
    assert_eq!(header.nth(1), Some("0,"));
    assert_eq!(header.nth(1), Some("DMA32"));
    let field = |key: &str| {
        zoneinfo.lines().find_map(|l| {
            let rest = l.trim_start().strip_prefix(key)?;
            rest.trim().parse::<u64>().ok()
        })
    };
    assert_eq!(field("pages free"), Some(snapshot.free_pages));
    assert_eq!(field("min"), Some(snapshot.watermarks.min));
    assert_eq!(field("low"), Some(snapshot.watermarks.low));
    assert_eq!(field("high "), Some(snapshot.watermarks.high));
    assert_eq!(field("managed"), Some(2048));
    assert_eq!(field("start_pfn:"), Some(0x1000));

    let pagetypeinfo = format!("{}", PageTypeInfo(&zone));
    let movable = pagetypeinfo
        .lines()
        .find(|l| l.starts_with("Node") && l.contains("type      Movable"))
        .unwrap();
    let (head, counts) = movable.split_at(movable.find("Movable").unwrap() + "Movable".len());
    let head: std::vec::Vec<&str> = head.split_whitespace().collect();
    assert_eq!(head, ["Node", "0,", "zone", "DMA32,", "type", "Movable"]);
    let counts: std::vec::Vec<u64> = counts
        .split_whitespace()
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 11);
    for (order, n) in counts.into_iter().enumerate() {
        assert_eq!(n, snapshot.free_blocks[order][1]);
    }
}

/// A snapshot built by hand with any figures (its fields are public) computes its indices
/// and watermark without a panic, debug builds included.
#[test]
fn a_hand_built_snapshot_with_extreme_figures_does_not_panic() {
    let mut s = constructed().snapshot();
    s.free_blocks = [[u64::MAX; 6]; crate::types::MAX_SUPPORTED_ORDER as usize + 1];
    s.watermarks.low = u64::MAX;
    s.watermarks.high = 1;
    for order in 0..=crate::types::MAX_SUPPORTED_ORDER {
        let o = Order::new(order).unwrap();
        assert!((-1000..=1000).contains(&s.extfrag_index(o)));
        assert!((0..=1000).contains(&s.unusable_index(o)));
    }
    assert_eq!(s.nr_free(Order(3)), u64::MAX);
    assert_eq!(s.promo_watermark(), 1);
}
