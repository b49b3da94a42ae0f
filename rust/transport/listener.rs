// SPDX-License-Identifier: GPL-2.0

//! Listening endpoints: `xpo_create`, and the CM events on a listening id.
//!
//! nfsd asks for a listener per address family when an admin writes
//! `<name> <port>` to `/proc/fs/nfsd/portlist` (the wildcard address), or
//! for one address through its netlink `listener-set`; each one is an RDMA
//! CM id bound to that address and listening. Connection requests arrive as
//! CM events on it ([`super::accept`]) and wait in the listener's accept
//! queue until an nfsd thread accepts them.
//!
//! A listener bound to one address is bound to the RDMA device that carries
//! it, and the device's removal waits until every CM id on it is destroyed.
//! So on `DEVICE_REMOVAL` (and on `ADDR_CHANGE`, the address moving to
//! another device) the listener lets go of its id at once and listens again
//! from a work item: right away, and while that fails (the address has no
//! RDMA device any more) again after a growing delay, until the address is
//! usable again or the listener is closed. A wildcard listener never sees
//! these events: the CM itself follows devices coming and going for it.

use core::mem::offset_of;

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    types::Opaque,
};

use super::{
    accept::{self, AddrShown, Pending},
    ops::CLASS,
    registry::{registry, DevName, Registry},
};
use crate::{
    bindings,
    log::{pr_info_ratelimited, pr_warn_ratelimited, Show},
    proto::addr::SockAddr,
    rdma::{
        cm::{CmEvent, CmId, CmIdRef},
        sockaddr_to_proto,
    },
    sunrpc::{impl_has_svc_xprt, CreateArgs, Flag, NewXprt, SvcXprt},
};

/// Delay before the second try to listen again, in milliseconds; each
/// failed try doubles it, up to [`RELISTEN_MAX_MS`].
const RELISTEN_FIRST_MS: u32 = 250;
/// The longest wait between two tries to listen again.
const RELISTEN_MAX_MS: u32 = 4000;

/// The listening id and what becomes of it.
struct ListenState {
    /// The listening id; `None` while the listener waits to listen again,
    /// and once it is closed.
    id: Option<CmId>,
    /// `id` lost its device or address: the work item destroys it (its own
    /// handler cannot) and listens again.
    stale: bool,
    /// The listener is being freed: nothing listens, nothing is queued.
    closed: bool,
    /// Failed tries to listen again since the id was lost.
    tries: u32,
    /// The bound address (a `sockaddr_in` or `sockaddr_in6`, in storage
    /// large enough for both), with the port the CM chose if nfsd asked for
    /// port 0: where the listener listens again.
    addr: bindings::sockaddr_in6,
    /// `addr` for the log.
    shown: Option<SockAddr>,
}

/// A listening transport.
///
/// sunrpc holds it by its `xprt` field; its reference count owns it, and
/// `xpo_free` ([`Listener::free`]) frees it.
///
/// Every CM handler call that sees the listener runs on an id the listener
/// owned, and every such id is destroyed (which waits for its handler) by
/// [`Listener::free`] or by the work item, which `free` cancels and waits
/// for before the memory goes: no handler outlives the listener.
#[repr(C)]
#[pin_data]
pub(crate) struct Listener {
    /// sunrpc's part (first: shared layout with [`super::Connection`], and
    /// `XPT_LISTENER` tells them apart).
    xprt: SvcXprt,
    /// The listening id. Locked by CM handlers (never while destroying an
    /// id: that waits for the id's handler).
    #[pin]
    listen: Mutex<ListenState>,
    /// Destroys a stale id and listens again (`relisten_work`).
    #[pin]
    relisten: Opaque<bindings::delayed_work>,
    /// Connection requests waiting for an nfsd thread to accept them.
    /// A slot is pushed empty before its request is made (see
    /// [`Listener::queue_request`]); empty slots are skipped.
    #[pin]
    queue: Mutex<KVec<Option<KBox<Pending>>>>,
    registry: Arc<Registry>,
}

impl_has_svc_xprt!(Listener { xprt });

// `relisten` is used only through the workqueue API (queue, cancel), which
// may be called from any thread, and its function runs on any.
// SAFETY: every field but `relisten` is `Send`, and `relisten` may move.
unsafe impl Send for Listener {}
// SAFETY: as for `Send`; shared access to `relisten` is only through the
// workqueue API, which serializes it.
unsafe impl Sync for Listener {}

