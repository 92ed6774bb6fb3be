//! Slabs for the heap's small objects (Linux's `kmalloc` caches, laid out as SLUB lays them
//! out): every request of at most 2 KiB aligned to at most 16 bytes is an object of a size
//! class, carved from a slab, a block of pages (one page up to 512-byte objects, four past
//! that) that holds objects of that class alone. The slab's header, at its start, keeps its
//! free objects (a list linked through each free object's first word) and how many are
//! handed out. An allocation takes an object from the class's slab with a free one that
//! had one freed last; a free puts the object back on its slab's list, the slab found by
//! masking the object's address to the slab's size. A few loads and stores each, where the
//! byte allocator finds a size class in its bitmaps, splits a block, and merges it back
//! with its neighbours when it is freed.
//!
//! A slab whose objects are all free goes back where its block came from (the zone, or the
//! byte allocator when the zone had none), unless it is its class's only empty one: a class
//! that allocates and frees around a slab's boundary keeps its slab (one a class on each
//! CPU: at most 152 KiB a CPU over the 20 classes).
//!
//! Slabs belong to a CPU, as SLUB's do: each CPU's [`Slabs`] (in its slot, under its
//! lock) makes the slabs its allocations take objects from, and the slab's header names
//! that CPU ([`Owner`]), so that a free on any CPU takes the lock of the CPU whose slab
//! holds the object (read from the header, which names its owner from the slab's making
//! to its end, without a lock). Two CPUs allocating and freeing their own objects share
//! nothing; one freeing another's objects takes that CPU's lock for each.

use core::alloc::Layout;
use core::ptr::{self, NonNull};

use crate::frames::PAGE;

/// Bytes of a slab's header, at the start of its block: the first object starts on a cache
/// line of its own.
const HEADER: usize = 64;

/// The alignment of every object: the most a request served from a slab may ask for.
const OBJECT_ALIGN: usize = 16;

/// Size classes.
pub(crate) const CLASSES: usize = 20;

/// The sizes of the classes, in bytes: multiples of [`OBJECT_ALIGN`], each at most a
/// third more than the one below it from 64 bytes up, so that a request takes less than a
/// third more than it asks for there (Linux's `kmalloc` classes, which double from 256
/// bytes, up to twice).
const CLASS_BYTES: [usize; CLASSES] = [
    16, 32, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 448, 512, 640, 768, 1024, 1280, 1536,
    2048,
];

/// The largest request a slab serves; larger ones take a block of pages, or the byte
/// allocator.
pub(crate) const LARGEST: usize = CLASS_BYTES[CLASSES - 1];

/// The largest objects a one-page slab holds; larger ones' slabs are [`LARGE_SLAB`] bytes,
/// so that a slab holds at least seven objects and leaves at most an eighth of it unused.
const SMALL_OBJECTS: usize = 512;

/// Bytes of a slab of objects above [`SMALL_OBJECTS`]: four pages.
const LARGE_SLAB: usize = 4 * PAGE;

/// What a class's slabs are: bytes of each object, objects a slab holds past its header,
/// and the slab's block (its size a power of two, aligned to it).
#[derive(Clone, Copy)]
struct Shape {
    object: u32,
    capacity: u16,
    slab: Layout,
}

/// Each class's [`Shape`].
const SHAPES: [Shape; CLASSES] = {
    let mut shapes = [Shape {
        object: 0,
        capacity: 0,
        slab: Layout::new::<u8>(),
    }; CLASSES];
    let mut i = 0;
    while i < CLASSES {
        let object = CLASS_BYTES[i];
        let slab = if object <= SMALL_OBJECTS {
            PAGE
        } else {
            LARGE_SLAB
        };
        shapes[i] = Shape {
            object: object as u32,
            capacity: ((slab - HEADER) / object) as u16,
            slab: match Layout::from_size_align(slab, slab) {
                Ok(layout) => layout,
                Err(_) => panic!("a slab's size is a power of two"),
            },
        };
        i += 1;
    }
    shapes
};

