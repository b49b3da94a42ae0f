// SPDX-License-Identifier: GPL-2.0

//! Connection requests, and accepting them.
//!
//! On `CONNECT_REQUEST` (in the CM's handler, on the listener's behalf) we
//! read the client's RFC 8797 private data, note the device, and decide the
//! connection's memory model from the device and the module parameters. A
//! connection that would need a forbidden model is rejected right there,
//! with one log line, and nothing is allocated for it. Otherwise it waits in
//! the listener's queue until an nfsd thread calls `xpo_accept`
//! ([`accept`]), which builds the connection's RDMA resources and sends our
//! own private data in the CM accept.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use super::{
    class::CLASS,
    connection::{Connection, Endpoint, PoolSizes, Resources},
    frmr::FrmrPool,
    registry::{ConnAttrs, Registry},
    sink::Sink,
    sq::UNSIGNALED_WRS,
};
use crate::{
    log::{pr_info_ratelimited, pr_warn_ratelimited, Show},
    params,
    proto::{
        addr::SockAddr,
        cm_private,
        inline::{server_private, Depths},
        memreg::{decide, Model},
    },
    rdma::{
        cm::ConnRequest, dma::DmaDev, endpoint::recv_cq, owned::UNSIGNALED_MAX, qp::QpCaps, Cq,
        DevName, Pd,
    },
    sunrpc::{Flag, NewXprt, SvcXprt},
    trace,
};

pub(crate) use pending::{Pending, Slot};

/// Connection requests waiting for an nfsd thread to accept them, oldest
/// first: a listener's queue. A slot is pushed empty before its request is
/// made (see [`Requests::queue`]); empty slots are skipped.
#[pin_data]
pub(crate) struct Requests {
    #[pin]
    queue: Mutex<KVec<Option<KBox<Pending>>>>,
}

impl Requests {
    /// No request.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            queue <- new_mutex!(KVec::new()),
        })
    }

    /// Queues the request `make` builds and wakes an nfsd thread to accept
    /// it on the listener `xprt`. `make` runs under the queue lock in a
    /// slot already queued, so queueing cannot fail once it is called (a
    /// request made in a CM handler must not be dropped there: that would
    /// destroy the id inside its own handler); if no slot can be queued,
    /// `make` is not called.
    fn queue(&self, xprt: &SvcXprt, make: impl FnOnce() -> KBox<Pending>) -> Result {
        {
            let mut q = self.queue.lock();
            q.push(None, GFP_KERNEL).map_err(|_| ENOMEM)?;
            let slot = q.last_mut().ok_or(ENOMEM)?;
            *slot = Some(make());
        }
        xprt.set_flag(Flag::Conn);
        xprt.enqueue();
        Ok(())
    }

    /// Takes the oldest queued request; keeps `XPT_CONN` set on the
    /// listener `xprt` while more wait.
    fn dequeue(&self, xprt: &SvcXprt) -> Option<KBox<Pending>> {
        xprt.clear_flag(Flag::Conn);
        let mut q = self.queue.lock();
        let mut p = None;
        while p.is_none() && !q.is_empty() {
            p = q.remove(0).ok().flatten();
        }
        if !q.is_empty() {
            xprt.set_flag(Flag::Conn);
        }
        p
    }
}

/// What connection requests need of the listener they arrive on: its
/// `svc_xprt` (woken for `xpo_accept`, and the parent of the connections),
/// the module's registry and its queue of requests.
#[derive(Clone, Copy)]
pub(crate) struct Arrivals<'a> {
    pub(crate) xprt: &'a SvcXprt,
    pub(crate) registry: &'a Arc<Registry>,
    pub(crate) requests: &'a Requests,
}

/// A connection request between its `CONNECT_REQUEST` and its accept, in a
/// module of its own so that its id can leave it only one way.
mod pending {
    use core::mem::MaybeUninit;

    use kernel::{
        prelude::*,
        sync::atomic::{ordering::Relaxed, Atomic},
    };

    use crate::{
        anchor::{impl_anchored, Anchor},
        rdma::{
            cm::{Accept, CmEvent, CmEventKind, CmHandler, CmId, CmIdRef, ConnRequest},
            endpoint::{Endpoint, EndpointOwner},
        },
        transport::registry::ConnAttrs,
    };