impl Listener {
    /// The module's registry.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Queues the request `make` builds and wakes an nfsd thread to accept
    /// it. `make` runs under the queue lock in a slot already queued, so
    /// queueing cannot fail once it is called (a request made in a CM
    /// handler must not be dropped there: that would destroy the id inside
    /// its own handler); if no slot can be queued, `make` is not called.
    pub(super) fn queue_request(&self, make: impl FnOnce() -> KBox<Pending>) -> Result {
        {
            let mut q = self.queue.lock();
            q.push(None, GFP_KERNEL).map_err(|_| ENOMEM)?;
            let slot = q.last_mut().ok_or(ENOMEM)?;
            *slot = Some(make());
        }
        self.xprt.set_flag(Flag::Conn);
        self.xprt.enqueue();
        Ok(())
    }

    /// Takes the oldest queued request; keeps `XPT_CONN` set while more wait.
    pub(super) fn dequeue(&self) -> Option<KBox<Pending>> {
        self.xprt.clear_flag(Flag::Conn);
        let mut q = self.queue.lock();
        let mut p = None;
        while p.is_none() && !q.is_empty() {
            p = q.remove(0).ok().flatten();
        }
        if !q.is_empty() {
            self.xprt.set_flag(Flag::Conn);
        }
        p
    }

    /// Frees a listener sunrpc has released (its `xpo_free`), or one whose
    /// creation failed.
    pub(crate) fn free(l: Pin<KBox<Self>>) {
        l.shut();
        // Once `shut` returned, nothing refers to it.
        drop(l);
    }

    /// Stops listening for good: after this no CM handler or work item
    /// runs for the listener, and none starts.
    fn shut(&self) {
        let id = {
            let mut s = self.listen.lock();
            s.closed = true;
            s.id.take()
        };
        // Outside the lock: destroying the id waits for its running handler,
        // which may be waiting for the lock.
        drop(id);
        // This waits for a running work item and leaves none queued; nothing
        // queues one after: the work item does not re-queue itself once
        // `closed` is set, and the handlers that queue it run on ids that
        // are destroyed by now (the listening id just above; a stale one by
        // the work item, which this waits for).
        // SAFETY: `relisten` was initialized in `create`.
        unsafe { bindings::cancel_delayed_work_sync(self.relisten.get()) };
    }

    /// Queues the work item that listens again, after `ms` milliseconds.
    fn queue_relisten(&self, ms: u32) {
        // SAFETY: `relisten` was initialized in `create`, and the listener
        // outlives it: `free` cancels it (and waits for it) first.
        unsafe { bindings::svcrdma_rs_queue_delayed_work_ms(self.relisten.get(), ms) };
    }

    /// `DEVICE_REMOVAL` or `ADDR_CHANGE` on `id`, in its handler: marks the
    /// listening id stale and has the work item replace it. Events on any
    /// other id (one already replaced) change nothing.
    fn lost(&self, id: CmIdRef<'_>, kind: bindings::rdma_cm_event_type) {
        let dev = id.device().map(|d| DevName::new(d.name()));
        let mut s = self.listen.lock();
        let current = s.id.as_ref().is_some_and(|cur| cur.as_ptr() == id.as_ptr());
        if s.closed || s.stale || !current {
            return;
        }
        s.stale = true;
        s.tries = 0;
        // The id cannot be destroyed from its own handler; the work item
        // does it at once, and the device removal waits only for that.
        self.queue_relisten(0);
        if kind == bindings::RDMA_CM_EVENT_DEVICE_REMOVAL {
            pr_warn_ratelimited!(
                "listener on {}: device {} removed; listening again once the address is usable\n",
                AddrShown(s.shown),
                Dev(dev)
            );
        } else {
            pr_warn_ratelimited!(
                "listener on {}: address moved off device {}; listening again\n",
                AddrShown(s.shown),
                Dev(dev)
            );
        }
    }