/// The class of each request size, by its number of [`OBJECT_ALIGN`] steps rounded up.
const CLASS_OF_STEPS: [u8; LARGEST / OBJECT_ALIGN + 1] = {
    let mut table = [0u8; LARGEST / OBJECT_ALIGN + 1];
    let (mut steps, mut class) = (0, 0);
    while steps < table.len() {
        while steps * OBJECT_ALIGN > CLASS_BYTES[class] {
            class += 1;
        }
        table[steps] = class as u8;
        steps += 1;
    }
    table
};

/// A size class of small objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Class(u8);

impl Class {
    /// The class that serves `layout`: the smallest whose objects hold its size, for a
    /// request of at most [`LARGEST`] bytes aligned to at most [`OBJECT_ALIGN`]; `None` for
    /// any other.
    #[inline(always)]
    pub(crate) fn of(layout: Layout) -> Option<Self> {
        if layout.size() > LARGEST || layout.align() > OBJECT_ALIGN {
            return None;
        }
        // At most `LARGEST / OBJECT_ALIGN`: inside the table.
        Some(Self(CLASS_OF_STEPS[layout.size().div_ceil(OBJECT_ALIGN)]))
    }

    /// The class's shape.
    #[inline(always)]
    fn shape(self) -> Shape {
        SHAPES[self.index()]
    }

    /// Bytes of each object of the class.
    #[inline(always)]
    pub(crate) fn bytes(self) -> usize {
        self.shape().object as usize
    }

    /// Bytes of a slab of the class: one page, or [`LARGE_SLAB`].
    #[inline(always)]
    pub(crate) fn slab_bytes(self) -> usize {
        self.shape().slab.size()
    }

    /// The layout of a block for a slab of the class: the slab's size, aligned to it.
    pub(crate) fn slab_layout(self) -> Layout {
        self.shape().slab
    }

    /// Objects a slab of the class holds past its header.
    #[inline(always)]
    fn capacity(self) -> u16 {
        self.shape().capacity
    }

    /// The class's index, from 0 for the smallest.
    pub(crate) fn index(self) -> usize {
        usize::from(self.0)
    }

    /// Every class, smallest first.
    pub(crate) fn all() -> impl Iterator<Item = Self> {
        (0..CLASSES as u8).map(Self)
    }

    /// Objects a slab of the class holds.
    pub(crate) fn objects_per_slab(self) -> usize {
        usize::from(self.capacity())
    }

    /// Bytes of the objects a slab of the class holds.
    fn object_bytes(self) -> usize {
        self.objects_per_slab() * self.bytes()
    }
}

/// Where a slab's block came from, so that it goes back there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// Pages of the zone ([`GlobalAllocator::alloc_pages`](crate::GlobalAllocator::alloc_pages)).
    Zone,
    /// A block of the byte allocator of the slab's size and alignment (the zone had none).
    Heap,
}

/// A slab whose every object is free, to give back where its block came from.
pub(crate) struct FreeSlab {
    /// The slab's first byte.
    pub(crate) at: NonNull<u8>,
    /// Its class.
    pub(crate) class: Class,
    /// Where its block came from.
    pub(crate) source: Source,
}

/// Why a free was refused: nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlabError {
    /// The object's block is not a slab of the object's class, or one with no object handed
    /// out.
    NotAnObject,
}

/// Whose class lists hold a slab, and so whose lock its objects' calls take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The heap's own slabs, under the heap's lock (slabs made before the zone had CPUs).
    Heap,
    /// CPU `n`'s slabs, under its slot's lock (`n`, a slot's index, is below
    /// `usize::MAX`: every slot takes room in memory).
    Cpu(usize),
}

impl Owner {
    /// The word a header keeps for [`Owner::Heap`].
    const HEAP: usize = usize::MAX;

    /// The owner a header's word names.
    fn from_word(word: usize) -> Self {
        if word == Self::HEAP {
            Self::Heap
        } else {
            Self::Cpu(word)
        }
    }

    /// The header's word for this owner.
    fn word(self) -> usize {
        match self {
            Self::Heap => Self::HEAP,
            Self::Cpu(n) => n,
        }
    }
}

