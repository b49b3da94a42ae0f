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

use core::{cell::UnsafeCell, marker::PhantomData, ptr::NonNull};

use kernel::{prelude::*, sync::SpinLock};

use super::{
    endpoint::{Endpoint, EndpointOwner, EndpointPosting},
    wr::Chain,
    Cq,
};
use crate::{
    anchor::{Anchor, AnchorRef},
    bindings,
    fifo::InlineFifo,
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
    /// with everything the chain referred to, and with every chain its
    /// [`SendOrder`] numbered before it (`done`). `owner` is that of the
    /// endpoint the chain was posted on. Runs in the CQ's work item.
    fn completed(
        owner: &Self::Owner,
        this: KBox<Self>,
        status: u32,
        vendor_err: u32,
        done: Completion,
    );
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
                    done: $crate::rdma::owned::Completion,
                ) {
                    $f(owner, this, status, vendor_err, done)
                }
            }
        )*
    };
}
pub(crate) use impl_chain_owner;

/// A completion-queue entry embedded in a [`ChainOwner`], with the number
/// its [`SendOrder`] gave the chain last posted with it.
#[repr(C)]
pub(crate) struct Cqe<T, const ID: u64> {
    /// First: the completion's `wr_cqe` points here.
    cqe: UnsafeCell<bindings::ib_cqe>,
    seq: UnsafeCell<u64>,
    _owner: PhantomData<fn(T)>,
}

// The `ib_cqe` is written once, at creation, and the device only reads it;
// `seq` is written by the post of the owner's chain, while the owner is the
// poster's alone, and read by that chain's completion, which the post
// happens before.
// SAFETY: shared use only reads, or writes ordered before the reads above.
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
            seq: UnsafeCell::new(0),
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
            seq: UnsafeCell::new(0),
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
/// [`SendOrder::post`] with a `T` leaked from a `KBox`, whose `Cqe<T, ID>`
/// this completion carries; it is the chain's only signaled completion.
unsafe extern "C" fn done<T: ChainOwner<ID>, const ID: u64>(
    cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // SAFETY: [`SendOrder::post`] posts on an `Endpoint<T::Owner>` only.
    let ep_owner = unsafe { endpoint_owner::<T::Owner>(cq) };
    // The request carried the `Cqe<T, ID>` at `T::DONE_OFFSET` of a leaked
    // `KBox<T>` (the trait's and the function's contract); this completion,
    // the chain's only signaled one, takes it back.
    // SAFETY: a send-queue completion carries its request's `wr_cqe` (the
    // union's member the poster set).
    let cqe = unsafe { wc.__bindgen_anon_1.wr_cqe };
    // The number the chain's post wrote into the entry (`post_chain`),
    // before the post, which happens before this completion.
    // SAFETY: `wr_cqe` points at the `Cqe<T, ID>` (whose first field is the
    // `ib_cqe`) of a leaked, live `KBox<T>`; nothing writes `seq` now.
    let seq = unsafe { *(*cqe.cast::<Cqe<T, ID>>()).seq.get() };
    // SAFETY: `wr_cqe` points `T::DONE_OFFSET` into a leaked `KBox<T>`.
    let owner = unsafe { KBox::from_raw(cqe.cast::<u8>().sub(T::DONE_OFFSET).cast::<T>()) };
    // SAFETY: as for `endpoint_owner` above.
    let anchor = unsafe { Cq::context_of(cq) } as usize;
    T::completed(
        ep_owner,
        owner,
        wc.status,
        wc.vendor_err,
        Completion { seq, anchor },
    );
}

/// An unsignaled request of a chain completed (failed or flushed).
///
/// # Safety
///
/// Called by the CQ only, for an unsignaled request of a chain posted by
/// [`SendOrder::post`], whose owner lives until the chain's signaled
/// completion, which comes after this one.
unsafe extern "C" fn request_failed<T: ChainErrors>(
    cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // SAFETY: [`SendOrder::post`] posts on an `Endpoint<T::Owner>` only.
    let ep_owner = unsafe { endpoint_owner::<T::Owner>(cq) };
    // SAFETY: the request carried the `Cqe<T, ERR>` at `T::ERR_OFFSET` of
    // a live owner (the function's contract), borrowed for this call.
    let owner = unsafe {
        let cqe = wc.__bindgen_anon_1.wr_cqe.cast::<u8>();
        &*cqe.sub(T::ERR_OFFSET).cast::<T>()
    };
    T::request_failed(ep_owner, owner, wc.status, wc.vendor_err);
}