    /// The work item: destroys a stale listening id, then listens on the
    /// address again; while that fails, tries again later.
    fn relisten(&self) {
        let stale = {
            let mut s = self.listen.lock();
            if s.stale {
                s.stale = false;
                s.id.take()
            } else {
                None
            }
        };
        // Outside the lock, as in `shut`. This lets the device go.
        drop(stale);

        let mut s = self.listen.lock();
        if s.closed || s.stale || s.id.is_some() {
            return;
        }
        let ctx = core::ptr::from_ref(self).cast_mut().cast::<c_void>();
        // The id goes into `self.listen` (or `failed`, dropped below) and is
        // destroyed before the listener is freed (`shut`).
        // SAFETY: the context, `self`, outlives the id's events.
        let id = unsafe { CmId::new(self.xprt.net(), listen_handler, ctx) };
        let mut failed = None;
        let listening = match id {
            Ok(id) => {
                let sa = (&raw mut s.addr).cast::<bindings::sockaddr>();
                // SAFETY: `addr` holds the `sockaddr_in` or `sockaddr_in6`
                // that `create` copied from its bound id.
                match unsafe { id.listen(sa) } {
                    Ok(()) => Some(id),
                    Err(_) => {
                        failed = Some(id);
                        None
                    }
                }
            }
            Err(_) => None,
        };
        match listening {
            Some(id) => {
                let dev = id.device().map(|d| DevName::new(d.name()));
                // Stored under the lock it was made under: an event on it
                // (its handler takes the lock) finds it in place.
                s.id = Some(id);
                s.tries = 0;
                pr_info_ratelimited!(
                    "listener on {}: listening again (device {})\n",
                    AddrShown(s.shown),
                    Dev(dev)
                );
            }
            None => {
                // Usually: no RDMA device carries the address (yet).
                let ms = RELISTEN_FIRST_MS
                    .checked_shl(s.tries)
                    .unwrap_or(RELISTEN_MAX_MS)
                    .min(RELISTEN_MAX_MS);
                s.tries = s.tries.saturating_add(1);
                self.queue_relisten(ms);
            }
        }
        drop(s);
        // Outside the lock, as in `shut` (a bound id may have an event).
        drop(failed);
    }
}

/// Formats an optional device name.
struct Dev(Option<DevName>);

impl kernel::fmt::Display for Dev {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0 {
            Some(d) => kernel::fmt::Display::fmt(d, f),
            None => f.write_str("(unknown)"),
        }
    }
}

/// Copies a bound id's `sockaddr_in` or `sockaddr_in6`.
///
/// # Safety
///
/// `sa` must point to a valid `sockaddr` in storage as large as its
/// family's structure (as in a `sockaddr_storage`).
unsafe fn copy_addr(sa: *const bindings::sockaddr) -> bindings::sockaddr_in6 {
    let mut a = bindings::sockaddr_in6::default();
    // SAFETY: `sa` is valid (caller's promise); the shim reads the family.
    let len = unsafe { bindings::svcrdma_rs_sockaddr_len(sa) }.min(size_of_val(&a));
    // SAFETY: `len` bytes are readable at `sa` (its family's size) and
    // writable in `a`; the two do not overlap.
    unsafe { core::ptr::copy_nonoverlapping(sa.cast::<u8>(), (&raw mut a).cast::<u8>(), len) };
    a
}

/// The relisten work item's function.
///
/// # Safety
///
/// Called by the workqueue only, for the `relisten` work of a live
/// `Listener` (initialized in [`create`]).
unsafe extern "C" fn relisten_work(work: *mut bindings::work_struct) {
    let off = offset_of!(Listener, relisten) + offset_of!(bindings::delayed_work, work);
    // `Opaque` has its contents' layout; `free` does not free the listener
    // before this returns (it cancels the work and waits for it).
    // SAFETY: `work` is in the `relisten` of a live `Listener`.
    let l = unsafe { &*work.cast::<u8>().sub(off).cast::<Listener>() };
    l.relisten();
}