    /// Where a waiting request's id delivers its events: notes whether the
    /// request died (disconnect, device removal) before accept.
    #[pin_data(PinnedDrop)]
    pub(crate) struct Watch {
        gone: Atomic<bool>,
        /// Counts the id pointing here (until it is re-pointed or dropped).
        #[pin]
        anchor: Anchor,
    }

    impl_anchored! {
        impl Anchored for Watch { self.anchor }
    }

    impl CmHandler for Watch {
        fn event(self: Pin<&Self>, _id: CmIdRef<'_>, event: &CmEvent<'_>) {
            match event.kind() {
                CmEventKind::Disconnected
                | CmEventKind::DeviceRemoval
                | CmEventKind::ConnectError
                | CmEventKind::Rejected
                | CmEventKind::Unreachable
                | CmEventKind::TimewaitExit => self.gone.store(true, Relaxed),
                _ => {}
            }
        }
    }

    /// The memory of a request, allocated before its id is taken: an error
    /// after that would have to destroy the id inside its own handler.
    pub(crate) struct Slot {
        pending: KBox<MaybeUninit<Pending>>,
        watch: Pin<KBox<Watch>>,
    }

    impl Slot {
        /// Allocates a request's memory.
        pub(crate) fn new() -> Result<Self> {
            Ok(Self {
                pending: KBox::new_uninit(GFP_KERNEL)?,
                watch: KBox::pin_init(
                    pin_init!(Watch {
                        gone: Atomic::new(false),
                        anchor <- Anchor::new(),
                    }),
                    GFP_KERNEL,
                )?,
            })
        }
    }

    /// A connection request waiting to be accepted.
    ///
    /// Its id's events go to its `watch` from [`Pending::adopt`] on. The
    /// fields are private: the id leaves the request only for the
    /// connection's endpoint ([`Pending::build`]), which goes on with the
    /// watch until the id points elsewhere ([`Accepting::accept`]); dropping
    /// the request destroys the id first.
    pub(crate) struct Pending {
        /// First: dropped first, so no event reaches `watch` after.
        cm_id: CmId,
        watch: Pin<KBox<Watch>>,
        attrs: ConnAttrs,
        /// RDMA Reads the client accepts from us at once.
        ord: u8,
    }

    impl Pending {
        /// Takes the id of a connection request into `slot`, its events
        /// going to the request's watch. The request must not be dropped
        /// inside the handler call (destroying its id there deadlocks).
        pub(crate) fn adopt(
            slot: Slot,
            req: ConnRequest<'_>,
            attrs: ConnAttrs,
            ord: u8,
        ) -> KBox<Self> {
            let cm_id = req.adopt(slot.watch.as_ref());
            KBox::write(
                slot.pending,
                Pending {
                    cm_id,
                    watch: slot.watch,
                    attrs,
                    ord,
                },
            )
        }

        /// The request's id (still pointing at the request).
        pub(crate) fn cm_id(&self) -> &CmId {
            &self.cm_id
        }

        /// What the connection request asked for and what we decided.
        pub(crate) fn attrs(&self) -> &ConnAttrs {
            &self.attrs
        }

        /// RDMA Reads the client accepts from us at once.
        pub(crate) fn ord(&self) -> u8 {
            self.ord
        }

        /// Whether the request died before it was accepted.
        pub(crate) fn is_gone(&self) -> bool {
            self.watch.gone.load(Relaxed)
        }

        /// Builds the connection's endpoint on the request's id with
        /// `build`, which owns the id from then on (and drops it, destroying
        /// it, if it fails). The id's events still go to the request's watch,
        /// which lives on with the endpoint until the accept.
        pub(crate) fn build<H: EndpointOwner>(
            self: KBox<Self>,
            build: impl FnOnce(CmId) -> Result<Endpoint<H>>,
        ) -> Result<Accepting<H>> {
            let Pending { cm_id, watch, .. } = KBox::into_inner(self);
            // On failure the id is gone (no event after), then the watch.
            let ep = build(cm_id)?;
            Ok(Accepting { ep, watch })
        }
    }

