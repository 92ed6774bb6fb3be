//! loom models (run with `RUSTFLAGS="--cfg loom"`, tests named `loom_*`): the slabs'
//! ownership protocol, over the real [`Slabs`] and their headers, and a negative control
//! loom must catch.
//!
//! A slab's header names the CPU whose slabs hold it. A free on any CPU reads that owner
//! from the header without a lock, then frees under the owner's lock
//! ([`Slabs::free_to_owner`]), while the owner allocates from the same slab under it. The
//! headers tell loom of every access to their fields (`slab::Accesses`): the fields the
//! owner's lock guards, and the owner and class, read without it. The CPUs' locks here are
//! loom's mutexes in place of the allocator's spin locks (which loom cannot see into), one
//! per CPU and one for the heap's own slabs, as [`GlobalAllocator`](crate::GlobalAllocator)
//! keeps them.

extern crate std;

use crate::slab::{Class, FreeSlab, Owner, SlabError, SlabOwners, Slabs, Source};
use core::alloc::Layout;
use core::ptr::NonNull;
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::alloc::{alloc, dealloc};
use std::vec::Vec;

/// Two CPUs' slabs and the heap's own, each behind its lock.
struct Owners {
    cpus: [Mutex<Slabs>; 2],
    heap: Mutex<Slabs>,
}

impl SlabOwners for Owners {
    fn with_slabs<R>(&self, owner: Owner, f: impl FnOnce(&mut Slabs) -> R) -> Option<R> {
        let slabs = match owner {
            Owner::Cpu(cpu) => self.cpus.get(cpu)?,
            Owner::Heap => &self.heap,
        };
        Some(f(&mut slabs.lock().unwrap()))
    }
}

/// A free under the lock of the CPU that calls, not the slab owner's: what reading the
/// owner from the header exists to prevent.
struct CallersLock<'a> {
    owners: &'a Owners,
    cpu: usize,
}

impl SlabOwners for CallersLock<'_> {
    fn with_slabs<R>(&self, _: Owner, f: impl FnOnce(&mut Slabs) -> R) -> Option<R> {
        self.owners.with_slabs(Owner::Cpu(self.cpu), f)
    }
}

/// The 64-byte objects' class.
fn class() -> Class {
    Class::of(Layout::from_size_align(64, 8).unwrap()).unwrap()
}

/// An object's address, to cross threads (the caller's hand-off of an object it owns).
#[derive(Clone, Copy)]
struct Object(usize);

impl Object {
    fn ptr(self) -> NonNull<u8> {
        NonNull::new(core::ptr::with_exposed_provenance_mut(self.0)).unwrap()
    }
}

/// An object of CPU `cpu`'s slabs, under its lock.
fn alloc_on(owners: &Owners, cpu: usize) -> Object {
    let object = owners.cpus[cpu].lock().unwrap().alloc(class(), 64).unwrap();
    Object(object.as_ptr().expose_provenance())
}

/// Frees `object` as the allocator does, through `owners`' locks.
fn free_through(owners: &impl SlabOwners, object: Object) -> Result<Option<FreeSlab>, SlabError> {
    // SAFETY: every object the models free came from `alloc_on` on these slabs, with the
    // class's size, and is freed once.
    unsafe { Slabs::free_to_owner(owners, class(), object.ptr(), 64) }
}

/// Two CPUs with empty slabs; CPU 0 holds a slab of the class (a block of the host's), of
/// which it has handed out `objects`. Returns the block, to give back after the model.
fn cpu0_with_objects(objects: usize) -> (Arc<Owners>, NonNull<u8>, Vec<Object>) {
    let owners = Arc::new(Owners {
        cpus: [Mutex::new(Slabs::new()), Mutex::new(Slabs::new())],
        heap: Mutex::new(Slabs::new()),
    });
    let layout = class().slab_layout();
    // SAFETY: a layout of a page, not zero-sized.
    let block = NonNull::new(unsafe { alloc(layout) }).unwrap();
    // SAFETY: a block of the class's slab layout, used by nothing else until `give_back`.
    unsafe {
        owners.cpus[0]
            .lock()
            .unwrap()
            .add(class(), block, Source::Heap, Owner::Cpu(0))
    };
    let held = (0..objects).map(|_| alloc_on(&owners, 0)).collect();
    (owners, block, held)
}

