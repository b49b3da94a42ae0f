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
//!
//! Chains are posted on an [`Endpoint`] only, and every completion comes
//! with the endpoint's owner (its QP's event handler, which the QP keeps
//! alive until it is destroyed, after its last completion): the owner of a
//! chain needs no reference of its own to it.

use core::{cell::UnsafeCell, marker::PhantomData};

use kernel::prelude::*;

use super::{
    endpoint::{Endpoint, EndpointOwner},
    wr::Chain,
    Cq,
};
use crate::{
    anchor::{Anchor, AnchorRef},
    bindings,
};

/// A type whose chains' unsignaled requests report to it (see the module
/// documentation).
///
/// # Safety
///
/// `ERR_OFFSET` is the byte offset in `Self` of a `Cqe<Self, ERR>` field
/// (`impl_chain_owner!` computes it).
pub(crate) unsafe trait ChainErrors: Sized + Send + Sync {
    /// The owner of the endpoints its chains are posted on.
    type Owner: EndpointOwner;

    /// Where the [`Cqe`] of its unsignaled requests is.
    const ERR_OFFSET: usize;

    /// An unsignaled request of a chain posted on an endpoint of `owner`
    /// failed or was flushed (`status`, `vendor_err`); the chain's
    /// completion follows.
    fn request_failed(owner: &Self::Owner, this: &Self, status: u32, vendor_err: u32);
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
    /// with everything the chain referred to. `owner` is that of the
    /// endpoint the chain was posted on. Runs in the CQ's work item.
    fn completed(owner: &Self::Owner, this: KBox<Self>, status: u32, vendor_err: u32);
}

/// The [`Cqe`] id of unsignaled requests.
pub(crate) const ERR: u64 = u64::MAX;

