// SPDX-License-Identifier: GPL-2.0

//! What sunrpc calls on the class's transports: each `svc_xprt_ops` op
//! ([`XprtOps`]) goes to the stage that implements it.

use kernel::{prelude::*, sync::Arc};

use super::{
    accept,
    class::{Rdma, CLASS},
    connection::Connection,
    ctxt::{CallCtxt, Rq},
    listener,
    listener::Listener,
    recvfrom,
    registry::Registry,
    sendto,
};
use crate::sunrpc::{ClassData, CreateArgs, NewXprt, XprtOps};

#[vtable]
impl XprtOps for Rdma {
    type Listener = Listener;
    type Conn = Connection;
    type Ctxt = CallCtxt;
    type Data = Registry;

    fn class_data() -> &'static ClassData<Registry> {
        CLASS.data()
    }

    /// The counterpart of C's svc_rdma_create().
    fn create(registry: &Arc<Registry>, args: &CreateArgs<'_>) -> Result<NewXprt<Listener>> {
        listener::create(registry, args)
    }

    /// The counterpart of C's svc_rdma_accept().
    fn accept(l: &Listener) -> Option<NewXprt<Connection>> {
        accept::accept(l.arrivals())
    }

    /// The counterpart of C's svc_rdma_has_wspace().
    fn has_wspace(c: &Connection) -> bool {
        c.has_wspace()
    }

    /// The counterpart of C's svc_rdma_recvfrom().
    fn recvfrom(c: &Connection, rq: &mut Rq<'_>) -> usize {
        recvfrom::recvfrom(c, rq)
    }

    /// The counterpart of C's svc_rdma_sendto().
    fn sendto(c: &Connection, rq: &mut Rq<'_>) -> Result<usize> {
        sendto::sendto(c, rq)
    }

    /// The counterpart of C's svc_rdma_result_payload().
    fn result_payload(rq: &mut Rq<'_>, offset: u32, length: u32) -> Result {
        sendto::result_payload(rq, offset, length)
    }

    /// The counterpart of C's svc_rdma_release_ctxt().
    fn release_ctxt(c: &Connection, ctxt: KBox<CallCtxt>) {
        c.ctxt_put(ctxt);
    }

    /// The counterpart of C's svc_rdma_detach().
    fn detach(c: &Connection) {
        c.detach();
    }

    /// The counterpart of C's svc_rdma_free() for a listener.
    fn free_listener(l: Pin<KBox<Listener>>) {
        Listener::free(l);
    }

    /// The counterpart of C's svc_rdma_free().
    fn free_conn(c: Pin<KBox<Connection>>) {
        Connection::free(c);
    }
}
