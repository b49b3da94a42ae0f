// SPDX-License-Identifier: GPL-2.0

//! Chains posted with their owner: the object that holds a chain's work
//! requests and the memory they refer to goes with the chain, and comes
//! back, owned, in the chain's one completion.
//!
//! A chain is linked with only its last request signaled (`Chain::link`):
//! send-queue requests complete in order, so that completion says the
//! device is done with the whole chain. The unsignaled ones complete only
//! if they fail or are flushed, always before the last; their handler sees
//! the owner borrowed. The completion queue finds the owner from the
//! address of a [`Cqe`] embedded in it, as the workqueue finds a work
//! item's owner from its `work_struct` (`impl_chain_owner!` says where).

use core::{cell::UnsafeCell, marker::PhantomData, ptr::NonNull};

use kernel::prelude::*;

use super::{qp::Qp, wr::Chain};
use crate::bindings;

/// A type whose chains' unsignaled requests report to it (see the module
/// documentation).
///
/// # Safety
///
/// `ERR_OFFSET` is the byte offset in `Self` of a `Cqe<Self, ERR>` field
/// (`impl_chain_owner!` computes it).
pub(crate) unsafe trait ChainErrors: Sized + Send + Sync {
    /// Where the [`Cqe`] of its unsignaled requests is.
    const ERR_OFFSET: usize;

    /// An unsignaled request of a posted chain failed or was flushed
    /// (`status`, `vendor_err`); the chain's completion follows.
    fn request_failed(this: &Self, status: u32, vendor_err: u32);
}

/// An owner of posted chains (see the module documentation). `ID` tells
/// apart the kinds of chain one type posts, each with its own [`Cqe`] and
/// its own [`ChainOwner::completed`].
///
/// # Safety
///
/// `DONE_OFFSET` is the byte offset in `Self` of a `Cqe<Self, ID>` field
/// (`impl_chain_owner!` computes it).
pub(crate) unsafe trait ChainOwner<const ID: u64>: ChainErrors {
    /// Where the chain's [`Cqe`] is.
    const DONE_OFFSET: usize;

    /// The chain's last request completed (`status` 0: success), or, for a
    /// post that failed partway, the marker behind it: the device is done
    /// with everything the chain referred to. Runs in the CQ's work item.
    fn completed(this: KBox<Self>, status: u32, vendor_err: u32);
}

/// The [`Cqe`] id of unsignaled requests.
pub(crate) const ERR: u64 = u64::MAX;

/// Implements [`ChainOwner`] for `$t` with `Cqe` fields `$done` (one per
/// kind `$id`) and `$err` (its unsignaled requests'); the handlers are
/// `$t`'s `completed_<...>` per kind, given as `$f`, and its
/// `request_failed`.
macro_rules! impl_chain_owner {
    ($t:ty { errors: $err:ident => $failed:path, $($id:ident => $done:ident => $f:path,)* }) => {
        // The fields have the types the offsets promise (a compile error
        // otherwise).
        const _: fn(&$t) -> &$crate::rdma::owned::Cqe<$t, { $crate::rdma::owned::ERR }> =
            |t| &t.$err;
        $(const _: fn(&$t) -> &$crate::rdma::owned::Cqe<$t, $id> = |t| &t.$done;)*
        // SAFETY: `ERR_OFFSET` is the offset of `$err`, a `Cqe<$t, ERR>`.
        unsafe impl $crate::rdma::owned::ChainErrors for $t {
            const ERR_OFFSET: usize = core::mem::offset_of!($t, $err);
            fn request_failed(this: &Self, status: u32, vendor_err: u32) {
                $failed(this, status, vendor_err)
            }
        }
        $(
            // SAFETY: `DONE_OFFSET` is the offset of `$done`, a `Cqe<$t, $id>`.
            unsafe impl $crate::rdma::owned::ChainOwner<$id> for $t {
                const DONE_OFFSET: usize = core::mem::offset_of!($t, $done);
                fn completed(this: kernel::alloc::KBox<Self>, status: u32, vendor_err: u32) {
                    $f(this, status, vendor_err)
                }
            }
        )*
    };
}
pub(crate) use impl_chain_owner;

/// A completion-queue entry embedded in a [`ChainOwner`].
#[repr(transparent)]
pub(crate) struct Cqe<T, const ID: u64> {
    cqe: UnsafeCell<bindings::ib_cqe>,
    _owner: PhantomData<fn(T)>,
}