    /// A request whose id the connection's endpoint owns, its events still
    /// going to the request's watch until [`Accepting::accept`]. Dropping
    /// it drops the endpoint (destroying the id) first.
    pub(crate) struct Accepting<H: EndpointOwner> {
        /// First: dropped first, so no event reaches `watch` after.
        ep: Endpoint<H>,
        watch: Pin<KBox<Watch>>,
    }

    impl<H: EndpointOwner> Accepting<H> {
        /// The endpoint being accepted.
        pub(crate) fn endpoint(&self) -> &Endpoint<H> {
            &self.ep
        }

        /// Points the id's events at `handler` and accepts the request
        /// ([`CmId::repoint_and_accept`]); not from the id's handler.
        ///
        /// Returns the endpoint, now the connection's alone, with the
        /// accept's result once the id was re-pointed; or, if it was not,
        /// the error, everything dropped (the endpoint, its id with it,
        /// before the watch the id still points at).
        pub(crate) fn accept<C: CmHandler>(
            self,
            handler: Pin<&C>,
            private: &[u8],
            initiator_depth: u8,
        ) -> Result<(Endpoint<H>, Result)> {
            match self
                .ep
                .id()
                .repoint_and_accept(handler, private, initiator_depth)
            {
                Accept::NotRepointed(e) => Err(e),
                Accept::Repointed(accepted) => {
                    // The id no longer refers to the watch: it may go.
                    let Accepting { ep, watch } = self;
                    drop(watch);
                    Ok((ep, accepted))
                }
            }
        }
    }
}

/// Formats an optional address (a peer's, a listener's), or says it is
/// unknown.
pub(super) struct AddrShown(pub(super) Option<SockAddr>);

impl kernel::fmt::Display for AddrShown {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0 {
            Some(a) => core::fmt::Display::fmt(a, f),
            None => f.write_str("(unknown address)"),
        }
    }
}

/// Handles `CONNECT_REQUEST` on `listener`: queues the request, or refuses
/// it by returning without adopting `req` (the CM then destroys its id).
/// The counterpart of C's handle_connect_req().
pub(super) fn connect_request(listener: Arrivals<'_>, req: ConnRequest<'_>) {
    let id = req.id();
    let client = cm_private::decode(req.private_data());
    let peer = id.peer();
    let Some(dev) = id.device() else {
        return;
    };
    let name = dev.name();
    let transport = dev.transport();
    let raw_caps = dev.caps();
    listener.registry.note_device(name, transport, raw_caps);
    let caps = params::caps_override().apply(raw_caps);
    let model = match decide(transport, &caps, params::memreg(), params::dma_mr()) {
        Ok(m) => m,
        Err(why) => {
            pr_warn_ratelimited!(
                "refusing connection from {} on {} ({}): {}\n",
                AddrShown(peer),
                name,
                transport.name(),
                Show(why)
            );
            trace::reject(
                fmt!("{}", AddrShown(peer)),
                fmt!("{}", name),
                fmt!("{}", Show(why)),
            );
            return;
        }
    };
    let attrs = ConnAttrs {
        peer,
        device: name,
        transport,
        model,
        client,
        server_r: model.r_bit(),
        credits: 0,
        frmr_pool: 0,
        caps,
    };
    // Allocate before taking the id: an error after `adopt` would have to
    // destroy the id inside its own handler, which deadlocks.
    let Ok(slot) = Slot::new() else {
        return refused_oom(peer, name);
    };
    let ord = req.initiator_depth();
    // `Requests::queue` cannot fail once it has called us, so the request is
    // never dropped in this handler; if it fails before, `req` is dropped
    // unadopted, and refused.
    let queued = listener
        .requests
        .queue(listener.xprt, || Pending::adopt(slot, req, attrs, ord));
    if queued.is_err() {
        refused_oom(peer, name);
    }
}

/// Says that a connection request from `peer` on `device` was refused for
/// want of memory.
fn refused_oom(peer: Option<SockAddr>, device: DevName) {
    pr_warn_ratelimited!(
        "refusing connection from {}: out of memory\n",
        AddrShown(peer)
    );
    trace::reject(
        fmt!("{}", AddrShown(peer)),
        fmt!("{}", device),
        fmt!("out of memory"),
    );
}

/// The local ACK timeout exponent of our QPs (IB/RoCE).
const ACK_TIMEOUT: u8 = 19;

/// Scatter/gather entries per work request we use at most.
const MAX_SEND_SGE: u32 = crate::rdma::wr::MAX_WR_SGE as u32;