/// Every owner's slabs, each reached under its owner's lock: a CPU's under its slot's, the
/// heap's own under the heap's.
pub(crate) trait SlabOwners {
    /// `f` on `owner`'s slabs, under `owner`'s lock (taken and released here); `None` if
    /// there is no such owner (a CPU past the last).
    fn with_slabs<R>(&self, owner: Owner, f: impl FnOnce(&mut Slabs) -> R) -> Option<R>;
}

/// The header at the start of a slab. Reached through raw pointers, field by field, never
/// through a reference to the whole: a free on another CPU reads `class` and `owner` (set
/// when the slab is made, never changed after) without the owner's lock, while the owner
/// writes the other fields under it.
#[repr(C)]
struct Header {
    /// The first free object, whose first word holds the next (null: none). Objects from
    /// `carved` up are free too, never handed out.
    free: *mut u8,
    /// The class's partial list: the next and previous slab with a free object.
    next: *mut Header,
    prev: *mut Header,
    /// Whose lists hold the slab ([`Owner::word`]).
    owner: usize,
    /// Objects handed out from the part never used before, from the first up.
    carved: u16,
    /// Objects handed out.
    in_use: u16,
    /// The class's index.
    class: u8,
    /// Where the block came from.
    source: Source,
    /// What loom sees of the accesses to the fields above (`cfg(loom)` only).
    #[cfg(loom)]
    accesses: Accesses,
}

const _: () = assert!(size_of::<Header>() <= HEADER);

/// The accesses to a header's fields, as loom's model checker records them (`cfg(loom)`:
/// the header is raw memory, whose reads and writes loom does not see): `guarded`, the
/// fields the owner's lock guards (`free`, the list links, `carved`, `in_use`), written
/// under it; `identity`, `owner` and `class`, written when the slab is made and read
/// without the lock. Two CPUs writing the guarded fields under different locks, or a read
/// of the identity racing its write, is a causality violation loom reports.
#[cfg(loom)]
struct Accesses {
    guarded: loom::cell::UnsafeCell<()>,
    identity: loom::cell::UnsafeCell<()>,
}

/// The caller is about to read or write the fields of `slab`'s header that its owner's lock
/// guards (under that lock): recorded for loom, nothing otherwise.
///
/// # Safety
/// `slab` is a live slab's header.
#[inline(always)]
#[allow(unused_variables)]
unsafe fn guarded(slab: *mut Header) {
    // SAFETY: the caller's promise; the record is read, not the fields.
    #[cfg(loom)]
    unsafe {
        (*slab).accesses.guarded.with_mut(|_| ());
    }
}

/// The caller is about to read `slab`'s `owner` and `class`, perhaps without its owner's
/// lock: recorded for loom, nothing otherwise.
///
/// # Safety
/// `slab` is a live slab's header.
#[inline(always)]
#[allow(unused_variables)]
unsafe fn identity(slab: *mut Header) {
    // SAFETY: as for `guarded`.
    #[cfg(loom)]
    unsafe {
        (*slab).accesses.identity.with(|_| ());
    }
}

/// One class's slabs.
#[derive(Clone, Copy)]
struct ClassSlabs {
    /// The slabs of the class with a free object, the one most recently freed into first;
    /// null: none.
    partial: *mut Header,
    /// Whether one of them has no object handed out (the one a class keeps).
    has_empty: bool,
    /// Slabs of the class, partial or full.
    slabs: u32,
}

/// What slabs hold, in bytes (of one [`Slabs`], or summed over several).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlabBytes {
    /// Bytes of the slabs, by [`Source`] (zone, byte allocator).
    slabs: [usize; 2],
    /// Bytes of the objects the slabs hold, handed out or free.
    objects: usize,
    /// Bytes of the objects handed out, each its class's size.
    in_use: usize,
    /// Bytes the objects handed out were asked for
    /// ([`UsageKind::RustHeap`](crate::UsageKind::RustHeap)'s).
    requested: usize,
}

impl SlabBytes {
    /// No slabs.
    pub(crate) const NONE: Self = Self {
        slabs: [0; 2],
        objects: 0,
        in_use: 0,
        requested: 0,
    };