// SAFETY: the entry is written once, at creation; the device only reads it.
unsafe impl<T, const ID: u64> Sync for Cqe<T, ID> {}
// SAFETY: as above.
unsafe impl<T, const ID: u64> Send for Cqe<T, ID> {}

impl<T: ChainOwner<ID>, const ID: u64> Cqe<T, ID> {
    /// The entry of `T`'s chains of kind `ID` (not [`ERR`]: that one is
    /// [`Cqe::for_errors`]).
    pub(crate) const fn for_chains() -> Self {
        const { assert!(ID != ERR) };
        Self {
            cqe: UnsafeCell::new(bindings::ib_cqe {
                done: Some(done::<T, ID>),
            }),
            _owner: PhantomData,
        }
    }
}

impl<T: ChainErrors> Cqe<T, ERR> {
    /// The entry of `T`'s unsignaled requests.
    pub(crate) const fn for_errors() -> Self {
        Self {
            cqe: UnsafeCell::new(bindings::ib_cqe {
                done: Some(request_failed::<T>),
            }),
            _owner: PhantomData,
        }
    }
}

/// The owner of a signaled completion.
///
/// # Safety
///
/// Called by the CQ only, for the signaled request of a chain posted by
/// [`post_owned`] with a `T` leaked from a `KBox`, whose `Cqe<T, ID>`
/// this completion carries; it is the chain's only signaled completion.
unsafe extern "C" fn done<T: ChainOwner<ID>, const ID: u64>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // The request carried the `Cqe<T, ID>` at `T::DONE_OFFSET` of a leaked
    // `KBox<T>` (the trait's and the function's contract); this completion,
    // the chain's only signaled one, takes it back.
    // SAFETY: `wr_cqe` points `T::DONE_OFFSET` into a leaked `KBox<T>`.
    let owner = unsafe {
        let cqe = wc.__bindgen_anon_1.wr_cqe.cast::<u8>();
        KBox::from_raw(cqe.sub(T::DONE_OFFSET).cast::<T>())
    };
    T::completed(owner, wc.status, wc.vendor_err);
}

/// An unsignaled request of a chain completed (failed or flushed).
///
/// # Safety
///
/// Called by the CQ only, for an unsignaled request of a chain posted by
/// [`post_owned`], whose owner lives until the chain's signaled
/// completion, which comes after this one.
unsafe extern "C" fn request_failed<T: ChainErrors>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // SAFETY: the request carried the `Cqe<T, ERR>` at `T::ERR_OFFSET` of
    // a live owner (the function's contract), borrowed for this call.
    let owner = unsafe {
        let cqe = wc.__bindgen_anon_1.wr_cqe.cast::<u8>();
        &*cqe.sub(T::ERR_OFFSET).cast::<T>()
    };
    T::request_failed(owner, wc.status, wc.vendor_err);
}

/// What became of a chain [`post_owned`] could not post whole.
pub(crate) enum PostError<T> {
    /// Nothing was posted: the owner is back, with the error.
    Unposted(KBox<T>, Error),
    /// Part was posted, and a marker behind it: the owner's completion
    /// comes once the QP (which the caller must move to the error state,
    /// `fence` below) has flushed them.
    Fenced(Error),
    /// Part was posted and no marker could be: nothing says when the
    /// device is done with the owner's memory, so it is leaked, never
    /// freed early.
    Leaked(Error),
}