/// What became of a chain [`SendOrder::post`] could not post whole.
pub(crate) enum PostError<T> {
    /// Nothing was posted: the owner is back, with the error.
    Unposted(KBox<T>, Error),
    /// Part was posted, and a marker behind it: the owner's completion
    /// comes once the QP (which the caller must move to the error state,
    /// `fence` below) has flushed them.
    Fenced(Error),
    /// Part was posted and no marker could be: nothing says when the
    /// device is done with the owner's memory, so it is kept as an
    /// [`Orphan`], given back only once the endpoint's QP is destroyed
    /// ([`Orphan::reclaim`]).
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
    ptr: NonNull<T>,
    ep: usize,
}

// SAFETY: an orphan is the only handle to its owner, a `KBox<T>`, which
// may move between threads if `T` may.
unsafe impl<T: Send> Send for Orphan<T> {}

impl<T> Orphan<T> {
    /// The owner, once `ep`'s QP is destroyed (the device no longer uses
    /// its memory, and no completion refers to it); before that, or for
    /// another endpoint's orphan, the orphan unchanged.
    pub(crate) fn reclaim<H: EndpointOwner>(
        self,
        ep: &Endpoint<H>,
    ) -> core::result::Result<KBox<T>, Self> {
        if !ep.is_destroyed() || self.ep != core::ptr::from_ref(ep) as usize {
            return Err(self);
        }
        // SAFETY: a leaked `KBox<T>` (invariant) whose only users, `ep`'s
        // requests, are gone with its QP.
        Ok(unsafe { KBox::from_raw(self.ptr.as_ptr()) })
    }
}

/// What [`post_chain`] did with a chain.
enum Attempt<T> {
    /// Posted whole; its signaled last request's completion takes the
    /// owner back.
    Signaled,
    /// Posted whole with no request signaled: the owner, leaked, waits for
    /// a chain posted after it to complete ([`SendOrder`]).
    Unsignaled(NonNull<T>),
    /// Nothing was posted: the owner is back.
    Unposted(KBox<T>, Error),
    /// The post failed after the signaled last request went out: its
    /// completion takes the owner, once the QP is fenced.
    FenceOnly(Error),
    /// Part of the chain was posted, without its signaled request (or the
    /// chain has none): the owner, leaked, needs a marker behind the posted
    /// requests ([`recover`]).
    Partial(NonNull<T>, Error),
}

/// Posts `chain(owner)`, linked to `owner`'s entries, on the QP of
/// `posting` as the chain numbered `seq`, signaled or not. Only the post:
/// what a failure needs that may sleep (moving the QP to the error state,
/// a marker) is [`recover`]'s, after the caller's locks are dropped.
fn post_chain<T: ChainOwner<ID>, const ID: u64>(
    posting: &EndpointPosting<'_, T::Owner>,
    owner: KBox<T>,
    chain: impl FnOnce(&mut T) -> &mut Chain,
    seq: u64,
    signaled: bool,
) -> Attempt<T> {
    // Every pointer handed to the device derives from `raw`.
    let ptr = NonNull::from(KBox::leak(owner));
    let raw = ptr.as_ptr();
    let base = raw.cast::<u8>();
    // SAFETY: the offsets are those of fields of `T` (the trait's contract).
    let (done_cqe, err_cqe) = unsafe {
        (
            base.add(T::DONE_OFFSET).cast::<bindings::ib_cqe>(),
            base.add(T::ERR_OFFSET).cast::<bindings::ib_cqe>(),
        )
    };
    // The chain's number, for its completion (or its marker's).
    // SAFETY: `done_cqe` is the start of the owner's `Cqe<T, ID>` (its
    // first field); the owner is ours alone until the post.
    unsafe { *(*done_cqe.cast::<Cqe<T, ID>>()).seq.get() = seq };
    // SAFETY: `raw` is the live, unshared owner (just leaked); the borrow
    // ends before the post.
    let c = chain(unsafe { &mut *raw });
    let n = c.len();
    if n == 0 {
        // SAFETY: nothing was posted; `raw` was leaked from a box above.
        return Attempt::Unposted(unsafe { KBox::from_raw(raw) }, EINVAL);
    }
    let head = c.link(done_cqe, err_cqe, signaled);
    let requests = c.requests();
    let mut bad: *const bindings::ib_send_wr = core::ptr::null();
    // The chain is linked and its requests' memory belongs to the owner,
    // which the chain's completion takes back. From here on `raw` is not
    // touched unless nothing was posted.
    // SAFETY: the requests' memory outlives the device's use of it.
    let rc = unsafe { bindings::svcrdma_rs_ib_post_send(posting.as_ptr(), head, &mut bad) };
    if rc == 0 {
        return if signaled {
            Attempt::Signaled
        } else {
            Attempt::Unsignaled(ptr)
        };
    }
    let e = Error::from_errno(rc);
    // Without `bad` (siw queues the whole chain and then fails to start
    // sending), or with one not in the chain, all are taken as posted.
    let posted = requests.position(bad).unwrap_or(n);
    if posted == n && signaled {
        return Attempt::FenceOnly(e);
    }
    if posted == 0 {
        // SAFETY: nothing was posted: no completion refers to the owner,
        // which was leaked from a box above.
        return Attempt::Unposted(unsafe { KBox::from_raw(raw) }, e);
    }
    Attempt::Partial(ptr, e)
}