    /// Bytes of the slabs whose blocks came from `source`.
    pub(crate) fn slabs(&self, source: Source) -> usize {
        self.slabs[source as usize]
    }

    /// Bytes of the objects handed out, each its class's size.
    pub(crate) fn in_use(&self) -> usize {
        self.in_use
    }

    /// Bytes of the objects the slabs hold free.
    pub(crate) fn free(&self) -> usize {
        self.objects - self.in_use
    }

    /// Bytes the objects handed out were asked for.
    pub(crate) fn requested(&self) -> usize {
        self.requested
    }
}

impl SlabBytes {
    /// These bytes with `objects` bytes of objects that the slabs count handed out waiting
    /// free in a CPU's object magazine, whose handing out and freeing there changed the bytes
    /// asked for by `requested` (wrapping).
    pub(crate) fn with_cached(self, objects: usize, requested: usize) -> Self {
        Self {
            in_use: self.in_use.saturating_sub(objects),
            requested: self.requested.wrapping_add(requested),
            ..self
        }
    }
}

impl core::ops::Add for SlabBytes {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            slabs: [
                self.slabs[0] + other.slabs[0],
                self.slabs[1] + other.slabs[1],
            ],
            objects: self.objects + other.objects,
            in_use: self.in_use + other.in_use,
            requested: self.requested.wrapping_add(other.requested),
        }
    }
}

/// Every class's slabs, and what they hold (the rest of [`SlabBytes`] follows from the
/// classes' slab counts and partial lists: [`Slabs::bytes`]).
pub(crate) struct Slabs {
    classes: [ClassSlabs; CLASSES],
    /// Bytes of the slabs, by [`Source`].
    slab_bytes: [usize; 2],
    /// Bytes the objects handed out were asked for (wrapping: a free names its size).
    requested: usize,
}

// SAFETY: the pointers are slabs these slabs own (blocks taken from the zone or the byte
// allocator, given back only through `Slabs::free`), whose headers are written only through
// `&mut Slabs` (and read without it only in their `class` and `owner`, which nothing writes
// after `Slabs::add`): they belong to the allocator, not to a thread.
unsafe impl Send for Slabs {}

impl Slabs {
    /// No slabs.
    pub(crate) const fn new() -> Self {
        Self {
            classes: [ClassSlabs {
                partial: ptr::null_mut(),
                has_empty: false,
                slabs: 0,
            }; CLASSES],
            slab_bytes: [0; 2],
            requested: 0,
        }
    }

    /// An object of `class`, asked for as `bytes` bytes, from the slab of its class with a
    /// free object that had one freed last; `None` if no slab of the class has one
    /// ([`Slabs::add`] makes one).
    #[inline(always)]
    pub(crate) fn alloc(&mut self, class: Class, bytes: usize) -> Option<NonNull<u8>> {
        let shape = class.shape();
        let c = &mut self.classes[class.index()];
        let slab = c.partial;
        if slab.is_null() {
            return None;
        }
        // SAFETY: a slab on a partial list is a block these slabs own, its header written
        // by `add`, whose fields other than `class` and `owner` are reached only through
        // `&mut self`; it has a free object (a full slab leaves the list), which lies
        // inside it.
        unsafe {
            guarded(slab);
            let in_use = (*slab).in_use;
            if in_use == 0 {
                c.has_empty = false;
            }
            let free = (*slab).free;
            let object = if free.is_null() {
                // The part never used: the object at `carved`, below the capacity.
                let carved = (*slab).carved;
                let at = HEADER + usize::from(carved) * shape.object as usize;
                (*slab).carved = carved + 1;
                slab.cast::<u8>().add(at)
            } else {
                (*slab).free = free.cast::<*mut u8>().read();
                free
            };
            (*slab).in_use = in_use + 1;
            if in_use + 1 == shape.capacity {
                Self::unlink(c, slab);
            }
            self.requested = self.requested.wrapping_add(bytes);
            Some(NonNull::new_unchecked(object))
        }
    }

