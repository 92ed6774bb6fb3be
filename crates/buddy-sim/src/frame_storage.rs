//! Where a zone's frame metadata lives: [`FrameStorage`].

use core::ptr::NonNull;

use crate::frame::Frame;

/// Memory holding a zone's [`Frame`]s, which [`Zone`](crate::Zone) is generic over: a
/// `Vec<Frame>` or `Box<[Frame]>` (feature `alloc`; another type of one's own over an
/// allocation is an `unsafe impl` of this trait), a `&[Frame]` (an array a kernel placed,
/// `&'static`), or a `[Frame; N]` held inline (a [`StaticZone`](crate::StaticZone)).
///
/// A zone reaches its frames through a pointer, not a slice reference: it does so several
/// times a call, and under Miri's Stacked Borrows every slice reference made or handed back
/// is retagged frame by frame, which made a call cost time in the zone's size. A `Vec` hands
/// out its pointer without making one.
///
/// # Safety
/// [`FrameStorage::frames`] returns a pointer to initialized frames that are valid for shared
/// access (as a `&[Frame]` is) for as long as the borrow of `self` it was called with, and
/// it returns the same frames, address and length, on every call while `self` is neither
/// moved nor mutably borrowed.
#[allow(unsafe_code)]
pub unsafe trait FrameStorage {
    /// The frames.
    fn frames(&self) -> NonNull<[Frame]>;
}

// SAFETY: the slice of the reference, borrowed for as long as `self` is.
#[allow(unsafe_code)]
unsafe impl FrameStorage for &[Frame] {
    #[inline]
    fn frames(&self) -> NonNull<[Frame]> {
        NonNull::from(*self)
    }
}

// SAFETY: the array, borrowed with `self`.
#[allow(unsafe_code)]
unsafe impl<const N: usize> FrameStorage for [Frame; N] {
    #[inline]
    fn frames(&self) -> NonNull<[Frame]> {
        NonNull::from(self.as_slice())
    }
}

// SAFETY: the vector's elements: `Vec::as_ptr` points at `len` initialized frames (dangling
// and aligned when there are none), which stay where they are while the vector is borrowed
// shared, and only a mutable borrow can reallocate them. `as_ptr` makes no slice
// reference, so Miri retags nothing.
#[cfg(any(feature = "alloc", feature = "testing", test, loom))]
#[allow(unsafe_code)]
unsafe impl FrameStorage for alloc::vec::Vec<Frame> {
    #[inline]
    fn frames(&self) -> NonNull<[Frame]> {
        let first = NonNull::new(self.as_ptr().cast_mut()).unwrap_or(NonNull::dangling());
        NonNull::slice_from_raw_parts(first, self.len())
    }
}

// SAFETY: the boxed slice, owned by `self` and borrowed with it.
#[cfg(any(feature = "alloc", feature = "testing", test, loom))]
#[allow(unsafe_code)]
unsafe impl FrameStorage for alloc::boxed::Box<[Frame]> {
    #[inline]
    fn frames(&self) -> NonNull<[Frame]> {
        NonNull::from(&**self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::boxed::Box;
    use std::vec::Vec;

    fn frames(n: usize) -> Vec<Frame> {
        (0..n).map(|_| Frame::new()).collect()
    }

    /// Each storage hands back its own frames: the same address and length as its slice.
    #[test]
    fn each_storage_points_at_its_frames() {
        let v = frames(5);
        assert_eq!(v.frames(), NonNull::from(v.as_slice()));
        let slice: &[Frame] = &v;
        assert_eq!(slice.frames(), NonNull::from(slice));
        let boxed: Box<[Frame]> = frames(3).into_boxed_slice();
        assert_eq!(boxed.frames(), NonNull::from(&*boxed));
        let array = [Frame::new(), Frame::new()];
        assert_eq!(array.frames(), NonNull::from(array.as_slice()));
        assert_eq!(Vec::<Frame>::new().frames().len(), 0);
    }
}