/// Checks CPU 0's slab holds `handed_out` objects and CPU 1 none, then frees the block.
fn check_and_give_back(owners: &Owners, block: NonNull<u8>, handed_out: usize) {
    let cpu0 = owners.cpus[0].lock().unwrap().class_counts(class());
    assert_eq!((cpu0.slabs, cpu0.objects), (1, handed_out));
    let cpu1 = owners.cpus[1].lock().unwrap().class_counts(class());
    assert_eq!((cpu1.slabs, cpu1.objects), (0, 0));
    // SAFETY: the block `cpu0_with_objects` allocated, with its layout; the model's threads
    // have joined and no slab uses it after this.
    unsafe { dealloc(block.as_ptr(), class().slab_layout()) };
}

/// CPU 1 frees `object` on a thread of its own, as the allocator does.
fn free_on_cpu1(
    owners: &Arc<Owners>,
    object: Object,
) -> thread::JoinHandle<Result<Option<FreeSlab>, SlabError>> {
    let owners = owners.clone();
    thread::spawn(move || free_through(&*owners, object))
}

/// CPU 1 frees an object of CPU 0's slab while CPU 0 allocates from that slab and frees
/// another: the free takes CPU 0's lock, whatever CPU calls, and the slab ends with exactly
/// the objects still handed out, each handed out once.
#[test]
fn loom_a_free_on_another_cpu_takes_the_slab_owners_lock() {
    loom::model(|| {
        let (owners, block, held) = cpu0_with_objects(2);
        let (theirs, mine) = (held[0], held[1]);
        let cpu1 = free_on_cpu1(&owners, theirs);
        let fresh = alloc_on(&owners, 0);
        assert!(free_through(&*owners, mine).unwrap().is_none());
        assert!(cpu1.join().unwrap().unwrap().is_none());
        // The fresh object is not one still handed out.
        assert_ne!(fresh.0, mine.0);
        check_and_give_back(&owners, block, 1);
    });
}

/// Both CPUs free CPU 0's objects at once, the slab's last two: one of the frees empties
/// it, and it stays (its class's only empty slab), with no object handed out.
#[test]
fn loom_two_cpus_free_a_slabs_last_objects_at_once() {
    loom::model(|| {
        let (owners, block, held) = cpu0_with_objects(2);
        let cpu1 = free_on_cpu1(&owners, held[0]);
        assert!(free_through(&*owners, held[1]).unwrap().is_none());
        assert!(cpu1.join().unwrap().unwrap().is_none());
        check_and_give_back(&owners, block, 0);
    });
}

/// The negative control: CPU 1 frees CPU 0's object under its own lock, while CPU 0
/// allocates from the same slab under CPU 0's; loom must report the two unsynchronized
/// writes of the slab's header.
#[test]
#[should_panic(expected = "Causality violation")]
fn loom_a_free_under_the_callers_lock_races_the_owner() {
    loom::model(|| {
        let (owners, block, held) = cpu0_with_objects(2);
        let theirs = held[0];
        let cpu1 = {
            let owners = owners.clone();
            thread::spawn(move || {
                let wrong = CallersLock {
                    owners: &owners,
                    cpu: 1,
                };
                free_through(&wrong, theirs)
            })
        };
        alloc_on(&owners, 0);
        let _ = cpu1.join();
        check_and_give_back(&owners, block, 2);
    });
}

/// The magazines' protocol, over the real [`Magazines`]: each CPU's blocks are reached by
/// the execution context that holds its exclusive id alone, their counts read by anyone,
/// and a drain request set by another CPU is seen by the owner. (The blocks are plain
/// numbers here: the frame table's marks are the zone's, checked by its own tests.)
mod magazines {
    use crate::cpu::Pinned;
    use crate::lock::IrqOff;
    use crate::magazine::{ExclusiveCpu, Magazines, ORDERS, OwnMagazines};
    use crate::slab::Class;
    use crate::usage::UsageKind;
    use buddy_sim::Order;
    use core::alloc::Layout;
    use core::ptr::NonNull;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::thread;