    /// Makes the block at `at` a slab of `class` with every object free, for the class's
    /// next allocations, held by `owner` (these slabs' owner).
    ///
    /// # Safety
    /// `at` is the start of [`Class::slab_layout`] bytes aligned to their size, readable
    /// and writable, that nothing else uses until the slabs give them back ([`Slabs::free`]'s
    /// [`FreeSlab`]), taken from `source`.
    pub(crate) unsafe fn add(
        &mut self,
        class: Class,
        at: NonNull<u8>,
        source: Source,
        owner: Owner,
    ) {
        let slab = at.as_ptr().cast::<Header>();
        let c = &mut self.classes[class.index()];
        // SAFETY: the caller gives the block, aligned for a header (at least a page's
        // alignment); it is on no list yet.
        unsafe {
            slab.write(Header {
                free: ptr::null_mut(),
                next: ptr::null_mut(),
                prev: ptr::null_mut(),
                owner: owner.word(),
                carved: 0,
                in_use: 0,
                class: class.0,
                source,
                #[cfg(loom)]
                accesses: Accesses {
                    guarded: loom::cell::UnsafeCell::new(()),
                    identity: loom::cell::UnsafeCell::new(()),
                },
            });
            Self::push(c, slab);
        }
        c.has_empty = true;
        c.slabs += 1;
        self.slab_bytes[source as usize] += class.slab_bytes();
    }

    /// Puts `object` back on its slab's free list; the slab, if its every object is now
    /// free and its class keeps an empty slab already (the caller gives its block back to
    /// where it came from).
    ///
    /// # Errors
    /// [`SlabError::NotAnObject`] if the object's block is not a slab of `class` with an
    /// object handed out (what can be checked of the contract below); nothing changes then.
    ///
    /// # Safety
    /// `object` came from [`Slabs::alloc`] of `class` on these slabs, asked for as `bytes`
    /// bytes, and is freed once, not used after.
    #[inline(always)]
    pub(crate) unsafe fn free(
        &mut self,
        class: Class,
        object: NonNull<u8>,
        bytes: usize,
    ) -> Result<Option<FreeSlab>, SlabError> {
        let shape = class.shape();
        let mask = shape.slab.size() - 1;
        let slab = object.as_ptr().map_addr(|a| a & !mask).cast::<Header>();
        let c = &mut self.classes[class.index()];
        // SAFETY: the caller's promise: the object is one of a slab of its class, whose
        // block is aligned to its size, so the block starts with the slab's header, which
        // these slabs own (its fields but `class` and `owner` reached only through `&mut
        // self`); the object lies inside the block, aligned for a pointer, and is free from
        // here on.
        unsafe {
            identity(slab);
            guarded(slab);
            let in_use = (*slab).in_use;
            if (*slab).class != class.0 || in_use == 0 {
                return Err(SlabError::NotAnObject);
            }
            object.as_ptr().cast::<*mut u8>().write((*slab).free);
            (*slab).free = object.as_ptr();
            (*slab).in_use = in_use - 1;
            self.requested = self.requested.wrapping_sub(bytes);
            if in_use == shape.capacity {
                Self::push(c, slab);
            }
            if in_use != 1 {
                return Ok(None);
            }
            if !c.has_empty {
                c.has_empty = true;
                return Ok(None);
            }
            let source = (*slab).source;
            Self::unlink(c, slab);
            c.slabs -= 1;
            self.slab_bytes[source as usize] -= class.slab_bytes();
            Ok(Some(FreeSlab {
                at: NonNull::new_unchecked(slab.cast::<u8>()),
                class,
                source,
            }))
        }
    }

