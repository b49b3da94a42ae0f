// SPDX-License-Identifier: GPL-2.0

//! `xpo_sendto` and `xpo_result_payload`: sending a Reply.
//!
//! A Reply is nfsd's XDR stream with the result payloads it reported for
//! Write chunks cut out (`proto::layout::reply_regions`). Those payloads go
//! by RDMA Write into the client's Write chunks. The rest goes inline if
//! the transport header plus it fit the *client's* receive size (RFC 8797:
//! what it advertised, or 1024), otherwise by RDMA Write into the Reply
//! chunk; if the client offered none, it gets RDMA_ERROR (ERR_CHUNK).
//!
//! The Writes and the Send go as one chain, not waited for: when Writes
//! read the Reply's pages, the context takes them from nfsd (sunrpc gives
//! the thread fresh ones), and the chain's last completion returns the
//! context with them (`sq::post_reply`). The Send invalidates the client's
//! STag (Send With Invalidate) only when both peers set the R bit (RFC 8797
//! §4) and the Call's chunks all named that one STag.

use kernel::prelude::*;

use super::{
    call::MAX_WRITE_CHUNKS,
    connection::Connection,
    ctxt::{CallCtxt, Rq},
    live::Live,
    rw,
    sq::{post_reply, Posted},
    stats::count,
};
use crate::{
    log::pr_warn_ratelimited,
    pages::MappedPages,
    proto::{
        budget::Cost,
        inline::max_inline_reply,
        layout::{reply_layout, Payload, Regions},
        rpcrdma::{
            encode::{encode_error_chunk, encode_error_for, encode_reply},
            header::{DecodeError, Header, Proc, ERR_CHUNK, ERR_VERS},
        },
    },
    rdma::{dma::MappedBuf, wr::Chain},
};

/// `xpo_result_payload`: nfsd placed `length` bytes of result data at
/// `offset` of the Reply; they go into the Call's next Write chunk, if it
/// has one. The counterpart of C's svc_rdma_result_payload().
pub(super) fn result_payload(rq: &mut Rq<'_>, offset: u32, length: u32) -> Result {
    let Some(ctxt) = rq.ctxt_mut() else {
        return Ok(());
    };
    if length == 0 {
        return Ok(());
    }
    let k = ctxt.next_write;
    let Some(total) = ctxt.hdr.write_chunk_total(k)? else {
        // No Write chunk left: the payload stays in the Reply.
        return Ok(());
    };
    // This chunk belongs to this payload, used or not.
    ctxt.next_write = k + 1;
    let slot = ctxt.payloads.get_mut(k).ok_or(E2BIG)?;
    if length > total {
        return Err(E2BIG);
    }
    *slot = Payload {
        position: offset,
        len: length,
    };
    Ok(())
}

/// `xpo_sendto`: sends the Reply of the request's Call. Returns the Reply's
/// length; on an error the connection is closing. The counterpart of C's
/// svc_rdma_sendto().
pub(super) fn sendto(conn: &Connection, rq: &mut Rq<'_>) -> Result<usize> {
    let Some(mut ctxt) = rq.take_ctxt() else {
        return Err(ENOTCONN);
    };
    let Some(live) = conn.live() else {
        // The request keeps it until `xpo_release_ctxt`.
        rq.set_ctxt(ctxt);
        conn.close();
        return Err(ENOTCONN);
    };
    let sent = match build_reply(live, rq, &mut ctxt) {
        // The context goes with the Reply from here on.
        Ok(len) => match post_reply(live, ctxt) {
            Posted::Ok => Ok(len),
            Posted::Refused(e) => Err(e),
        },
        Err(e) => {
            // The request keeps it until `xpo_release_ctxt`.
            rq.set_ctxt(ctxt);
            Err(e)
        }
    };
    sent.map_err(|e| {
        // ENOTCONN: the connection was already going, e.g. a client that
        // disconnected with a Reply due: no fault of ours to warn about
        // (the CM event is traced, `svcrdma_rs_cm_event`; QP errors warn).
        if e != ENOTCONN {
            pr_warn_ratelimited!(
                "connection {}: sending a Reply failed: error {}, closing\n",
                conn.id,
                e.to_errno()
            );
        }
        conn.close();
        ENOTCONN
    })
}

/// Builds the Reply's chain in `ctxt` (Writes and Send), taking the Reply's
/// pages from the request if Writes read them. Returns the Reply's length.
fn build_reply(live: Live<'_>, rq: &mut Rq<'_>, ctxt: &mut CallCtxt) -> Result<usize> {
    let built = compose(live, rq, ctxt).and_then(|(len, total, invalidate)| {
        ctxt.send_inline(live.res.pd().local_dma_lkey(), total, invalidate)
            .map(|()| len)
    });
    if built.is_err() || !ctxt.reply.is_mapped() {
        // No Writes read the Reply (none built, or dropped, or nothing is
        // posted): if its pages were taken for them, they go back to the
        // request, as if never taken.
        ctxt.reply.unmap();
        let _ = ctxt.reply.give_back_reply(rq);
    }
    built
}

