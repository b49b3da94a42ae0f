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

use kernel::{
    impl_has_delayed_work, new_delayed_work, new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    workqueue::{DelayedWork, WorkItem},
};

use super::{
    accept::{self, AddrShown, Arrivals, Requests},
    class::CLASS,
    registry::Registry,
};
use crate::{
    anchor::{impl_anchored, Anchor, AnchorRef},
    kwork,
    log::{pr_info_ratelimited, pr_warn_ratelimited, Show},
    net::IpSockAddr,
    proto::addr::SockAddr,
    rdma::{
        cm::{CmEvent, CmEventKind, CmHandler, CmId, CmIdRef, ConnRequest},
        DevName,
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
    /// The bound address, with the port the CM chose if nfsd asked for
    /// port 0: where the listener listens again (`None` until bound).
    addr: Option<IpSockAddr>,
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
/// for before the memory goes: no handler outlives the listener. Each id
/// and each queued work item holds a count on `anchor`, and the
/// listener's drop waits for them (which, after `free`, it never has to).
#[repr(C)]
#[pin_data(PinnedDrop)]
pub(crate) struct Listener {
    /// sunrpc's part (first: shared layout with [`super::Connection`], and
    /// `XPT_LISTENER` tells them apart).
    xprt: SvcXprt,
    /// The listening id. Locked by CM handlers (never while destroying an
    /// id: that waits for the id's handler).
    #[pin]
    listen: Mutex<ListenState>,
    /// Destroys a stale id and listens again ([`Listener::relisten`]).
    #[pin]
    relisten: DelayedWork<Listener>,
    /// Connection requests waiting for an nfsd thread to accept them.
    #[pin]
    requests: Requests,
    registry: Arc<Registry>,
    /// Counts the ids and the queued work item that refer to the listener.
    #[pin]
    anchor: Anchor,
}

impl_has_svc_xprt!(Listener { xprt });

impl_anchored! {
    impl Anchored for Listener { self.anchor }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for Listener { self.relisten }
}

impl WorkItem for Listener {
    type Pointer = AnchorRef<Listener>;

    fn run(this: AnchorRef<Listener>) {
        this.get().relisten();
    }
}

impl CmHandler for Listener {
    /// The counterpart of C's svc_rdma_listen_handler().
    fn event(self: Pin<&Self>, id: CmIdRef<'_>, event: &CmEvent<'_>) {
        // The id's device is going (its removal waits until the id is
        // destroyed), or its address moved to another device. Only a
        // listener bound to one address gets these (the CM keeps a wildcard
        // listener's per-device ids itself). The id stays ours (the work
        // item destroys it): the CM must not destroy an id the listener
        // still holds.
        if let kind @ (CmEventKind::DeviceRemoval | CmEventKind::AddrChange) = event.kind() {
            self.lost(id, kind);
        }
    }

    /// Lock rule: the `CONNECT_REQUEST` path never takes `listen`. Creation
    /// and `relisten` hold it across `rdma_listen`, whose error path on a
    /// wildcard listener destroys the per-device child ids, waiting for their
    /// handlers (and so for a running `connect_request`).
    fn connect_request(self: Pin<&Self>, req: ConnRequest<'_>) {
        accept::connect_request(self.arrivals(), req);
    }
}

impl Listener {
    /// What connection requests see of the listener.
    pub(super) fn arrivals(&self) -> Arrivals<'_> {
        Arrivals {
            xprt: &self.xprt,
            registry: &self.registry,
            requests: &self.requests,
        }
    }

    /// Frees a listener sunrpc has released (its `xpo_free`), or one whose
    /// creation failed. The counterpart of C's svc_rdma_free().
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
        kwork::cancel_delayed_sync(self);
    }

    /// Queues the work item that listens again, after `ms` milliseconds
    /// (unless it is queued already).
    fn queue_relisten(self: Pin<&Self>, ms: u32) {
        kwork::queue_delayed_ms(self, ms);
    }

    /// `DEVICE_REMOVAL` or `ADDR_CHANGE` on `id`, in its handler: marks the
    /// listening id stale and has the work item replace it. Events on any
    /// other id (one already replaced) change nothing.
    fn lost(self: Pin<&Self>, id: CmIdRef<'_>, kind: CmEventKind) {
        let dev = id.device().map(|d| d.name());
        let mut s = self.listen.lock();
        let current = s.id.as_ref().is_some_and(|cur| cur.is(&id));
        if s.closed || s.stale || !current {
            return;
        }
        s.stale = true;
        s.tries = 0;
        // The id cannot be destroyed from its own handler; the work item
        // does it at once, and the device removal waits only for that.
        self.queue_relisten(0);
        if kind == CmEventKind::DeviceRemoval {
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
    fn relisten(self: Pin<&Self>) {
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
        // The id goes into `self.listen` (or `failed`, dropped below) and is
        // destroyed before the listener is freed (`shut`).
        let id = self
            .xprt
            .net_ref()
            .ok_or(ENODEV)
            .and_then(|net| CmId::new(net, self));
        let mut failed = None;
        let listening = match (id, s.addr) {
            (Ok(id), Some(addr)) => match id.listen(&addr) {
                Ok(()) => Some(id),
                Err(_) => {
                    failed = Some(id);
                    None
                }
            },
            (Ok(id), None) => {
                failed = Some(id);
                None
            }
            (Err(_), _) => None,
        };
        match listening {
            Some(id) => {
                let dev = id.device().map(|d| d.name());
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

/// Creates a listener (sunrpc's `xpo_create`) on `args`' address. The
/// counterpart of C's svc_rdma_create().
pub(super) fn create(registry: &Arc<Registry>, args: &CreateArgs<'_>) -> Result<NewXprt<Listener>> {
    let registry = registry.clone();
    let l = KBox::pin_init(
        try_pin_init!(Listener {
            xprt: SvcXprt::uninit(),
            listen <- new_mutex!(ListenState {
                id: None,
                stale: false,
                closed: false,
                tries: 0,
                addr: None,
                shown: None,
            }),
            relisten <- new_delayed_work!("svcrdma_rs_relisten"),
            requests <- Requests::new(),
            registry,
            anchor <- Anchor::new(),
        }),
        GFP_KERNEL,
    )?;
    // From here on the listener is freed through sunrpc's reference count,
    // on failure too (dropping `xr`).
    let xr = CLASS.new_listener(l, args)?;
    // RDMA's reliable connections provide congestion control (RFC 7530 3.1).
    xr.xprt.set_flag(Flag::CongCtrl);

    let addr = args.ip_addr().ok_or(EAFNOSUPPORT)?;
    // The id is made, bound and stored under the lock, as in `relisten`: an
    // event on it (its handler takes the lock) finds it in place.
    let mut st = xr.listen.lock();
    // The id is stored in the listener and destroyed before it is freed
    // (`shut`), or dropped below before `xr`.
    let id = match args
        .net_ref()
        .ok_or(ENODEV)
        .and_then(|net| CmId::new(net, xr.as_pin()))
    {
        Ok(id) => id,
        Err(e) => {
            drop(st);
            return Err(listen_failed(&addr, e));
        }
    };
    if let Err(e) = id.listen(&addr) {
        drop(st);
        // Outside the lock, as in `shut`; no handler can run after this,
        // and dropping `xr` then frees the listener.
        drop(id);
        return Err(listen_failed(&addr, e));
    }
    // The bound address has the port the CM chose if nfsd asked for port 0.
    st.addr = id.src_addr();
    if let Some(a) = &st.addr {
        xr.set_local(a);
    }
    st.shown = st.addr.and_then(|a| a.to_proto());
    st.id = Some(id);
    drop(st);
    Ok(xr)
}

/// Logs why listening on `addr` failed; returns the error.
fn listen_failed(addr: &IpSockAddr, e: Error) -> Error {
    if let Some(addr) = addr.to_proto() {
        pr_err!("cannot listen on {}: error {}\n", Show(addr), e.to_errno());
    }
    e
}