    /// Frees `object` (of `class`, asked for as `bytes` bytes) to its slab, whichever CPU
    /// calls: the slab's owner read from its header without a lock, then the free made under
    /// that owner's lock, on its slabs, as its allocations are. The slab, if it emptied and
    /// goes back (as [`Slabs::free`]).
    ///
    /// # Errors
    /// As [`Slabs::free`]; also [`SlabError::NotAnObject`] for a slab whose owner `owners`
    /// does not have. Nothing changes then.
    ///
    /// # Safety
    /// As [`Slabs::free`], on the slabs of `owners` that hold the object's slab.
    #[inline(always)]
    pub(crate) unsafe fn free_to_owner(
        owners: &impl SlabOwners,
        class: Class,
        object: NonNull<u8>,
        bytes: usize,
    ) -> Result<Option<FreeSlab>, SlabError> {
        // SAFETY: the caller's promise: the object is handed out, so its slab lives.
        let owner = unsafe { Self::owner_of(class, object) }?;
        owners
            // SAFETY: the caller's promise; these are the slabs of the object's slab's
            // owner, under its lock.
            .with_slabs(owner, move |slabs| unsafe {
                slabs.free(class, object, bytes)
            })
            .unwrap_or(Err(SlabError::NotAnObject))
    }

    /// The owner of the slab of `class` that `object` lies in: whose lists, and so whose
    /// lock, its free takes.
    ///
    /// # Errors
    /// [`SlabError::NotAnObject`] if the object's block is not a slab of `class` (what can
    /// be checked of the contract below).
    ///
    /// # Safety
    /// `object` came from [`Slabs::alloc`] of `class` on some slabs and is not freed yet,
    /// so that its slab lives: its header's `class` and `owner`, written when the slab was
    /// made ([`Slabs::add`], before the object was handed out) and never after, are read
    /// here without the owner's lock, field by field, while the owner may write the other
    /// fields under it.
    #[inline(always)]
    pub(crate) unsafe fn owner_of(class: Class, object: NonNull<u8>) -> Result<Owner, SlabError> {
        let mask = class.slab_bytes() - 1;
        let slab = object.as_ptr().map_addr(|a| a & !mask).cast::<Header>();
        // SAFETY: the caller's promise: the block starts with the live slab's header.
        let (owner, slab_class) = unsafe {
            identity(slab);
            ((*slab).owner, (*slab).class)
        };
        if slab_class != class.0 {
            return Err(SlabError::NotAnObject);
        }
        Ok(Owner::from_word(owner))
    }

    /// Puts `slab` at the front of its class's partial list.
    ///
    /// # Safety
    /// `slab` is a slab of the class these slabs own, on no list.
    #[inline(always)]
    unsafe fn push(c: &mut ClassSlabs, slab: *mut Header) {
        // SAFETY: the caller's promise; the list's slabs are these slabs' too.
        unsafe {
            guarded(slab);
            (*slab).prev = ptr::null_mut();
            (*slab).next = c.partial;
            if !c.partial.is_null() {
                guarded(c.partial);
                (*c.partial).prev = slab;
            }
        }
        c.partial = slab;
    }

    /// Takes `slab` off its class's partial list.
    ///
    /// # Safety
    /// `slab` is on the list.
    #[inline(always)]
    unsafe fn unlink(c: &mut ClassSlabs, slab: *mut Header) {
        // SAFETY: the caller's promise; the list's slabs are these slabs'.
        unsafe {
            guarded(slab);
            let (prev, next) = ((*slab).prev, (*slab).next);
            if prev.is_null() {
                c.partial = next;
            } else {
                guarded(prev);
                (*prev).next = next;
            }
            if !next.is_null() {
                guarded(next);
                (*next).prev = prev;
            }
        }
    }

    /// What these slabs hold: the objects' bytes from each class's counts
    /// ([`Slabs::class_counts`], which walks the slabs with a free object).
    pub(crate) fn bytes(&self) -> SlabBytes {
        let (mut objects, mut in_use) = (0, 0);
        for class in Class::all() {
            let counts = self.class_counts(class);
            objects += counts.slabs * class.object_bytes();
            in_use += counts.objects * class.bytes();
        }
        SlabBytes {
            slabs: self.slab_bytes,
            objects,
            in_use,
            requested: self.requested,
        }
    }