/// Builds the Reply's Writes in `ctxt`'s chain and its transport header and
/// inline part in the send buffer; the Reply's pages go into the context
/// first if Writes may read them. Returns the Reply's length, the bytes to
/// send, and the key the Send invalidates, if any.
fn compose(
    live: Live<'_>,
    rq: &mut Rq<'_>,
    ctxt: &mut CallCtxt,
) -> Result<(usize, usize, Option<u32>)> {
    let credits = live.info.credits;
    let len = u32::try_from(rq.res_len()).map_err(|_| EMSGSIZE)?;
    let payloads = ctxt.payloads;
    // The payloads checked once: what stays inline, and where it lies.
    let (inline_len, regions) = reply_layout(len, &payloads).map_err(|_| EINVAL)?;

    // The Call's header borrows its copy in the context while the Reply is
    // built in the context's other fields.
    let CallCtxt {
        hdr,
        chain,
        reply: pages,
        send_buf,
        ..
    } = &mut *ctxt;
    let call = hdr.get()?;
    let mut out = Out::cleared(chain, pages, send_buf, credits);
    // Writes map the Reply's memory, which must stay until they complete:
    // if the Call lets any be built (a Write chunk for a payload, or a
    // Reply chunk), the context takes the Reply's pages before mapping
    // them (`build_reply` gives them back if none is).
    let nwrites = call.writes.len().min(MAX_WRITE_CHUNKS);
    let writes = call.reply.is_some() || payloads[..nwrites].iter().any(|p| p.len > 0);
    if writes {
        out.pages.take_reply(rq)?;
    }
    let written = write_payloads(live, &mut out, &call, &payloads)?;
    let written = &written[..nwrites];

    // Inline if it fits the client's receive buffer.
    let limit = max_inline_reply(&live.info.client) as usize;
    let msg_hdr = out.header(&call, Proc::Msg, written, None)?;
    let sent = if msg_hdr + inline_len as usize <= limit {
        // From wherever the Reply's pages are now.
        let from = if writes {
            Source::Pages
        } else {
            Source::Request
        };
        (out.body(rq, from, msg_hdr, regions)?, Sent::Msg)
    } else if let Some(reply) = call.reply.filter(|r| r.total() >= inline_len) {
        let n = rw::build_writes(live, out.chain, out.pages, reply.segments(), regions)?;
        (
            out.header(&call, Proc::NoMsg, written, Some(n))?,
            Sent::NoMsg,
        )
    } else {
        pr_warn_ratelimited!(
            "connection {}: a {}-byte Reply fits neither the client's {}-byte receive buffer nor its Reply chunk, answered with RDMA_ERROR\n",
            live.id,
            inline_len,
            limit
        );
        out.error_chunk(call.xid)?
    };
    let (total, how) = out.within_send_queue(live, call.xid, sent)?;
    let wrote = written.iter().any(|&w| w > 0);
    count_reply(&live, how, wrote, call.xid);

    let invalidate = if live.info.remote_invalidate() {
        call.single_handle()
    } else {
        None
    };
    Ok((len as usize, total, invalidate))
}

/// Builds the RDMA Writes of the payloads nfsd placed in the Call's Write
/// chunks (`payloads`, by chunk). Returns the bytes written per chunk.
fn write_payloads(
    live: Live<'_>,
    out: &mut Out<'_>,
    call: &Header<'_>,
    payloads: &[Payload; MAX_WRITE_CHUNKS],
) -> Result<[u32; MAX_WRITE_CHUNKS]> {
    let mut written = [0u32; MAX_WRITE_CHUNKS];
    for (k, chunk) in call.writes.iter().enumerate().take(MAX_WRITE_CHUNKS) {
        let p = payloads[k];
        if p.len == 0 {
            continue;
        }
        let range = core::iter::once((p.position, p.position + p.len));
        written[k] = rw::build_writes(live, out.chain, out.pages, chunk.segments(), range)?;
    }
    Ok(written)
}

/// Where a Reply is built: the context's chain (its Writes), the Reply's
/// pages the Writes read, and the send buffer (its transport header and
/// inline part); `credits` is the grant it carries.
struct Out<'c> {
    chain: &'c mut Chain,
    pages: &'c mut MappedPages,
    send_buf: &'c mut MappedBuf,
    credits: u32,
}

/// Where a Reply's inline bytes are.
enum Source {
    /// In the Reply's pages, taken from the request for Writes.
    Pages,
    /// Still in the request.
    Request,
}

impl<'c> Out<'c> {
    /// The Reply's chain and pages, both emptied, and its send buffer.
    fn cleared(
        chain: &'c mut Chain,
        pages: &'c mut MappedPages,
        send_buf: &'c mut MappedBuf,
        credits: u32,
    ) -> Self {
        chain.clear();
        pages.clear();
        Self {
            chain,
            pages,
            send_buf,
            credits,
        }
    }

