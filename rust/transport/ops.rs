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

    fn create(registry: &Arc<Registry>, args: &CreateArgs<'_>) -> Result<NewXprt<Listener>> {
        listener::create(registry, args)
    }

    fn accept(l: &Listener) -> Option<NewXprt<Connection>> {
        accept::accept(l.arrivals())
    }

    fn has_wspace(c: &Connection) -> bool {
        c.has_wspace()
    }

    fn recvfrom(c: &Connection, rq: &mut Rq<'_>) -> usize {
        recvfrom::recvfrom(c, rq)
    }

    fn sendto(c: &Connection, rq: &mut Rq<'_>) -> Result<usize> {
        sendto::sendto(c, rq)
    }

    fn result_payload(rq: &mut Rq<'_>, offset: u32, length: u32) -> Result {
        sendto::result_payload(rq, offset, length)
    }

    fn release_ctxt(c: &Connection, ctxt: KBox<CallCtxt>) {
        c.ctxt_put(ctxt);
    }

    fn detach(c: &Connection) {
        c.detach();
    }

    fn free_listener(l: Pin<KBox<Listener>>) {
        Listener::free(l);
    }

    fn free_conn(c: Pin<KBox<Connection>>) {
        Connection::free(c);
    }
}