/// After a post that went out in part (`Attempt::Partial`, owner `ptr`):
/// tells the owner its chain failed, runs `fence` (it must move the QP to
/// the error state: the marker must only be flushed), then posts a
/// signaled marker behind the posted requests, whose completion takes the
/// owner back; without a marker, the owner becomes an [`Orphan`]. May
/// sleep: the caller holds no spinlock.
fn recover<T: ChainOwner<ID>, const ID: u64>(
    ep: &Endpoint<T::Owner>,
    posting: &EndpointPosting<'_, T::Owner>,
    ptr: NonNull<T>,
    fence: impl FnOnce(),
    e: Error,
) -> PostError<T> {
    let base = ptr.as_ptr().cast::<u8>();
    // SAFETY: the offsets are those of fields of `T` (the trait's contract).
    let (done_cqe, err_cqe) = unsafe {
        (
            base.add(T::DONE_OFFSET).cast::<bindings::ib_cqe>(),
            base.add(T::ERR_OFFSET).cast::<bindings::ib_cqe>(),
        )
    };
    // The chain failed: so the owner is told, whatever the marker's own
    // status turns out to be (should the QP not go to the error state, the
    // marker, a write of nothing, would succeed). Its signaled request was
    // not posted (or it has none), so the owner lives until the marker's
    // completion; only shared borrows of it exist (the failed requests'
    // handler).
    // SAFETY: `ptr` is the live, leaked owner, not mutably borrowed.
    let failed = unsafe { ptr.as_ref() };
    T::request_failed(posting.owner(), failed, bindings::IB_WC_WR_FLUSH_ERR, 0);
    fence();
    // The marker, in a chain of its own (the owner's may be borrowed by
    // the failed requests' handler by now).
    let mut marker = Chain::new();
    let marked = marker.flush_marker().is_ok() && {
        let head = marker.link(done_cqe, err_cqe, true);
        let mut bad: *const bindings::ib_send_wr = core::ptr::null();
        // Its completion (a flush: the QP is in the error state) comes after
        // the posted requests' and takes the owner back.
        // SAFETY: a linked chain whose one request refers to no memory.
        unsafe { bindings::svcrdma_rs_ib_post_send(posting.as_ptr(), head, &mut bad) == 0 }
    };
    if marked {
        PostError::Fenced(e)
    } else {
        // INVARIANT: leaked; only this endpoint's requests refer to it.
        PostError::Leaked(
            Orphan {
                ptr,
                ep: core::ptr::from_ref(ep) as usize,
            },
            e,
        )
    }
}