    /// Encodes the Reply's transport header (`proc_`; with the bytes
    /// `written` per Write chunk and, for `NoMsg`, `reply` in the Reply
    /// chunk). Returns its length.
    fn header(
        &mut self,
        call: &Header<'_>,
        proc_: Proc,
        written: &[u32],
        reply: Option<u32>,
    ) -> Result<usize> {
        encode_reply(
            &mut self.send_buf[..],
            self.credits,
            proc_,
            call,
            written,
            reply,
        )
        .map_err(|_| EMSGSIZE)
    }

    /// Copies the Reply's inline `regions` after its header (`at` bytes)
    /// into the send buffer. Returns the bytes to send.
    fn body(
        &mut self,
        rq: &mut Rq<'_>,
        from: Source,
        mut at: usize,
        regions: Regions<'_>,
    ) -> Result<usize> {
        let send_buf = &mut *self.send_buf;
        let mut copy = |b: &[u8]| {
            let dst = send_buf.get_mut(at..at + b.len()).ok_or(EMSGSIZE)?;
            dst.copy_from_slice(b);
            at += b.len();
            Ok(())
        };
        for (s, e) in regions {
            match from {
                Source::Pages => self.pages.reply_bytes(s as usize, e as usize, &mut copy)?,
                Source::Request => rq.res_bytes(s as usize, e as usize, &mut copy)?,
            }
        }
        Ok(at)
    }

    /// Drops the Writes built and puts the RDMA_ERROR (ERR_CHUNK) to `xid`
    /// in the send buffer instead: the chunks the client gave cannot take
    /// the Reply.
    fn error_chunk(&mut self, xid: u32) -> Result<(usize, Sent)> {
        self.chain.clear();
        self.pages.unmap();
        let len =
            encode_error_chunk(&mut self.send_buf[..], xid, self.credits).map_err(|_| EMSGSIZE)?;
        Ok((len, Sent::Error(ERR_CHUNK)))
    }

    /// The Reply as `sent` says, if its Writes and Send fit the send
    /// queue; a Reply needing more send-queue slots than exist could never
    /// be posted: the client gets ERR_CHUNK to `xid` (the chunks it gave
    /// cannot be used), not a closed connection it would resend into.
    fn within_send_queue(
        &mut self,
        live: Live<'_>,
        xid: u32,
        sent: (usize, Sent),
    ) -> Result<(usize, Sent)> {
        let wrs = self.chain.len().saturating_add(1);
        if wrs <= live.sq_slots() as usize {
            return Ok(sent);
        }
        // (Within the slots, the budget has nothing else to refuse: a
        // Reply takes no MRs.)
        let Err(over) = live.budget().check(Cost { mrs: 0, wrs }) else {
            return Ok(sent);
        };
        pr_warn_ratelimited!(
            "connection {}: a Reply {} ({} work requests), answered with RDMA_ERROR\n",
            live.id,
            over.as_str(),
            wrs
        );
        self.error_chunk(xid)
    }
}

/// How a Reply goes: its transport header's procedure.
enum Sent {
    /// RDMA_MSG: inline, with payloads in Write chunks if any.
    Msg,
    /// RDMA_NOMSG: in the Reply chunk.
    NoMsg,
    /// RDMA_ERROR with this error code.
    Error(u32),
}

/// Counts a Reply by how it goes; `wrote`: payload went in Write chunks.
fn count_reply(conn: &Connection, how: Sent, wrote: bool, xid: u32) {
    let c = &conn.stats.c;
    match how {
        Sent::Error(err) => count_error(conn, xid, err),
        Sent::NoMsg => count(&c.replies_reply_chunk, 1),
        Sent::Msg if wrote => count(&c.replies_write_chunk, 1),
        Sent::Msg => count(&c.replies_inline, 1),
    }
}

/// Counts and traces an RDMA_ERROR to `xid` by its error code (RFC 8166:
/// 1 ERR_VERS, 2 ERR_CHUNK).
fn count_error(conn: &Connection, xid: u32, err: u32) {
    let c = &conn.stats.c;
    match err {
        ERR_VERS => count(&c.rdma_errors_vers, 1),
        _ => count(&c.rdma_errors_chunk, 1),
    }
    crate::trace::rdma_error(conn.id, xid, err);
}

/// Builds in `ctxt` the RDMA_ERROR RFC 8166 asks for in answer to a Call
/// whose header was refused. Returns whether there is one to send (none
/// for a message too short to have an XID); the caller posts it like a
/// Reply (`sq::post_reply`), so the nfsd thread does not wait for it.
/// The counterpart of C's svc_rdma_send_error_msg().
pub(super) fn build_error(live: Live<'_>, ctxt: &mut CallCtxt, err: &DecodeError) -> Result<bool> {
    let (Some((xid, code)), Ok(Some(len))) = (
        err.answer(),
        encode_error_for(&mut ctxt.send_buf[..], err, live.info.credits),
    ) else {
        return Ok(false);
    };
    ctxt.chain.clear();
    ctxt.reply.unmap();
    ctxt.send_inline(live.res.pd().local_dma_lkey(), len, None)?;
    count_error(&live, xid, code);
    Ok(true)
}