/// `xpo_accept` on a listener: builds and accepts the oldest live request.
/// Returns the new transport, or none when there is none (or it failed).
/// The counterpart of C's svc_rdma_accept().
pub(super) fn accept(listener: Arrivals<'_>) -> Option<NewXprt<Connection>> {
    while let Some(p) = listener.requests.dequeue(listener.xprt) {
        if p.is_gone() {
            // Destroying the id (not in its handler: we are an nfsd thread).
            drop(p);
            continue;
        }
        let (peer, device) = (p.attrs().peer, p.attrs().device);
        return match establish(listener, p) {
            Ok(x) => Some(x),
            Err(e) => {
                pr_warn_ratelimited!(
                    "connection from {} on {} failed: error {}\n",
                    AddrShown(peer),
                    device,
                    e.to_errno()
                );
                None
            }
        };
    }
    None
}

/// Builds the connection for `p` and accepts it: the part of C's
/// svc_rdma_accept() after the request is dequeued.
fn establish(listener: Arrivals<'_>, p: KBox<Pending>) -> Result<NewXprt<Connection>> {
    let dev = p.cm_id().device().ok_or(ENODEV)?;
    let attrs = dev.attrs();
    let depths = Depths::for_device(attrs.max_qp_wr, attrs.max_cqe).ok_or(EINVAL)?;
    let ord = u32::from(p.ord()).min(attrs.max_qp_init_rd_atom);
    let ord = u8::try_from(ord).map_err(|_| EINVAL)?;
    if ord == 0 {
        // We could never RDMA Read from this client.
        return Err(EINVAL);
    }
    let model = p.attrs().model;
    let pd = Pd::new(&dev, model.exposes_all_memory())?;
    let send_cq = Cq::new(&dev, depths.send_wr)?;
    // Polled by the nfsd threads the transport wakes (`recvfrom`).
    let recv_cq = recv_cq::<Connection>(&dev, depths.recv_wr)?;
    let frmrs = match model {
        Model::Frmr { .. } => Some(FrmrPool::new(
            DmaDev::new(&dev)?,
            depths.credits,
            // The capabilities the policy saw (test overrides applied).
            p.attrs().caps.max_fast_reg_page_list_len,
            attrs.max_mr.min(params::frmr_pool_cap()),
        )?),
        _ => None,
    };
    let conn = new_conn(listener, &p, &depths, frmrs.as_ref())?;
    let caps = QpCaps {
        send_wr: depths.send_wr,
        recv_wr: depths.recv_wr,
        send_sge: attrs.max_send_sge.min(MAX_SEND_SGE),
        recv_sge: 1,
    };
    let (server_r, max_sge_rd) = (p.attrs().server_r, attrs.max_sge_rd);
    // The QP and receive buffers count `conn` until the QP is destroyed:
    // on failure the endpoint (declared after `conn`) goes first, then the
    // connection.
    let acc = p.build(|id| {
        Endpoint::new(
            id,
            pd,
            send_cq,
            recv_cq,
            &caps,
            depths.recv_buffers,
            conn.as_pin(),
        )
    })?;
    let got = acc.endpoint().caps();
    let (send_wr, send_sge) = (got.send_wr, got.send_sge);
    let sink = Sink::new(model, frmrs, acc.endpoint().pd(), max_sge_rd.min(send_sge))?;
    let sq_slots = match start_pools(&conn, acc.endpoint(), &depths, send_wr, sink.mrs()) {
        Ok(slots) => slots,
        Err(e) => {
            // The endpoint (QP first, id last), then the request's watch,
            // then the connection, to which nothing refers any more.
            drop(acc);
            return Err(e);
        }
    };
    let res = |ep| Resources {
        sink,
        ep,
        send_sge: send_sge.clamp(1, MAX_SEND_SGE),
        sq_slots,
    };
    go_live(conn, acc, res, server_r, ord)
}