    /// `class`'s slabs here and their objects handed out: the objects of every slab but
    /// the free ones of the slabs with a free object (the partial list, walked: a full slab
    /// is on no list).
    pub(crate) fn class_counts(&self, class: Class) -> ClassCounts {
        let c = &self.classes[class.index()];
        let capacity = class.objects_per_slab();
        let mut free = 0;
        let mut slab = c.partial;
        while !slab.is_null() {
            // SAFETY: a slab on the partial list is a block these slabs own, its header
            // written by `add`, its list links and count written only through `&mut self`
            // (`&self` here: none is written meanwhile).
            unsafe {
                guarded(slab);
                free += capacity - usize::from((*slab).in_use);
                slab = (*slab).next;
            }
        }
        let slabs = c.slabs as usize;
        ClassCounts {
            slabs,
            objects: (slabs * capacity).saturating_sub(free),
        }
    }
}

/// One class's slabs and objects handed out, as [`Slabs::class_counts`] counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClassCounts {
    /// Slabs, partial or full.
    pub(crate) slabs: usize,
    /// Objects handed out.
    pub(crate) objects: usize,
}

impl ClassCounts {
    /// These counts with `cached` of the objects counted handed out waiting free in a CPU's
    /// object magazine.
    pub(crate) fn less_cached(self, cached: usize) -> Self {
        Self {
            objects: self.objects.saturating_sub(cached),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        CLASS_BYTES, Class, FreeSlab, HEADER, LARGEST, OBJECT_ALIGN, Owner, SlabError, Slabs,
        Source,
    };
    use alloc::alloc::{alloc, dealloc};
    use alloc::vec::Vec;
    use core::alloc::Layout;
    use core::ptr::NonNull;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn a_class_is_the_smallest_that_holds_the_request() {
        for size in 0..=LARGEST {
            for align in [1, 2, 4, 8, 16] {
                let class = Class::of(layout(size, align)).unwrap();
                assert!(class.bytes() >= size, "{size}");
                assert!(
                    CLASS_BYTES.iter().all(|&b| b >= class.bytes() || b < size),
                    "{size}: {}",
                    class.bytes()
                );
                assert!(class.bytes().is_multiple_of(OBJECT_ALIGN));
                // At least seven objects a slab, at most an eighth of it unused.
                let unused = class.slab_bytes() - class.object_bytes();
                assert!(
                    class.capacity() >= 7 && unused <= class.slab_bytes() / 8,
                    "{size}"
                );
            }
        }
        assert_eq!(Class::of(layout(LARGEST + 1, 8)), None);
        assert_eq!(Class::of(layout(16, 32)), None);
        assert_eq!(Class::of(layout(64, 4096)), None);
    }

    /// Blocks for the slabs, from the test's heap, given back when the test ends.
    struct Blocks(Vec<(NonNull<u8>, Layout)>);

    impl Blocks {
        fn add(&mut self, slabs: &mut Slabs, class: Class, owner: Owner) {
            let layout = class.slab_layout();
            // SAFETY: a layout of non-zero size.
            let at = NonNull::new(unsafe { alloc(layout) }).unwrap();
            self.0.push((at, layout));
            // SAFETY: a block of the test's, of the slab's size and alignment, used by
            // nothing else until the test ends.
            unsafe { slabs.add(class, at, Source::Heap, owner) };
        }
    }

    impl Drop for Blocks {
        fn drop(&mut self) {
            for &(at, layout) in &self.0 {
                // SAFETY: allocated in `add` with this layout.
                unsafe { dealloc(at.as_ptr(), layout) };
            }
        }
    }

    #[test]
    fn objects_are_distinct_aligned_and_inside_their_slabs_and_empty_slabs_go_back() {
        // Fewer classes under Miri: each slab's objects are written whole.
        let step = if cfg!(miri) { 6 } else { 1 };
        for size in CLASS_BYTES.into_iter().step_by(step) {
            let class = Class::of(layout(size, 8)).unwrap();
            let mut slabs = Slabs::new();
            let mut blocks = Blocks(Vec::new());
            assert!(slabs.alloc(class, size).is_none());
            // Three slabs' worth of objects.
            let n = 3 * usize::from(class.capacity());
            let mut objects = Vec::new();
            for i in 0..n {
                let object = match slabs.alloc(class, size) {
                    Some(o) => o,
                    None => {
                        blocks.add(&mut slabs, class, Owner::Heap);
                        slabs.alloc(class, size).unwrap()
                    }
                };
                assert!(object.as_ptr().addr().is_multiple_of(OBJECT_ALIGN));
                // SAFETY: the object is `size` bytes the test holds.
                unsafe { object.as_ptr().write_bytes(i as u8, size) };
                objects.push(object);
            }
            assert_eq!(blocks.0.len(), 3, "{size}");
            assert_eq!(slabs.bytes().in_use(), n * size);
            assert_eq!(slabs.bytes().free(), 0);
            for (i, o) in objects.iter().enumerate() {
                let slab = o.as_ptr().addr() & !(class.slab_bytes() - 1);
                assert!(o.as_ptr().addr() >= slab + HEADER);
                assert!(o.as_ptr().addr() + size <= slab + class.slab_bytes());
                // SAFETY: as above; every byte still reads what was written.
                let bytes = unsafe { core::slice::from_raw_parts(o.as_ptr(), size) };
                assert!(bytes.iter().all(|&b| b == i as u8), "{size}: object {i}");
            }
            // Freed: the first slab to empty stays, the next two go back.
            let mut back = Vec::new();
            for o in objects.drain(..) {
                // SAFETY: allocated above, freed once.
                let emptied = unsafe { slabs.free(class, o, size) }.unwrap();
                if let Some(FreeSlab { at, source, .. }) = emptied {
                    assert_eq!(source, Source::Heap);
                    back.push(at.as_ptr().addr());
                }
            }
            assert_eq!(back.len(), 2, "{size}");
            assert_eq!(slabs.bytes().slabs(Source::Heap), class.slab_bytes());
            assert_eq!(slabs.bytes().in_use(), 0);
            // The kept slab serves the next allocations.
            let again = slabs.alloc(class, size).unwrap();
            assert!(!back.contains(&(again.as_ptr().addr() & !(class.slab_bytes() - 1))));
            // SAFETY: allocated above, freed once.
            assert!(unsafe { slabs.free(class, again, size) }.unwrap().is_none());
        }
    }

    /// A slab's header names the owner it was made for, read from any of its objects; an
    /// object named with another class is refused.
    #[test]
    fn an_objects_owner_is_its_slabs() {
        let small = Class::of(layout(16, 8)).unwrap();
        let other = Class::of(layout(512, 8)).unwrap();
        let mut slabs = Slabs::new();
        let mut blocks = Blocks(Vec::new());
        blocks.add(&mut slabs, small, Owner::Heap);
        let first = slabs.alloc(small, 16).unwrap();
        let mut cpu = Slabs::new();
        blocks.add(&mut cpu, small, Owner::Cpu(3));
        let second = cpu.alloc(small, 16).unwrap();
        // SAFETY: objects allocated above, not freed yet.
        unsafe {
            assert_eq!(Slabs::owner_of(small, first), Ok(Owner::Heap));
            assert_eq!(Slabs::owner_of(small, second), Ok(Owner::Cpu(3)));
            assert_eq!(Slabs::owner_of(other, second), Err(SlabError::NotAnObject));
            assert!(slabs.free(small, first, 16).unwrap().is_none());
            assert!(cpu.free(small, second, 16).unwrap().is_none());
        }
    }

    #[test]
    fn a_free_of_another_class_changes_nothing() {
        let small = Class::of(layout(16, 8)).unwrap();
        let other = Class::of(layout(512, 8)).unwrap();
        let mut slabs = Slabs::new();
        let mut blocks = Blocks(Vec::new());
        blocks.add(&mut slabs, small, Owner::Heap);
        let object = slabs.alloc(small, 16).unwrap();
        let before = (slabs.bytes().in_use(), slabs.bytes().free());
        // SAFETY: the slab refuses it before writing anything.
        let refused = unsafe { slabs.free(other, object, 16) };
        assert_eq!(refused.err(), Some(SlabError::NotAnObject));
        assert_eq!((slabs.bytes().in_use(), slabs.bytes().free()), before);
        // SAFETY: allocated above, freed once.
        assert!(unsafe { slabs.free(small, object, 16) }.unwrap().is_none());
    }
}