/// Implements [`ChainOwner`] for `$t`, posted on endpoints of `$owner`,
/// with `Cqe` fields `$done` (one per kind `$id`) and `$err` (its
/// unsignaled requests'); the handlers are `$f` per kind, and `$failed`.
macro_rules! impl_chain_owner {
    ($t:ty {
        owner: $owner:ty,
        errors: $err:ident => $failed:path,
        $($id:ident => $done:ident => $f:path,)*
    }) => {
        // The fields have the types the offsets promise (a compile error
        // otherwise).
        const _: fn(&$t) -> &$crate::rdma::owned::Cqe<$t, { $crate::rdma::owned::ERR }> =
            |t| &t.$err;
        $(const _: fn(&$t) -> &$crate::rdma::owned::Cqe<$t, $id> = |t| &t.$done;)*
        // SAFETY: `ERR_OFFSET` is the offset of `$err`, a `Cqe<$t, ERR>`.
        unsafe impl $crate::rdma::owned::ChainErrors for $t {
            type Owner = $owner;
            const ERR_OFFSET: usize = core::mem::offset_of!($t, $err);
            fn request_failed(owner: &$owner, this: &Self, status: u32, vendor_err: u32) {
                $failed(owner, this, status, vendor_err)
            }
        }
        $(
            // SAFETY: `DONE_OFFSET` is the offset of `$done`, a `Cqe<$t, $id>`.
            unsafe impl $crate::rdma::owned::ChainOwner<$id> for $t {
                const DONE_OFFSET: usize = core::mem::offset_of!($t, $done);
                fn completed(
                    owner: &$owner,
                    this: kernel::alloc::KBox<Self>,
                    status: u32,
                    vendor_err: u32,
                ) {
                    $f(owner, this, status, vendor_err)
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

/// The owner of the endpoint whose CQ `cq` is, in one of its completion
/// callbacks.
///
/// # Safety
///
/// `cq` is the CQ of a running completion callback, for a request posted
/// on the QP of an `Endpoint<H>`; `'a` ends with the callback.
unsafe fn endpoint_owner<'a, H: EndpointOwner>(cq: *mut bindings::ib_cq) -> &'a H {
    // The endpoint's CQs carry the anchor of its owner, on which its QP
    // holds a count until it is destroyed; it is destroyed only once
    // drained, after every completion of its requests has been handled.
    // SAFETY: so the context is a counted anchor of an `H`, held for the call.
    let owner = unsafe { AnchorRef::<H>::borrow_raw(Cq::context_of(cq).cast::<Anchor>()) };
    owner.get_ref()
}

/// The owner of a signaled completion.
///
/// # Safety
///
/// Called by the CQ only, for the signaled request of a chain posted by
/// [`post_owned`] with a `T` leaked from a `KBox`, whose `Cqe<T, ID>`
/// this completion carries; it is the chain's only signaled completion.
unsafe extern "C" fn done<T: ChainOwner<ID>, const ID: u64>(
    cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // SAFETY: [`post_owned`] posts on an `Endpoint<T::Owner>` only.
    let ep_owner = unsafe { endpoint_owner::<T::Owner>(cq) };
    // The request carried the `Cqe<T, ID>` at `T::DONE_OFFSET` of a leaked
    // `KBox<T>` (the trait's and the function's contract); this completion,
    // the chain's only signaled one, takes it back.
    // SAFETY: `wr_cqe` points `T::DONE_OFFSET` into a leaked `KBox<T>`.
    let owner = unsafe {
        let cqe = wc.__bindgen_anon_1.wr_cqe.cast::<u8>();
        KBox::from_raw(cqe.sub(T::DONE_OFFSET).cast::<T>())
    };
    T::completed(ep_owner, owner, wc.status, wc.vendor_err);
}

/// An unsignaled request of a chain completed (failed or flushed).
///
/// # Safety
///
/// Called by the CQ only, for an unsignaled request of a chain posted by
/// [`post_owned`], whose owner lives until the chain's signaled
/// completion, which comes after this one.
unsafe extern "C" fn request_failed<T: ChainErrors>(
    cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // SAFETY: [`post_owned`] posts on an `Endpoint<T::Owner>` only.
    let ep_owner = unsafe { endpoint_owner::<T::Owner>(cq) };
    // SAFETY: the request carried the `Cqe<T, ERR>` at `T::ERR_OFFSET` of
    // a live owner (the function's contract), borrowed for this call.
    let owner = unsafe {
        let cqe = wc.__bindgen_anon_1.wr_cqe.cast::<u8>();
        &*cqe.sub(T::ERR_OFFSET).cast::<T>()
    };
    T::request_failed(ep_owner, owner, wc.status, wc.vendor_err);
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
    /// device is done with the owner's memory, so it is kept as an
    /// [`Orphan`], which only the endpoint gives back once its QP is
    /// destroyed ([`super::endpoint::Endpoint::reclaim`]).
    Leaked(Orphan<T>, Error),
}

/// An owner whose chain was posted in part, with no completion to give it
/// back. Dropping it leaks the owner (never frees it early).
///
/// # Invariants
///
/// `ptr` is a leaked `KBox<T>`, referred to only by requests posted on the
/// QP of the endpoint at address `ep`.
pub(crate) struct Orphan<T> {
    pub(super) ptr: core::ptr::NonNull<T>,
    pub(super) ep: usize,
}

// SAFETY: an orphan is the only handle to its owner, a `KBox<T>`, which
// may move between threads if `T` may.
unsafe impl<T: Send> Send for Orphan<T> {}

/// Posts `chain(owner)`, linked to `owner`'s entries, on `ep`'s QP,
/// handing `owner` to the chain's completion ([`ChainOwner::completed`]).
/// If the post fails partway, `fence` runs first (it must move the QP to
/// the error state: the marker must only be flushed), then a signaled
/// marker follows the posted requests.
pub(crate) fn post_owned<T: ChainOwner<ID>, const ID: u64>(
    ep: &Endpoint<T::Owner>,
    owner: KBox<T>,
    chain: impl FnOnce(&mut T) -> &mut Chain,
    fence: impl FnOnce(),
) -> core::result::Result<(), PostError<T>> {
    let Some(posting) = ep.posting() else {
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
    let rc = unsafe { bindings::svcrdma_rs_ib_post_send(posting.as_ptr(), head, &mut bad) };
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
    let failed = unsafe { &*raw };
    T::request_failed(posting.owner(), failed, bindings::IB_WC_WR_FLUSH_ERR, 0);
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
        unsafe { bindings::svcrdma_rs_ib_post_send(posting.as_ptr(), head, &mut bad) == 0 }
    };
    if marked {
        Err(PostError::Fenced(e))
    } else {
        // INVARIANT: leaked above; only this endpoint's requests refer to it.
        let orphan = core::ptr::NonNull::new(raw).map(|ptr| Orphan {
            ptr,
            ep: core::ptr::from_ref(ep) as usize,
        });
        match orphan {
            Some(o) => Err(PostError::Leaked(o, e)),
            // `KBox::into_raw` never gives null.
            None => Err(PostError::Fenced(e)),
        }
    }
}
