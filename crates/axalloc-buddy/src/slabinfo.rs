//! `/proc/slabinfo` of the heap's small objects: [`SlabInfo`].

use core::fmt;

use crate::frames::PAGE;
use crate::slab::{CLASSES, Class, ClassCounts};

/// The heap's slabs per size class, summed over every CPU's and the heap's own, as Linux's
/// `/proc/slabinfo` shows its caches
/// ([`GlobalAllocator::slab_info`](crate::GlobalAllocator::slab_info)); `Display` prints
/// Linux's format, version 2.1, one `kmalloc-<size>` line per class (SLUB's columns: no
/// tunables, every slab active).
///
/// ```
/// use axalloc_buddy::GlobalAllocator;
/// use core::alloc::Layout;
///
/// let memory = vec![0u64; (4 << 20) / 8];
/// let a = GlobalAllocator::new();
/// // SAFETY: the memory is the allocator's alone and outlives it.
/// unsafe { a.try_init(memory.as_ptr() as usize, 4 << 20) }.unwrap();
/// let layout = Layout::from_size_align(64, 8).unwrap();
/// let p = a.alloc(layout).unwrap();
/// let info = a.slab_info();
/// let line = info.classes().find(|c| c.object_size() == 64).unwrap();
/// assert_eq!((line.active_objects(), line.slabs()), (1, 1));
/// assert!(format!("{info}").contains(
///     "kmalloc-64             1     63     64   63    1 : tunables    0    0    0 : slabdata      1      1      0"
/// ));
/// // SAFETY: allocated above with this layout, freed once.
/// unsafe { a.dealloc(p, layout) };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabInfo {
    counts: [ClassCounts; CLASSES],
}

/// One size class of [`SlabInfo`]: a line of `/proc/slabinfo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabClassInfo {
    class: Class,
    counts: ClassCounts,
}

impl SlabInfo {
    /// No slabs.
    pub(crate) const NONE: Self = Self {
        counts: [ClassCounts {
            slabs: 0,
            objects: 0,
        }; CLASSES],
    };

    /// Adds `class`'s `counts` (of one CPU's slabs, or the heap's own).
    pub(crate) fn add(&mut self, class: Class, counts: ClassCounts) {
        let c = &mut self.counts[class.index()];
        c.slabs += counts.slabs;
        c.objects += counts.objects;
    }

    /// Every class, smallest first.
    pub fn classes(&self) -> impl Iterator<Item = SlabClassInfo> + '_ {
        Class::all().map(|class| SlabClassInfo {
            class,
            counts: self.counts[class.index()],
        })
    }
}

impl SlabClassInfo {
    /// Bytes of each object (`<objsize>`).
    pub fn object_size(&self) -> usize {
        self.class.bytes()
    }

    /// Objects a slab holds (`<objperslab>`).
    pub fn objects_per_slab(&self) -> usize {
        self.class.objects_per_slab()
    }

    /// Pages of a slab (`<pagesperslab>`).
    pub fn pages_per_slab(&self) -> usize {
        self.class.slab_bytes() / PAGE
    }

    /// Objects handed out (`<active_objs>`).
    pub fn active_objects(&self) -> usize {
        self.counts.objects
    }

    /// Objects the slabs hold, handed out or free (`<num_objs>`).
    pub fn objects(&self) -> usize {
        self.counts.slabs * self.objects_per_slab()
    }

    /// Slabs, partial or full (`<num_slabs>`; SLUB's `<active_slabs>` too).
    pub fn slabs(&self) -> usize {
        self.counts.slabs
    }
}

impl fmt::Display for SlabInfo {
    /// Linux's `print_slabinfo_header` and one `cache_show` line per class.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "slabinfo - version: 2.1")?;
        writeln!(
            f,
            "# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> \
             : tunables <limit> <batchcount> <sharedfactor> \
             : slabdata <active_slabs> <num_slabs> <sharedavail>"
        )?;
        for c in self.classes() {
            // Linux's names: `kmalloc-96`, `kmalloc-1k`; padded as `%-17s` pads them.
            let size = c.object_size();
            let (n, unit) = if size.is_multiple_of(1024) {
                (size / 1024, "k")
            } else {
                (size, "")
            };
            let name = "kmalloc-".len() + n.checked_ilog10().unwrap_or(0) as usize + 1 + unit.len();
            writeln!(
                f,
                "kmalloc-{n}{unit}{:pad$} {:>6} {:>6} {:>6} {:>4} {:>4} : tunables {:>4} {:>4} {:>4} : slabdata {:>6} {:>6} {:>6}",
                "",
                c.active_objects(),
                c.objects(),
                size,
                c.objects_per_slab(),
                c.pages_per_slab(),
                0,
                0,
                0,
                c.slabs(),
                c.slabs(),
                0,
                pad = 17usize.saturating_sub(name),
            )?;
        }
        Ok(())
    }
}