/// Chains posted on one endpoint's send queue, numbered in the order they
/// go on it, and the owners of those posted with no signaled request.
///
/// Send-queue requests complete in order: once a chain's signaled request
/// has completed, so has every request posted before it. A chain posted
/// through a `SendOrder` gets the next number while its lock is held
/// across the post, so the numbers follow the queue's order; an
/// unsignaled chain's owner waits here until a chain numbered after it
/// completes ([`SendOrder::completed_through`]: the [`Completion`] only
/// that completion makes), or the endpoint's QP is destroyed
/// ([`SendOrder::reclaim_all`]). A chain with a completion of its own costs
/// a completion-queue entry and a run of the completion handler; one that
/// waits here costs neither (the C svcrdma signals every Send).
///
/// # Invariants
///
/// `waiting` holds, oldest first, owners leaked from `KBox<T>`s, each with
/// the number of its chain, posted unsignaled (whole) on the QP of the
/// endpoint at address `ep`, whose owner's anchor is at `anchor`, in
/// increasing number; `used` counts them and the [`Unsignaled`] tokens
/// out; `used <= cap <= UNSIGNALED_MAX`.
///
/// Owners still waiting when the order drops (their QP never destroyed
/// through `reclaim_all`) stay leaked: never freed while a device may use
/// them.
#[pin_data]
pub(crate) struct SendOrder<T> {
    #[pin]
    inner: SpinLock<Order<T>>,
}

/// The most owners a [`SendOrder`] keeps waiting: enough that under
/// load most Replies go unsignaled while one signaled chain's completion
/// is on its way (with 16, more than half of the Replies of 32 4 KiB
/// reads in flight went signaled).
pub(crate) const UNSIGNALED_MAX: usize = 64;

struct Order<T> {
    /// The next chain's number.
    next: u64,
    waiting: InlineFifo<(u64, NonNull<T>), UNSIGNALED_MAX>,
    /// Waiting owners and reservations for more.
    used: usize,
    /// How many may wait (0: every chain is signaled).
    cap: usize,
    /// A chain was posted signaled to release the waiting owners before
    /// the ring fills ([`SendOrder::reserve_unsignaled`]); cleared when a
    /// completion releases them.
    flushing: bool,
    /// The endpoint the waiting owners' chains were posted on, and its
    /// owner's anchor (what its completions carry).
    ep: usize,
    anchor: usize,
}

// SAFETY: the leaked owners are only handed out as `KBox<T>`, which may
// move between threads if `T` may.
unsafe impl<T: Send> Send for Order<T> {}

/// The signaled completion of a chain posted through a [`SendOrder`] (made
/// only by the completion callback): every chain it numbered before this
/// one is done on the device too.
pub(crate) struct Completion {
    seq: u64,
    /// The anchor of the endpoint's owner (its CQ's context).
    anchor: usize,
}

/// Room for one owner in a [`SendOrder`], taken before its chain is
/// built (`SendOrder::reserve_unsignaled`) and used by its post, or
/// given back when dropped.
pub(crate) struct Unsignaled<'a, T> {
    order: &'a SendOrder<T>,
}

impl<T> Drop for Unsignaled<'_, T> {
    fn drop(&mut self) {
        let mut o = self.order.inner.lock();
        o.used = o.used.saturating_sub(1);
    }
}

