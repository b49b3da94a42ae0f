#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Parks nfsd threads on one RPC-over-RDMA connection, then kills it.

    park.py SERVER PORT [--calls N] [--size BYTES]

A client whose peer stops answering mid-transfer, as a host that dies while
writing looks to the server. Connects with librdmacm (pyverbs, its own QP,
as hostile.py does), sends one NULL call inline (its reply grants the
credits), then up to N NULL calls (at most the credits granted) that each
carry a Read chunk of SIZE bytes of this client's memory after the call:
the server RDMA Reads each chunk before nfsd sees the call. As soon as the
server has acknowledged every Send, the client moves its QP to the error
state: from then on the Reads the server posts (or has in flight) get no
response, and every nfsd thread that takes one of these calls waits for its
Read until the server's retries run out (the retry count is the largest
the CM allows, so that takes many seconds).

Prints "parked N" and waits for a line on stdin; then disconnects (the CM
sends a DREQ: the server sees DISCONNECTED at once), prints "gone" and
exits. EOF on stdin does the same.

On iWARP a QP moved to the error state ends its TCP stream (soft-iWARP
drops the connection), so the server would see a disconnect, not a dead
peer. There (--hold) the client keeps its QP and the caller makes the peer
dead: after the first reply it prints "ready (credits N)" and waits for a
line on stdin before it sends the calls; the caller drops the server's
packets to this client in between (tests/vm/faults.sh), so the server's
Read requests are never answered while the caller keeps them dropped.
"""
import argparse
import os
import select
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile as h  # noqa: E402

import pyverbs.cm_enums as ce  # noqa: E402
import pyverbs.enums as e  # noqa: E402
from pyverbs.cmid import CMID, AddrInfo, CMEvent, CMEventChannel, ConnParam  # noqa: E402
from pyverbs.cq import CQ  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr  # noqa: E402
from pyverbs.wr import SGE, RecvWR, SendWR  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("server")
    p.add_argument("port", type=int)
    p.add_argument("--calls", type=int, default=16)
    p.add_argument("--size", type=int, default=65536, help="bytes of each call's Read chunk (multiple of 4)")
    p.add_argument("--hold", action="store_true", help="keep the QP; wait for a line before the calls (iWARP)")
    a = p.parse_args()
    n, size = a.calls, a.size & ~3

    before = h.cm_fds()
    chan = CMEventChannel()
    fd = (h.cm_fds() - before).pop()

    def event(*want, timeout=30):
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            raise RuntimeError(f"no CM event within {timeout} s (wanted {want})")
        ev = CMEvent(chan)
        t = ev.event_type
        ev.ack_cm_event()
        if t not in want:
            raise RuntimeError(f"CM event {t}, wanted {want}")
        return t

    cid = CMID(creator=chan)
    ai = AddrInfo(src=None, dst=a.server, dst_service=str(a.port), port_space=ce.RDMA_PS_TCP)
    cid.resolve_addr(ai, 5000)
    event(ce.RDMA_CM_EVENT_ADDR_RESOLVED)
    cid.resolve_route(5000)
    event(ce.RDMA_CM_EVENT_ROUTE_RESOLVED)
    ctx = cid.context
    pd = PD(ctx)
    lw = e.IBV_ACCESS_LOCAL_WRITE
    slots = n + 1
    send_mr = MR(pd, slots * h.INLINE, lw)
    recv_mr = MR(pd, slots * h.INLINE, lw)
    data = MR(pd, n * size, lw | e.IBV_ACCESS_REMOTE_READ)
    scq = CQ(ctx, 2 * slots + 8)
    rcq = CQ(ctx, 2 * slots + 8)
    cap = QPCap(max_send_wr=slots, max_recv_wr=slots, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=scq, rcq=rcq, cap=cap, sq_sig_all=1))
    # retry=7: the server retries each unanswered Read the most the CM allows.
    cid.connect(ConnParam(resources=16, depth=4, retry=7, rnr_retry=7, qp_num=qp.qp_num))
    # IB and RoCE: CONNECT_RESPONSE, the QP is moved to RTS here. iWARP:
    # ESTABLISHED, the provider moved it (as in hostile.py).
    t = event(ce.RDMA_CM_EVENT_CONNECT_RESPONSE, ce.RDMA_CM_EVENT_ESTABLISHED)
    if t == ce.RDMA_CM_EVENT_CONNECT_RESPONSE:
        for st in (e.IBV_QPS_INIT, e.IBV_QPS_RTR, e.IBV_QPS_RTS):
            attr, mask = cid.init_qp_attr(st)
            qp.modify(attr, mask)
    for i in range(slots):
        sge = SGE(recv_mr.buf + i * h.INLINE, h.INLINE, recv_mr.lkey)
        qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[sge]))
    if t == ce.RDMA_CM_EVENT_CONNECT_RESPONSE:
        cid.establish()
    else:
        time.sleep(h.IWARP_SETTLE)

    def send(i, msg):
        send_mr.write(msg, len(msg), i * h.INLINE)
        sge = SGE(send_mr.buf + i * h.INLINE, len(msg), send_mr.lkey)
        qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[sge]))

    def wait_cq(cq, count, what, timeout=30):
        got, t = [], time.monotonic() + timeout
        while len(got) < count:
            _, wcs = cq.poll(count - len(got))
            for wc in wcs:
                if wc.status != e.IBV_WC_SUCCESS:
                    raise RuntimeError(f"{what}: completion status {wc.status}")
                got.append(wc)
            if time.monotonic() > t:
                raise RuntimeError(f"{what}: {len(got)} of {count} completions in {timeout} s")
        return got

    xid = 0x50A4C000
    send(n, h.hdr(xid) + h.rpc_call(xid))
    wait_cq(scq, 1, "first call's send")
    wc = wait_cq(rcq, 1, "first call's reply")[0]
    reply = recv_mr.read(wc.byte_len, wc.wr_id * h.INLINE)
    credits = struct.unpack(">I", reply[8:12])[0]
    k = max(1, min(n, credits))
    if a.hold:
        print(f"ready (credits {credits})", flush=True)
        sys.stdin.readline()
    for i in range(k):
        x = xid + 1 + i
        call = h.rpc_call(x)
        send(i, h.hdr(x, reads=[(len(call), data.rkey, size, data.buf + i * size)]) + call)
    # Acknowledged: the calls are in the server's receive buffers. No Read
    # of them gets an answer from here on.
    wait_cq(scq, k, "the calls' sends")
    if not a.hold:
        qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    print(f"parked {k} (credits {credits})", flush=True)
    sys.stdin.readline()
    try:
        cid.disconnect()
    except Exception as ex:  # the server may have given up already
        print(f"disconnect: {ex}", flush=True)
    print("gone", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