/// Posts `chain(owner)`, linked to `owner`'s entries, on `qp`, handing
/// `owner` to the chain's completion ([`ChainOwner::completed`]). If the
/// post fails partway, `fence` runs first (it must move the QP to the error
/// state: the marker must only be flushed), then a signaled marker follows
/// the posted requests.
pub(crate) fn post_owned<T: ChainOwner<ID>, const ID: u64>(
    qp: &Qp,
    owner: KBox<T>,
    chain: impl FnOnce(&mut T) -> &mut Chain,
    fence: impl FnOnce(),
) -> core::result::Result<(), PostError<T>> {
    let Some(posting) = qp.posting() else {
        return Err(PostError::Unposted(owner, ENOTCONN));
    };
    // Every pointer handed to the device derives from `raw`.
    let raw = KBox::into_raw(owner);
    let base = raw.cast::<u8>();
    // SAFETY: the offsets are those of fields of `T` (the trait's contract).
    let (done_cqe, err_cqe) = unsafe {
        (
            base.add(T::DONE_OFFSET).cast::<bindings::ib_cqe>(),
            base.add(T::ERR_OFFSET).cast::<bindings::ib_cqe>(),
        )
    };
    // SAFETY: `raw` is the live, unshared owner (just leaked); the borrow
    // ends before the post.
    let c = chain(unsafe { &mut *raw });
    let n = c.len();
    if n == 0 {
        // SAFETY: nothing was posted; `raw` came from `into_raw` above.
        return Err(PostError::Unposted(unsafe { KBox::from_raw(raw) }, EINVAL));
    }
    let head = c.link(done_cqe, err_cqe);
    let requests = c.requests();
    let mut bad: *const bindings::ib_send_wr = core::ptr::null();
    // The chain is linked and its requests' memory belongs to the owner,
    // which the chain's completion takes back. From here on `raw` is not
    // touched unless nothing was posted.
    // SAFETY: the requests' memory outlives the device's use of it.
    let rc = unsafe { bindings::svcrdma_rs_post_send_chain(posting.as_ptr(), head, &mut bad) };
    if rc == 0 {
        return Ok(());
    }
    let e = Error::from_errno(rc);
    // Without `bad` (siw queues the whole chain and then fails to start
    // sending), or with one not in the chain, all are taken as posted.
    let posted = requests.position(bad).unwrap_or(n);
    if posted == n {
        // The signaled request went out: its completion takes the owner.
        fence();
        return Err(PostError::Fenced(e));
    }
    if posted == 0 {
        // SAFETY: nothing was posted: no completion refers to the owner,
        // which came from `KBox::into_raw` above.
        return Err(PostError::Unposted(unsafe { KBox::from_raw(raw) }, e));
    }
    // The chain failed: so the owner is told, whatever the marker's own
    // status turns out to be (should the QP not go to the error state, the
    // marker, a write of nothing, would succeed).
    // The chain's signaled request was not posted, so the owner lives until
    // the marker's completion; only shared borrows of it exist (the failed
    // requests' handler).
    // SAFETY: `raw` is live and not mutably borrowed (just above).
    T::request_failed(unsafe { &*raw }, bindings::IB_WC_WR_FLUSH_ERR, 0);
    fence();
    // The marker, in a chain of its own (the owner's may be borrowed by
    // the failed requests' handler by now).
    let mut marker = Chain::new();
    let marked = marker.flush_marker().is_ok() && {
        let head = marker.link(done_cqe, err_cqe);
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // Its completion (a flush: the QP is in the error state) comes after
        // the posted requests' and takes the owner back.
        // SAFETY: a linked chain whose one request refers to no memory.
        unsafe { bindings::svcrdma_rs_post_send_chain(posting.as_ptr(), head, &mut bad) == 0 }
    };
    if marked {
        Err(PostError::Fenced(e))
    } else {
        Err(PostError::Leaked(e))
    }
}

/// A shared reference to the object that owns a pool, kept by the pool's
/// items, which cannot borrow it (they are boxed, pooled and handed to
/// completions).
///
/// # Invariants
///
/// `ptr` points to a live `T`, which outlives the value and every clone of
/// it (the promise made to [`Backref::new`]).
pub(crate) struct Backref<T>(NonNull<T>);

// SAFETY: the value only gives shared references to a `Sync` `T`.
unsafe impl<T: Sync> Send for Backref<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Backref<T> {}

impl<T> Backref<T> {
    /// A reference to `owner` that outlives the borrow.
    ///
    /// # Safety
    ///
    /// `owner` must not move, and must outlive the value and every clone of
    /// it.
    pub(crate) unsafe fn new(owner: &T) -> Self {
        // INVARIANT: live now, and for as long (caller).
        Self(NonNull::from(owner))
    }

    /// The owner.
    pub(crate) fn get(&self) -> &T {
        // SAFETY: live while the value is (invariant).
        unsafe { self.0.as_ref() }
    }
}

impl<T> Clone for Backref<T> {
    fn clone(&self) -> Self {
        // INVARIANT: the promise made to `new` covers clones.
        Self(self.0)
    }
}