/// Makes the connection of `p` on the listener, known to sunrpc, its
/// queues sized by `depths` (`frmrs`: its FRMR pool, if any). From then on
/// sunrpc's reference count frees it, on failure too (dropping it).
fn new_conn(
    listener: Arrivals<'_>,
    p: &Pending,
    depths: &Depths,
    frmrs: Option<&FrmrPool>,
) -> Result<NewXprt<Connection>> {
    // What the data path uses (credits granted in every reply) and what
    // sysfs and the log show: one value.
    let info = ConnAttrs {
        credits: depths.credits,
        frmr_pool: frmrs.map_or(0, |f| f.len()),
        ..*p.attrs()
    };
    let conn = KBox::pin_init(
        Connection::new(
            listener.registry.clone(),
            info,
            depths.recv_buffers as usize,
            depths.recv_batch as usize,
        ),
        GFP_KERNEL,
    )?;
    let conn = CLASS.new_conn(conn, listener.xprt)?;
    if let Some(a) = p.cm_id().dst_addr() {
        conn.set_remote(&a);
    }
    if let Some(a) = p.cm_id().src_addr() {
        conn.set_local(&a);
    }
    // RDMA's reliable connections provide congestion control (NFSv4 needs
    // it of a transport).
    conn.xprt().set_flag(Flag::CongCtrl);
    Ok(conn)
}

/// Sets up the data path's pools of `conn` on the endpoint `ep`, whose
/// QP allows `send_wr` send requests (`depths`: what we asked for; `mrs`:
/// the FRMR pool's entries), and posts its receive buffers. Returns the
/// send-queue slots in all.
fn start_pools(
    conn: &Connection,
    ep: &Endpoint,
    depths: &Depths,
    send_wr: u32,
    mrs: usize,
) -> Result<u32> {
    // Replies posted without a completion of their own are
    // `sq::UNSIGNALED_WRS` requests each (`owned::SendOrder`).
    let split = depths.send_split(send_wr, UNSIGNALED_MAX as u32, UNSIGNALED_WRS);
    let contexts = depths.contexts();
    let sizes = PoolSizes {
        // Fewer under a debug build's `debug_sq_slots`.
        sq_slots: split.slots.min(params::sq_slots_cap()),
        unsignaled: split.unsignaled as usize,
        ctxts: contexts.initial as usize,
        max_ctxts: contexts.max as usize,
        mrs,
    };
    conn.init_pools(ep.dma_dev(), &sizes)?;
    // On failure the QP (dropped first) flushes what was posted.
    conn.recv.posting(depths.recv_buffers as usize);
    ep.post_receives()?;
    Ok(sizes.sq_slots)
}

/// Accepts the request of `acc` for `conn` (`server_r`: our R bit; `ord`:
/// the RDMA Reads we may have in flight), installs its resources (`res`
/// of the accepted endpoint), and shows it in sysfs and the log.
fn go_live(
    conn: NewXprt<Connection>,
    acc: pending::Accepting<Connection>,
    res: impl FnOnce(Endpoint) -> Resources,
    server_r: bool,
    ord: u8,
) -> Result<NewXprt<Connection>> {
    // From now on the id's events concern the connection. This is done
    // while the request's watch is still allocated: until the id is
    // re-pointed (under its handler lock), a late event may still reach it.
    let ours = server_private(server_r).encode();
    // A client that stops answering must not hold nfsd threads for long:
    // about 2 s per try (the CM's default retry count makes ~15 s).
    acc.endpoint().id().set_ack_timeout(ACK_TIMEOUT);
    // The id ends up in `Resources`, and `Connection::free` silences it
    // before anything goes; we are not in the id's handler. If nothing was
    // re-pointed, the endpoint and then the watch are gone when this
    // returns, before the connection.
    let (ep, accepted) = acc.accept(conn.as_pin(), &ours, ord)?;
    conn.set_res(res(ep));

    // On an error the resources go with the connection (dropping it), the
    // id last.
    accepted?;
    let info = conn.info;
    if let Err(e) = conn.publish(info) {
        pr_warn!(
            "connection {}: sysfs entry not created: error {}\n",
            conn.id,
            e.to_errno()
        );
    }
    pr_info_ratelimited!(
        "connection {} from {} on {} ({}): {}\n",
        conn.id,
        AddrShown(info.peer),
        info.device,
        info.transport.name(),
        info.model.log_text()
    );
    trace::accept(
        conn.id,
        fmt!("{}", AddrShown(info.peer)),
        fmt!("{}", info.device),
        info.model.name(),
    );
    Ok(conn)
}