/// Creates a listener (sunrpc's `xpo_create`) on `args`' address.
pub(super) fn create(args: &CreateArgs<'_>) -> Result<NewXprt<Listener>> {
    let registry = registry().ok_or(ENODEV)?;
    let sa = args.addr();
    let l = KBox::pin_init(
        try_pin_init!(Listener {
            xprt: SvcXprt::uninit(),
            listen <- new_mutex!(ListenState {
                id: None,
                stale: false,
                closed: false,
                tries: 0,
                addr: bindings::sockaddr_in6::default(),
                shown: None,
            }),
            relisten <- Opaque::ffi_init(|w: *mut bindings::delayed_work| {
                // SAFETY: `w` is the field's memory, about to be initialized
                // in place and never moved (the listener is pinned).
                unsafe { bindings::svcrdma_rs_init_delayed_work(w, Some(relisten_work)) }
            }),
            queue <- new_mutex!(KVec::new()),
            registry,
        }),
        GFP_KERNEL,
    )?;
    // From here on the listener is freed through sunrpc's reference count,
    // on failure too (dropping `xr`).
    let xr = CLASS.new_listener(l, args)?;
    // RDMA's reliable connections provide congestion control (RFC 7530 3.1).
    xr.xprt.set_flag(Flag::CongCtrl);

    let ctx = core::ptr::from_ref::<Listener>(&xr)
        .cast_mut()
        .cast::<c_void>();
    // The id is made, bound and stored under the lock, as in `relisten`: an
    // event on it (its handler takes the lock) finds it in place.
    let mut st = xr.listen.lock();
    // The id is stored in the listener and destroyed before it is freed
    // (`shut`), or dropped below before `xr`.
    // SAFETY: the context, the listener, outlives the id's events.
    let id = match unsafe { CmId::new(args.net(), listen_handler, ctx) } {
        Ok(id) => id,
        Err(e) => {
            drop(st);
            return Err(listen_failed(args, e));
        }
    };
    // SAFETY: `sa` holds a whole `sockaddr_in`/`sockaddr_in6` (`CreateArgs`).
    if let Err(e) = unsafe { id.listen(sa) } {
        drop(st);
        // Outside the lock, as in `shut`; no handler can run after this,
        // and dropping `xr` then frees the listener.
        drop(id);
        return Err(listen_failed(args, e));
    }
    // The bound address has the port the CM chose if nfsd asked for port 0.
    // SAFETY: the id's source address is a valid `sockaddr_storage` of the
    // requested family; sunrpc has not seen the transport yet.
    unsafe { xr.xprt.set_local(id.src_sockaddr()) };
    // SAFETY: as above.
    st.addr = unsafe { copy_addr(id.src_sockaddr()) };
    // SAFETY: as above.
    st.shown = unsafe { sockaddr_to_proto(id.src_sockaddr()) };
    st.id = Some(id);
    drop(st);
    Ok(xr)
}

/// Logs why listening on `args`' address failed; returns the error.
fn listen_failed(args: &CreateArgs<'_>, e: Error) -> Error {
    // SAFETY: a whole `sockaddr_in`/`sockaddr_in6` (`CreateArgs`).
    if let Some(addr) = unsafe { sockaddr_to_proto(args.addr()) } {
        pr_err!("cannot listen on {}: error {}\n", Show(addr), e.to_errno());
    }
    e
}

/// CM events on a listening id, and a connection request's first event.
///
/// Lock rule: the `CONNECT_REQUEST` path never takes `listen`. Creation
/// and `relisten` hold it across `rdma_listen`, whose error path on a
/// wildcard listener destroys the per-device child ids, waiting for their
/// handlers (and so for a running `connect_request`).
///
/// # Safety
///
/// Called by the RDMA CM only, with the id's `context` set to the listening
/// `Listener`, which outlives the listening id (and is the context a new
/// connection's id inherits).
unsafe extern "C" fn listen_handler(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    // SAFETY: the CM passes a live id and event for the call's duration.
    let (id, event) = unsafe { (CmIdRef::from_raw(id), CmEvent::from_raw(event)) };
    match event.kind() {
        bindings::RDMA_CM_EVENT_CONNECT_REQUEST => {
            // SAFETY: the context of a listening id (inherited by the new id) is its `Listener`, live while the listening id is, which is at least for this call.
            let listener = unsafe { &*id.context().cast::<Listener>() };
            // SAFETY: the id and event of a running CONNECT_REQUEST handler.
            unsafe { accept::connect_request(listener, id, &event) }
        }
        // The id's device is going (its removal waits until the id is
        // destroyed), or its address moved to another device. Only a
        // listener bound to one address gets these (the CM keeps a
        // wildcard listener's per-device ids itself).
        kind @ (bindings::RDMA_CM_EVENT_DEVICE_REMOVAL | bindings::RDMA_CM_EVENT_ADDR_CHANGE) => {
            // SAFETY: the context of a listening id is its `Listener`, live while any id it owns is, which is at least for this call.
            let listener = unsafe { &*id.context().cast::<Listener>() };
            listener.lost(id, kind);
            // The id stays ours (the work item destroys it): the CM must
            // not destroy an id the listener still holds.
            0
        }
        _ => 0,
    }
}