impl<T: ChainErrors> SendOrder<T> {
    /// No chain posted yet, and none may go unsignaled until
    /// [`SendOrder::set_capacity`].
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- kernel::new_spinlock!(Order {
                next: 1,
                waiting: InlineFifo::new_inline(),
                used: 0,
                cap: 0,
                flushing: false,
                ep: 0,
                anchor: 0,
            }),
        })
    }

    /// Lets up to `n` (at most [`UNSIGNALED_MAX`]) owners wait at once: the
    /// send queue must have room for their chains beyond what the others
    /// reserve (set at accept, before any post).
    pub(crate) fn set_capacity(&self, n: usize) {
        self.inner.lock().cap = n.min(UNSIGNALED_MAX);
    }

    /// Room for one more unsignaled chain, if there is any.
    pub(crate) fn reserve_unsignaled(&self) -> Option<Unsignaled<'_, T>> {
        let mut o = self.inner.lock();
        if o.used >= o.cap {
            return None;
        }
        // Half full: this chain goes signaled, so that its completion
        // releases the ring while the other half takes the chains posted
        // until it is handled (when the ring filled first, every chain
        // posted meanwhile went signaled: most of them, under load).
        if o.used >= o.cap / 2 && !o.flushing {
            o.flushing = true;
            return None;
        }
        o.used += 1;
        Some(Unsignaled { order: self })
    }

    /// Posts `chain(owner)` on `ep` as the next chain ([`post_chain`]):
    /// signaled, its completion taking the owner back, or, with `room`
    /// (from this order), unsignaled, the owner waiting here.
    pub(crate) fn post<const ID: u64>(
        &self,
        ep: &Endpoint<T::Owner>,
        owner: KBox<T>,
        chain: impl FnOnce(&mut T) -> &mut Chain,
        fence: impl FnOnce(),
        room: Option<Unsignaled<'_, T>>,
    ) -> core::result::Result<(), PostError<T>>
    where
        T: ChainOwner<ID>,
    {
        let Some(posting) = ep.posting() else {
            return Err(PostError::Unposted(owner, ENOTCONN));
        };
        let signaled = room.is_none();
        // Under the lock only the numbering and the post: the number is the
        // chain's place in the queue. What a failure needs (it may sleep)
        // runs after, as does the drop of an unused reservation (which
        // takes the lock).
        let attempt = {
            let mut o = self.inner.lock();
            let seq = o.next;
            o.next += 1;
            let attempt = post_chain::<T, ID>(&posting, owner, chain, seq, signaled);
            if let Attempt::Unsignaled(ptr) = attempt {
                // INVARIANT: a whole unsignaled chain of `ep`, posted after
                // every owner already waiting (its number is higher); its
                // reservation (`room`, forgotten below) becomes the entry.
                // The reservations keep a slot free for it: were there none,
                // the owner would stay leaked (never freed early).
                let full = o.waiting.push_within_capacity((seq, ptr)).is_err();
                kernel::warn_on!(full);
                o.ep = core::ptr::from_ref(ep) as usize;
                o.anchor = ep.anchor_addr();
            }
            attempt
        };
        match attempt {
            Attempt::Signaled => Ok(()),
            Attempt::Unsignaled(_) => {
                // The reservation is the entry's now.
                core::mem::forget(room);
                Ok(())
            }
            Attempt::Unposted(owner, e) => Err(PostError::Unposted(owner, e)),
            Attempt::FenceOnly(e) => {
                fence();
                Err(PostError::Fenced(e))
            }
            Attempt::Partial(ptr, e) => Err(recover::<T, ID>(ep, &posting, ptr, fence, e)),
        }
    }

    /// Hands `f`, oldest first, every waiting owner whose chain was
    /// numbered before the one `done` completed: the device is done with
    /// them.
    pub(crate) fn completed_through(&self, done: &Completion, mut f: impl FnMut(KBox<T>)) {
        // As many as wait at most: taken out under the lock, handed out after.
        let mut out = InlineFifo::<NonNull<T>, UNSIGNALED_MAX>::new_inline();
        {
            let mut o = self.inner.lock();
            // Only a completion on the waiting owners' endpoint says anything
            // about them.
            if o.anchor == done.anchor {
                o.flushing = false;
            }
            while o.anchor == done.anchor && o.waiting.front().is_some_and(|w| w.0 < done.seq) {
                let Some((_, ptr)) = o.waiting.pop_front() else {
                    break;
                };
                o.used = o.used.saturating_sub(1);
                // Never full (both hold `UNSIGNALED_MAX`); were it, the owner
                // would stay leaked (never freed early).
                let full = out.push_within_capacity(ptr).is_err();
                kernel::warn_on!(full);
            }
        }
        while let Some(ptr) = out.pop_front() {
            // Its chain, posted whole on the endpoint the completed chain was
            // posted on (one order per endpoint) and before it, is done.
            // SAFETY: so the leaked owner is the device's no more; taken out
            // of the ring, it is handed out once.
            f(unsafe { KBox::from_raw(ptr.as_ptr()) });
        }
    }

    /// Hands `f` every waiting owner, once `ep`'s QP is destroyed (none
    /// otherwise): nothing of theirs is in the device's hands any more.
    pub(crate) fn reclaim_all(&self, ep: &Endpoint<T::Owner>, mut f: impl FnMut(KBox<T>)) {
        loop {
            let (_, ptr) = {
                let mut o = self.inner.lock();
                if !ep.is_destroyed() || o.ep != core::ptr::from_ref(ep) as usize {
                    return;
                }
                let Some(entry) = o.waiting.pop_front() else {
                    return;
                };
                o.used = o.used.saturating_sub(1);
                entry
            };
            // SAFETY: a leaked owner whose requests went on `ep`'s QP, now
            // destroyed; out of the ring, it is handed out once.
            f(unsafe { KBox::from_raw(ptr.as_ptr()) });
        }
    }
}