    /// `f` as loom's model, in a thread with room on its stack for the magazines (a CPU's
    /// are about 11 KiB, built there before they move), which the model's own lacks.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let f = alloc::sync::Arc::new(f);
        loom::model(move || {
            let f = f.clone();
            thread::Builder::new()
                .stack_size(1 << 20)
                .spawn(move || f())
                .unwrap()
                .join()
                .unwrap();
        });
    }

    /// `f` on CPU `cpu`'s magazines, as the holder of id `cpu`.
    fn as_owner<R>(magazines: &Magazines, cpu: usize, f: impl FnOnce(&OwnMagazines<'_>) -> R) -> R {
        let irq = IrqOff::new();
        let pinned = Pinned::new(&irq);
        // SAFETY: each model below holds id `cpu` in one thread at a time (its hand-overs
        // release and acquire), but the negative control, which breaks this on purpose; and
        // each passes CPU `cpu`'s magazines.
        let own = unsafe { OwnMagazines::new(ExclusiveCpu::new(cpu, &pinned), magazines) };
        f(&own)
    }

    /// The size class of 64-byte objects.
    fn class() -> Class {
        Class::of(Layout::from_size_align(64, 8).unwrap()).unwrap()
    }

    /// An object at `at` (an address: never read or written here).
    fn object(at: usize) -> NonNull<u8> {
        NonNull::new(core::ptr::without_provenance_mut(at)).unwrap()
    }

    /// The owner's round: two pages in, one out, counted; an object in and out, counted.
    fn round(own: &OwnMagazines<'_>, first: usize) -> usize {
        assert!(own.push_if(first, Order::ZERO, || true));
        own.count(UsageKind::PageTable, Order::ZERO, false);
        assert!(own.push_if(first + 0x1000, Order::ZERO, || true));
        own.count(UsageKind::PageTable, Order::ZERO, false);
        let at = own.pop(Order::ZERO).unwrap();
        own.count(UsageKind::PageTable, Order::ZERO, true);
        assert!(own.push_object(class(), object(first + 0x40), 64));
        assert_eq!(own.pop_object(class(), 64), Some(object(first + 0x40)));
        at
    }

    /// Two CPUs each on their own magazines at once, CPU 1 also reading CPU 0's counts and
    /// asking for its blocks back: each pops what it pushed last, and CPU 0 sees the
    /// request once.
    #[test]
    fn loom_each_cpu_reaches_its_own_magazines_and_reads_the_others_counts() {
        model(|| {
            let cpus = Arc::new([Magazines::new([32; ORDERS]), Magazines::new([32; ORDERS])]);
            let other = {
                let cpus = cpus.clone();
                thread::spawn(move || {
                    let at = as_owner(&cpus[1], 1, |own| round(own, 0x10_000));
                    let seen = cpus[0].held(0);
                    assert!(seen <= 2, "{seen}");
                    let _ = cpus[0].usage();
                    let objects = cpus[0].cached_objects(class());
                    assert!(objects <= 1, "{objects}");
                    let _ = cpus[0].objects_requested();
                    cpus[0].request_drain();
                    cpus[0].request_object_drain();
                    at
                })
            };
            let mine = as_owner(&cpus[0], 0, |own| round(own, 0x20_000));
            assert_eq!(mine, 0x21_000);
            assert_eq!(other.join().unwrap(), 0x11_000);
            let asked = as_owner(&cpus[0], 0, |own| {
                (own.take_drain_request(), own.take_drain_request())
            });
            assert_eq!(asked, (true, false));
            let asked = as_owner(&cpus[0], 0, |own| {
                (
                    own.take_object_drain_request(),
                    own.take_object_drain_request(),
                )
            });
            assert_eq!(asked, (true, false));
            assert_eq!((cpus[0].held(0), cpus[1].held(0)), (1, 1));
            assert_eq!(cpus[0].pages(), 1);
            assert_eq!(
                (cpus[0].cached_objects(class()), cpus[0].objects_requested()),
                (0, 0)
            );
        });
    }

    /// An id handed from one thread to another with release and acquire (a task that
    /// leaves a CPU, another that enters it): the second sees the first's blocks.
    #[test]
    fn loom_an_id_handed_over_sees_the_blocks_of_its_last_holder() {
        model(|| {
            let cpus = Arc::new([Magazines::new([32; ORDERS])]);
            let held = Arc::new(AtomicBool::new(true));
            let first = {
                let (cpus, held) = (cpus.clone(), held.clone());
                thread::spawn(move || {
                    as_owner(&cpus[0], 0, |own| round(own, 0x30_000));
                    held.store(false, Ordering::Release);
                })
            };
            if !held.load(Ordering::Acquire) {
                let at = as_owner(&cpus[0], 0, |own| own.pop(Order::ZERO));
                assert_eq!(at, Some(0x30_000));
            }
            first.join().unwrap();
        });
    }

    /// The negative control: two threads with the same id at once; loom must report the
    /// unsynchronized accesses to the magazine's blocks.
    #[test]
    #[should_panic(expected = "Causality violation")]
    fn loom_two_holders_of_one_id_race() {
        model(|| {
            let cpus = Arc::new([Magazines::new([32; ORDERS])]);
            let other = {
                let cpus = cpus.clone();
                thread::spawn(move || as_owner(&cpus[0], 0, |own| round(own, 0x40_000)))
            };
            as_owner(&cpus[0], 0, |own| round(own, 0x50_000));
            let _ = other.join();
        });
    }
}
