#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A hostile RPC-over-RDMA version 1 client (RFC 8166), for the hostile suite.

    hostile.py SERVER PORT [--seed N] [--random N] [--timeout SECS]
    hostile.py SERVER PORT --limits [--timeout SECS]
    hostile.py SERVER PORT --overrun K [--grant N] [--timeout SECS]

Connects to an NFS/RDMA listener with librdmacm (pyverbs) and sends, with a
fixed seed: valid NULL calls (NFS program 100003 version 3, procedure 0),
inline and with real registered memory behind read, write and reply chunks;
then the directed hostile cases (wrong versions, absurd credits, unknown
procedures, truncations, messages over the inline threshold, chunk lists
with huge counts, lengths, offsets and positions, overlapping and
out-of-order read segments, unknown and too-short rkeys, a write chunk and
a reply chunk too small for the reply, a large reply without a reply chunk,
RDMA_DONE and RDMA_ERROR from a client); then --random N mutations of valid
messages (bit flips, field substitutions, truncations, extensions),
pipelined up to the credits the server grants.

The outcome each message must get is computed here from the RFC, not from
any server's code (expect()):
  - rdma_vers other than 1: RDMA_ERROR ERR_VERS with vers low = high = 1
    (RFC 8166 section 4.5.1; the ERR_VERS body, section 5.3.2);
  - version 1, a transport header that cannot be decoded (a list running
    past the end, a bad XDR discriminant, a prefix cut short, an
    RDMA_NOMSG with no chunk) or an unknown rdma_proc: ERR_CHUNK
    (section 4.5.2: the responder MUST reply with ERR_CHUNK);
  - a header that decodes but whose chunks cannot be used (unknown or
    short rkeys, huge lengths, offsets, positions, overlaps) or whose reply
    does not fit the chunks offered: ERR_CHUNK, an RPC reply, or a close
    of the connection (sections 4.5.3-4.5.5 leave the choice);
  - RDMA_DONE (deprecated, section 5.3.2) or RDMA_ERROR sent by a
    requester carries no call to answer: no answer, ERR_CHUNK or a close;
  - a message whose RPC call is damaged may also get no answer (the RPC
    layer drops what it cannot decode; outside RFC 8166);
  - anything else (a valid call, whatever its credit request): the reply.
A message with no answer within --timeout seconds on a connection that
neither answered nor closed is a hang, unless "no answer" is allowed.
Every reply is checked: the version, a credit grant of at least 1 (with
--grant N: exactly N, what the server's sysfs says it provisioned), the
echoed XID, and nothing longer than the 1024-byte inline receive size this
client announces (it sends no RFC 8797 private data).

--limits (for a server whose MRs map one page, svcrdma_rs's debug_caps
short_page_list): instead of the above, Calls whose position-zero Read
chunk needs more MRs than a connection has must get ERR_CHUNK, not a
close (RFC 8166 section 4.5: the responder cannot use the chunks), and the
connection must then serve NULL calls.

--overrun K (a client over its credits, RFC 8166 section 3.3.1: a
requester must not have more Calls outstanding than the responder granted):
after one NULL call learns the grant G, G + K NULL calls go out at once.
The server may not stall or drop them: each gets its reply, or ERR_CHUNK
for what arrived while every Call context was busy; the connection stays
(a close is a mismatch), and NULL calls are served afterwards.

Otherwise the client never has more calls outstanding than the server
granted (one before the first grant), reposts each receive, reconnects after a close
and counts it. Prints one summary line; exits 1 on any mismatch or hang.
"""
import argparse
import os
import random
import select
import signal
import struct
import sys
import time
import traceback

import pyverbs.cm_enums as ce
import pyverbs.enums as e
from pyverbs.cmid import CMID, AddrInfo, CMEvent, CMEventChannel, ConnParam
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

RDMA_MSG, RDMA_NOMSG, RDMA_MSGP, RDMA_DONE, RDMA_ERROR = range(5)
ERR_VERS, ERR_CHUNK = 1, 2
INLINE = 1024  # RFC 8166 section 3.3.2's default, both directions
CALL_SLOTS = 64  # most calls this client keeps outstanding
SLOT_DATA = 16384  # registered bytes per call for chunk targets
SEND_SIZE = 16384  # largest message sent (over-inline cases)
# Room for --overrun: a grant of up to 128 (svcrdma_rs and the C svcrdma
# both grant 128) plus 16 Calls over it, and their replies.
SEND_SLOTS = 128 + 16
RECV_SLOTS = 128 + 16 + 1
NFS_PROG, NFS_V3, NFS_V4 = 100003, 3, 4

# Outcomes.
REPLY = "reply"  # an RPC reply for the call
ERRV = "err_vers"
ERRC = "err_chunk"
CLOSE = "close"
DROP = "no_answer"
ANYERR = "any_error"  # ERR_VERS or ERR_CHUNK (the version is not readable)


def u32(v):
    return struct.pack(">I", v & 0xFFFFFFFF)


def rpc_call(xid, prog=NFS_PROG, vers=NFS_V3, proc=0, body=b"", auth_sys=False):
    cred = u32(0) + u32(0)
    if auth_sys:  # AUTH_SYS, uid 0, gid 0: nfsd's NFSv4 wants a real flavour
        name = b"hostile\0"
        b = u32(0) + u32(7) + name + u32(0) + u32(0) + u32(0)
        cred = u32(1) + u32(len(b)) + b
    return u32(xid) + u32(0) + u32(2) + u32(prog) + u32(vers) + u32(proc) + cred + u32(0) + u32(0) + body


# soft-iWARP (7.3) accepts by sending its MPA reply and only then hands the
# socket's receive callback to the QP (siw_accept: siw_send_mpareqrep, then
# siw_qp_socket_assoc). A message that reaches the server in between is
# ignored by the CM's callback (siw_cm_llp_data_ready, state RDMA_MODE) and
# waits in the socket until the next one arrives: any server, ours or the C
# svcrdma, then seems not to answer. On iWARP the client waits this long
# after ESTABLISHED before its first send.
IWARP_SETTLE = 0.2

# Where a transport header's first Read segment keeps its offset: xid,
# version, credits, procedure, list discriminator, position, handle, length.
OFFSET0 = 32


def seg(handle, length, offset):
    return u32(handle) + u32(length) + struct.pack(">Q", offset & (2**64 - 1))


def hdr(xid, proc=RDMA_MSG, credits=32, reads=(), writes=(), reply=None, vers=1):
    """A transport header: reads = [(position, handle, length, offset)],
    writes = [[(handle, length, offset), ...]], reply = [segments] or None."""
    b = u32(xid) + u32(vers) + u32(credits) + u32(proc)
    for pos, h, ln, off in reads:
        b += u32(1) + u32(pos) + seg(h, ln, off)
    b += u32(0)
    for chunk in writes:
        b += u32(1) + u32(len(chunk)) + b"".join(seg(*s) for s in chunk)
    b += u32(0)
    if reply is None:
        b += u32(0)
    else:
        b += u32(1) + u32(len(reply)) + b"".join(seg(*s) for s in reply)
    return b


class Dec:
    """Big-endian XDR reader; short reads raise IndexError."""

    def __init__(self, b, off=0):
        self.b, self.off = b, off

    def u(self):
        if self.off + 4 > len(self.b):
            raise IndexError
        v = struct.unpack_from(">I", self.b, self.off)[0]
        self.off += 4
        return v

    def q(self):
        return (self.u() << 32) | self.u()

    def opaque(self):
        n = self.u()
        if self.off + n > len(self.b):
            raise IndexError
        v = self.b[self.off:self.off + n]
        self.off += (n + 3) & ~3
        return v


def parse_chunks(d):
    """The read list, write list and reply chunk (RFC 8166 section 5.3.1),
    or ValueError/IndexError if they do not decode."""
    reads, writes, reply = [], [], None
    while True:
        disc = d.u()
        if disc == 0:
            break
        if disc != 1:
            raise ValueError("read list discriminant")
        reads.append((d.u(), d.u(), d.u(), d.q()))
    while True:
        disc = d.u()
        if disc == 0:
            break
        if disc != 1:
            raise ValueError("write list discriminant")
        n = d.u()
        if n * 16 > len(d.b) - d.off:
            raise IndexError
        writes.append([(d.u(), d.u(), d.q()) for _ in range(n)])
    disc = d.u()
    if disc == 1:
        n = d.u()
        if n * 16 > len(d.b) - d.off:
            raise IndexError
        reply = [(d.u(), d.u(), d.q()) for _ in range(n)]
    elif disc != 0:
        raise ValueError("reply chunk discriminant")
    return reads, writes, reply


class Case:
    """One message and the outcomes the RFC allows for it."""

    __slots__ = ("name", "msg", "allowed", "xids", "slot", "check", "sent", "any_xid", "outcome")

    def __init__(self, name, msg, allowed, xids, slot=None, check=None, any_xid=False):
        self.name, self.msg, self.allowed, self.xids = name, msg, allowed, xids
        self.slot, self.check, self.any_xid = slot, check, any_xid
        self.sent, self.outcome = 0.0, None


def expect(msg, template):
    """The outcomes RFC 8166 allows for msg, a mutation of the valid message
    template (whose chunks all name this client's registered memory)."""
    if len(msg) < 8:  # no version: the RFC prescribes nothing
        return {ANYERR, CLOSE, DROP}
    d = Dec(msg)
    d.u()
    if d.u() != 1:
        return {ERRV}
    if len(msg) < 16:
        return {ERRC}
    d.u()
    proc = d.u()
    if proc == RDMA_DONE:
        return {DROP, ERRC, CLOSE}
    if proc == RDMA_ERROR:
        return {DROP, CLOSE}
    if proc == RDMA_MSGP:  # deprecated: may be refused or served
        return {ERRC, REPLY, CLOSE, DROP}
    if proc not in (RDMA_MSG, RDMA_NOMSG):
        return {ERRC}
    try:
        chunks = parse_chunks(d)
    except (ValueError, IndexError):
        return {ERRC}
    reads, writes, reply = chunks
    if proc == RDMA_NOMSG and not reads and not writes and reply is None:
        return {ERRC}
    t = Dec(template)
    t.off = 16
    tchunks = parse_chunks(t)
    same = proc == struct.unpack_from(">I", template, 12)[0] and chunks == tchunks
    if same and msg[d.off:] == template[t.off:] and msg[:4] == template[:4]:
        return {REPLY}
    # A damaged call: the server may refuse its chunks, close, answer at the
    # RPC level, or drop a call it cannot decode.
    return {REPLY, ERRC, CLOSE, DROP}


class Stats:
    def __init__(self, verbose):
        self.c = {}
        self.mismatches = []
        self.verbose = verbose

    def add(self, k, n=1):
        self.c[k] = self.c.get(k, 0) + n

    def bad(self, case, what):
        self.add("mismatches")
        if self.verbose:
            print(f"MISMATCH {case.name}: {what}; sent {case.msg[:96].hex()}", flush=True)
        if len(self.mismatches) < 30:
            self.mismatches.append(f"{case.name}: {what}; sent {case.msg[:64].hex()}"
                                   f"{'...' if len(case.msg) > 64 else ''} ({len(case.msg)} bytes)")


def cm_fds():
    """This process's open RDMA CM files (pyverbs does not expose an event
    channel's file descriptor, which this client polls)."""
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "/dev/infiniband/rdma_cm":
                fds.add(int(fd))
        except OSError:
            pass
    return fds


class Client:
    def __init__(self, args, stats):
        self.a, self.s = args, stats
        self.pd = None
        self.chan = None
        self.collateral = []

    # --- connection -------------------------------------------------------

    def event(self, want, timeout=30):
        return self.event_any((want,), timeout)[1]

    def event_any(self, wants, timeout=30):
        """The next CM event, which must be one of `wants`: (type, private data)."""
        r, _, _ = select.select([self.cmfd], [], [], timeout)
        if not r:
            raise RuntimeError(f"no CM event within {timeout} s (wanted {wants})")
        ev = CMEvent(self.chan)
        t, pd = ev.event_type, ev.private_data
        ev.ack_cm_event()
        if t not in wants:
            raise RuntimeError(f"CM event {t}, wanted {wants}")
        return t, pd

    def connect(self):
        if self.chan is None:
            # One channel for every connection: destroying an id drops its
            # pending events.
            before = cm_fds()
            self.chan = CMEventChannel()
            new = cm_fds() - before
            if len(new) != 1:
                raise RuntimeError(f"cannot tell the CM event channel's fd: {new}")
            self.cmfd = new.pop()
        self.id = CMID(creator=self.chan)
        self.resolve_path()
        ctx = self.id.context
        if self.pd is None:
            self.register(ctx)
        # Our own QP (not the CM's), for work requests with ids and offsets
        # into memory registered once.
        self.scq = CQ(ctx, SEND_SLOTS + 8)
        self.rcq = CQ(ctx, RECV_SLOTS + 8)
        cap = QPCap(max_send_wr=SEND_SLOTS, max_recv_wr=RECV_SLOTS, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.rcq, cap=cap, sq_sig_all=1))
        self.id.connect(ConnParam(resources=4, depth=4, retry=5, rnr_retry=7, qp_num=self.qp.qp_num))
        # IB and RoCE report CONNECT_RESPONSE: the QP goes through INIT,
        # RTR and RTS here (INIT only now: its access rights come from the
        # connection's parameters), then the CM is told. iWARP reports
        # ESTABLISHED at once, its provider having moved the QP to RTS.
        t, pd = self.event_any((ce.RDMA_CM_EVENT_CONNECT_RESPONSE, ce.RDMA_CM_EVENT_ESTABLISHED))
        if t == ce.RDMA_CM_EVENT_CONNECT_RESPONSE:
            for st in (e.IBV_QPS_INIT, e.IBV_QPS_RTR, e.IBV_QPS_RTS):
                attr, mask = self.id.init_qp_attr(st)
                self.qp.modify(attr, mask)
        for i in range(RECV_SLOTS):
            self.post_recv(i)
        if t == ce.RDMA_CM_EVENT_CONNECT_RESPONSE:
            self.id.establish()
        else:
            time.sleep(IWARP_SETTLE)
        self.server_recv = INLINE
        # RFC 8797: the server's own receive size, if it says.
        if pd and len(pd) >= 8 and pd[:5] == bytes.fromhex("f6ab0e1801"):
            self.server_recv = (pd[7] + 1) * 1024
        self.credits = 1
        self.out = {}  # xid -> Case
        self.pending = {}  # id(Case) -> Case, the calls outstanding
        self.next_expiry = 0.0
        self.sfree = list(range(SEND_SLOTS))
        self.up = True

    def post_recv(self, i):
        sge = SGE(self.recv_mr.buf + i * INLINE, INLINE, self.recv_mr.lkey)
        self.qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[sge]))

    def resolve_path(self):
        ai = AddrInfo(src=None, dst=self.a.server, dst_service=str(self.a.port), port_space=ce.RDMA_PS_TCP)
        self.id.resolve_addr(ai, 5000)
        self.event(ce.RDMA_CM_EVENT_ADDR_RESOLVED)
        self.id.resolve_route(5000)
        self.event(ce.RDMA_CM_EVENT_ROUTE_RESOLVED)

    def register(self, ctx):
        """Memory registered once, for every connection (re-registering per
        connection would cost more than the messages under emulation)."""
        self.pd = PD(ctx)
        lw = e.IBV_ACCESS_LOCAL_WRITE
        self.send_mr = MR(self.pd, SEND_SLOTS * SEND_SIZE, lw)
        self.recv_mr = MR(self.pd, RECV_SLOTS * INLINE, lw)
        # Chunk targets: one region per call slot, readable and writable by
        # the server (read chunks carry calls, write and reply chunks take
        # replies).
        self.data = MR(self.pd, CALL_SLOTS * SLOT_DATA,
                       lw | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_WRITE)
        self.free_slots = list(range(CALL_SLOTS))

    def slot_addr(self, slot):
        return self.data.buf + slot * SLOT_DATA

    def close(self, why):
        """Ends the connection; every outstanding call resolves as closed."""
        if not self.up:
            return
        self.up = False
        self.s.add("closes")
        self.s.add(f"closes_{why}")
        for c in list(self.pending.values()):
            self.resolve(c, CLOSE)
        try:
            self.id.disconnect()
        except Exception:
            pass
        self.qp.close()
        self.id.close()
        self.scq.close()
        self.rcq.close()

    def reconnect(self):
        t = time.monotonic()
        self.connect()
        self.s.add("reconnects")
        self.s.add("reconnect_ms", int((time.monotonic() - t) * 1000))

    # --- sending and completions -------------------------------------------

    def window(self):
        return min(self.credits, CALL_SLOTS)

    def send(self, case, ignore_credits=False):
        """Posts case.msg; waits for a credit first (with ignore_credits,
        only for a free send slot)."""
        while (not ignore_credits and len(self.pending) >= self.window()) or not self.sfree:
            self.progress(0.05)
            if not self.up:
                return False
        i = self.sfree.pop()
        n = len(case.msg)
        self.send_mr.write(case.msg, n, i * SEND_SIZE)
        case.sent = time.monotonic()
        for x in case.xids:
            self.out[x] = case
        self.pending[id(case)] = case
        sge = SGE(self.send_mr.buf + i * SEND_SIZE, n, self.send_mr.lkey)
        self.qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[sge]))
        self.s.add("sent")
        return True

    def resolve(self, case, outcome, detail=""):
        if case.outcome is not None:
            return
        case.outcome = outcome
        for x in case.xids:
            if self.out.get(x) is case:
                del self.out[x]
        self.pending.pop(id(case), None)
        if case.slot is not None:
            self.free_slots.append(case.slot)
            case.slot = None
        self.s.add(outcome)
        if outcome not in case.allowed:
            if outcome == CLOSE and len(self.collateral) > 0:
                # Another message in flight may have caused the close.
                self.s.add("close_collateral")
                return
            self.s.bad(case, f"got {outcome}{' ' + detail if detail else ''}, want {'/'.join(sorted(case.allowed))}")

    def progress(self, wait):
        """Handles completions and CM events; waits up to `wait` seconds."""
        if not self.up:
            return
        got = False
        n, wcs = self.scq.poll(32)
        for wc in wcs:
            got = True
            self.sfree.append(wc.wr_id)
            if wc.status != e.IBV_WC_SUCCESS:
                self.collateral = [c for c in self.pending.values() if CLOSE in c.allowed]
                self.close(f"send_error_{wc.status}")
                return
        n, wcs = self.rcq.poll(32)
        for wc in wcs:
            got = True
            if wc.status != e.IBV_WC_SUCCESS:
                if wc.status == e.IBV_WC_LOC_LEN_ERR:
                    self.s.add("oversize_replies")
                    self.s.bad(Case("connection", b"", set(), []), "a reply longer than the 1024-byte inline receive size")
                self.collateral = [c for c in self.pending.values() if CLOSE in c.allowed]
                self.close(f"recv_error_{wc.status}")
                return
            data = self.recv_mr.read(wc.byte_len, wc.wr_id * INLINE)
            self.post_recv(wc.wr_id)
            self.on_reply(data)
        self.expire()
        if not got:
            r, _, _ = select.select([self.cmfd], [], [], wait)
            if r:
                ev = CMEvent(self.chan)
                t = ev.event_type
                ev.ack_cm_event()
                if t in (ce.RDMA_CM_EVENT_DISCONNECTED, ce.RDMA_CM_EVENT_DEVICE_REMOVAL):
                    self.collateral = [c for c in self.pending.values() if CLOSE in c.allowed]
                    self.close("server")

    def expire(self):
        now = time.monotonic()
        if now < self.next_expiry:
            return
        self.next_expiry = now + 0.5
        for c in list(self.pending.values()):
            if now - c.sent > self.a.timeout:
                if DROP in c.allowed:
                    self.resolve(c, DROP)
                else:
                    self.s.add("hangs")
                    self.resolve(c, DROP, "(hang: no answer, connection neither answered nor closed)")

    def on_reply(self, b):
        try:
            d = Dec(b)
            xid, vers, credits, proc = d.u(), d.u(), d.u(), d.u()
        except IndexError:
            self.s.bad(Case("connection", b, set(), []), f"reply of {len(b)} bytes: {b.hex()}")
            return
        case = self.out.get(xid)
        if case is None:
            anyx = [c for c in self.pending.values() if c.any_xid]
            case = anyx[0] if anyx else None
        if case is None and proc == RDMA_MSG:
            try:
                parse_chunks(d)
                case = self.out.get(Dec(b, d.off).u())
            except (IndexError, ValueError):
                pass
        if case is None:
            self.s.add("unmatched_replies")
            self.s.bad(Case("connection", b, set(), []), f"reply for no outstanding call: {b[:64].hex()}")
            return
        if vers != 1:
            self.resolve(case, "bad_reply", f"(reply version {vers})")
            return
        if credits < 1:
            self.resolve(case, "bad_reply", "(credit grant 0)")
            return
        if self.a.grant and credits != self.a.grant:
            self.resolve(case, "bad_reply", f"(credit grant {credits}, the server's sysfs says {self.a.grant})")
            return
        self.credits = credits
        if proc == RDMA_ERROR:
            try:
                err = d.u()
                if err == ERR_VERS:
                    lo, hi = d.u(), d.u()
            except IndexError:
                self.resolve(case, "bad_reply", f"(truncated RDMA_ERROR {b.hex()})")
                return
            if err == ERR_VERS:
                if (lo, hi) != (1, 1):
                    self.resolve(case, "bad_reply", f"(ERR_VERS low {lo} high {hi})")
                    return
                out = ERRV
            elif err == ERR_CHUNK:
                out = ERRC
            else:
                self.resolve(case, "bad_reply", f"(RDMA_ERROR code {err})")
                return
            if ANYERR in case.allowed:
                case.allowed = case.allowed | {out}
            self.resolve(case, out)
            return
        if proc not in (RDMA_MSG, RDMA_NOMSG):
            self.resolve(case, "bad_reply", f"(reply rdma_proc {proc})")
            return
        try:
            chunks = parse_chunks(d)
        except (IndexError, ValueError):
            self.resolve(case, "bad_reply", f"(reply header does not decode: {b[:64].hex()})")
            return
        check = case.check or (check_null if case.allowed == {REPLY} else check_any_rpc)
        problem = check(self, case, proc, chunks, b[d.off:])
        if problem:
            self.resolve(case, "bad_reply", f"({problem})")
        else:
            self.s.add("answered_ok")
            self.resolve(case, REPLY)

    def drain(self):
        while self.up and self.pending:
            self.progress(0.05)

    def unsent(self, case):
        """Counts a case that could not be sent and frees its slot."""
        self.s.add("unsent")
        if case.slot is not None:
            self.free_slots.append(case.slot)

    def run_case(self, case):
        """Sends one case alone and waits for its outcome."""
        self.drain()
        if not self.up:
            self.reconnect()
        if not self.send(case):
            self.unsent(case)
            self.reconnect()
            return
        while self.up and case.outcome is None:
            self.progress(0.05)
        if not self.up:
            self.reconnect()


def rpc_reply(b, xid):
    """None if b starts an accepted RPC reply to xid, else what is wrong;
    and the offset of the results."""
    try:
        d = Dec(b)
        rx, mtype, stat = d.u(), d.u(), d.u()
        if rx != xid:
            return f"RPC reply xid {rx:#x}, want {xid:#x}", 0
        if mtype != 1:
            return f"RPC message type {mtype}", 0
        if stat != 0:
            return "RPC reply denied", 0
        d.u()
        d.opaque()
        acc = d.u()
        if acc != 0:
            return f"RPC accept_stat {acc}", 0
        return None, d.off
    except IndexError:
        return f"short RPC reply ({len(b)} bytes)", 0


def check_any_rpc(client, case, proc, chunks, body):
    """A call the RFC lets the server refuse at the RPC level: any RPC
    reply to it (inline, or in the reply chunk offered), accepted or not."""
    if proc == RDMA_NOMSG:
        body, problem = reply_chunk_body(client, chunks)
        if problem:
            return problem
    try:
        d = Dec(body)
        rx, mtype = d.u(), d.u()
    except IndexError:
        return f"short RPC reply ({len(body)} bytes)"
    # The XID is not checked: a damaged read chunk may have carried any call.
    if mtype != 1:
        return f"not an RPC reply (xid {rx:#x}, message type {mtype})"
    return None


def offered_reply_chunk(msg):
    """Whether the call msg offers a Reply chunk."""
    try:
        d = Dec(msg)
        d.off = 16
        return parse_chunks(d)[2] is not None
    except (IndexError, ValueError):
        return False


def check_null(client, case, proc, chunks, body):
    """A NULL reply: inline, no chunks used but those offered. A call that
    offers a Reply chunk may have its reply there (RDMA_NOMSG) even when it
    would fit inline: RFC 8166 leaves the choice to the responder (the C
    svcrdma uses the chunk whenever one is offered)."""
    if proc == RDMA_NOMSG and offered_reply_chunk(case.msg):
        return check_reply_chunk(client, case, proc, chunks, body)
    if proc != RDMA_MSG:
        return f"NULL reply as rdma_proc {proc}"
    if chunks[0]:
        return "reply with a read list"
    problem, _ = rpc_reply(body, case.xids[-1])
    return problem


class Suite:
    def __init__(self, args):
        self.a = args
        self.s = Stats(args.verbose)
        self.c = Client(args, self.s)
        self.rng = random.Random(args.seed)
        self.xid = 0x48000000 + self.rng.randrange(1 << 20) * 16

    def next_xid(self):
        self.xid = (self.xid + 1) & 0xFFFFFFFF
        return self.xid

    def null(self, xid, credits=32, proc=RDMA_MSG, reads=(), writes=(), reply=None, vers=1, body=None):
        if body is None:
            body = rpc_call(xid)
        return hdr(xid, proc, credits, reads, writes, reply, vers) + body

    def case(self, name, msg, allowed, xid, slot=None, check=None, any_xid=False):
        only = getattr(self.a, "only", "")
        if only and not name.startswith(tuple(only.split(","))):
            # Not asked for: its slot goes back unused.
            if slot is not None:
                self.c.free_slots.append(slot)
            return None
        c = Case(name, msg, allowed, [xid], slot, check, any_xid)
        t = time.monotonic()
        self.c.run_case(c)
        if self.a.verbose:
            why = [k for k in self.s.c if k.startswith("closes_")] if c.outcome == CLOSE else ""
            print(f"{name}: {c.outcome} ({time.monotonic() - t:.2f} s) {why}", flush=True)
        return c

    def slot(self):
        return self.c.free_slots.pop()

    # A NULL call in a position-zero read chunk (RDMA_NOMSG), from this
    # client's registered memory.
    def nomsg_call(self, xid, slot, rlen=None, roff=0, rkey=None, pos=0):
        call = rpc_call(xid)
        self.c.data.write(call, len(call), slot * SLOT_DATA)
        ln = len(call) if rlen is None else rlen
        key = self.c.data.rkey if rkey is None else rkey
        return hdr(xid, RDMA_NOMSG, 32, [(pos, key, ln, self.c.slot_addr(slot) + roff)])

    def directed(self):
        c, V = self.c, self.case
        any_fail = {REPLY, ERRC, CLOSE}
        # Valid calls first: inline, then each chunk kind with real memory.
        for i in range(20):
            x = self.next_xid()
            V("null_inline", self.null(x), {REPLY}, x)
        x = self.next_xid()
        s = self.slot()
        V("null_read_chunk_pos0", self.nomsg_call(x, s), {REPLY}, x, s)
        x, s = self.next_xid(), self.slot()
        wseg = (c.data.rkey, 4096, c.slot_addr(s))
        V("null_write_chunk_unused", self.null(x, writes=[[wseg]]), {REPLY}, x, s, check=check_write_unused)
        x, s = self.next_xid(), self.slot()
        V("null_reply_chunk", self.null(x, reply=[(c.data.rkey, 4096, c.slot_addr(s))]), {REPLY}, x, s,
          check=check_reply_chunk)
        # Versions: ERR_VERS, low = high = 1.
        for v in (0, 2, 7, 0xFFFFFFFF):
            x = self.next_xid()
            V(f"version_{v:#x}", self.null(x, vers=v), {ERRV}, x)
        x = self.next_xid()
        V("version_2_short", hdr(x, vers=2)[:8], {ERRV}, x)
        # Credits are a request: any value, a valid call is served.
        for cr in (0, 1, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF):
            x = self.next_xid()
            V(f"credits_{cr:#x}", self.null(x, credits=cr), {REPLY}, x)
        # Procedures.
        for p in (5, 6, 0x100, 0xFFFFFFFF):
            x = self.next_xid()
            V(f"proc_{p:#x}", self.null(x, proc=p), {ERRC}, x)
        x = self.next_xid()
        V("proc_msgp", self.null(x, proc=RDMA_MSGP), {ERRC, REPLY, CLOSE, DROP}, x)
        x = self.next_xid()
        V("rdma_done", hdr(x, RDMA_DONE)[:16], {DROP, ERRC, CLOSE}, x)
        x = self.next_xid()
        V("rdma_error_vers", u32(x) + u32(1) + u32(1) + u32(RDMA_ERROR) + u32(ERR_VERS) + u32(1) + u32(1),
          {DROP, CLOSE}, x)
        x = self.next_xid()
        V("rdma_error_chunk", u32(x) + u32(1) + u32(1) + u32(RDMA_ERROR) + u32(ERR_CHUNK), {DROP, CLOSE}, x)
        x = self.next_xid()
        V("nomsg_without_chunks", self.null(x, proc=RDMA_NOMSG), {ERRC}, x)
        # Truncations of a valid call, at every length of its header and
        # some of its RPC message.
        for n in list(range(1, 29)) + [32, 40, 52, 60]:
            x = self.next_xid()
            m = self.null(x)[:n]
            V(f"truncated_{n}", m, expect(m, self.null(x)), x, any_xid=n < 8)
        # Bad discriminants.
        for where, m in (("read", 16), ("write", 20), ("reply", 24)):
            x = self.next_xid()
            b = bytearray(self.null(x))
            b[m:m + 4] = u32(2)
            V(f"bad_{where}_discriminant", bytes(b), {ERRC}, x)
        # Over the inline threshold: within the server's receive buffers a
        # call may be served or refused; beyond them the receive fails.
        x = self.next_xid()
        V("over_inline_2k", self.null(x, body=rpc_call(x) + bytes(2048)), any_fail, x)
        x = self.next_xid()
        big = max(c.server_recv, 4096) + 4096
        V(f"over_server_recv_{big}", self.null(x, body=rpc_call(x) + bytes(big)), {CLOSE, ERRC}, x)
        # Chunk lists with huge counts, lengths, offsets and positions.
        for cnt in (2, 1000, 0x10000, 0xFFFFFFFF):
            x = self.next_xid()
            m = hdr(x)[:20] + u32(1) + u32(cnt) + seg(1, 16, 0) + u32(0) + u32(0) + rpc_call(x)
            V(f"write_count_{cnt:#x}", m, expect(m, self.null(x)), x)
            x = self.next_xid()
            m = hdr(x)[:24] + u32(1) + u32(cnt) + seg(1, 16, 0) + rpc_call(x)
            V(f"reply_count_{cnt:#x}", m, expect(m, self.null(x)), x)
        x = self.next_xid()
        many = [(c.data.rkey, 16, c.slot_addr(0)) for _ in range(60)]
        V("write_chunk_60_segments", self.null(x, writes=[many]), any_fail, x)
        x = self.next_xid()
        V("write_list_40_chunks", self.null(x, writes=[[(c.data.rkey, 16, c.slot_addr(0))]] * 40), any_fail, x)
        for name, ln, off, key in (("read_len_huge", 0xFFFFFFFF, 0, None), ("read_len_1g", 1 << 30, 0, None),
                                   ("read_len_0", 0, 0, None), ("read_offset_huge", None, 1 << 62, None),
                                   ("read_rkey_unknown", None, 0, 0xDEADBEEF), ("read_rkey_zero", None, 0, 0),
                                   ("read_too_short", None, SLOT_DATA * CALL_SLOTS - 8, None)):
            x, s = self.next_xid(), self.slot()
            if name == "read_too_short":  # runs past the end of the MR
                m = self.nomsg_call(x, s, rlen=40, roff=0, rkey=None)
                m = m[:OFFSET0] + struct.pack(">Q", c.data.buf + off) + m[OFFSET0 + 8:]
            else:
                m = self.nomsg_call(x, s, rlen=ln, roff=0 if off is None else off, rkey=key)
                if off:
                    m = m[:OFFSET0] + struct.pack(">Q", off) + m[OFFSET0 + 8:]
            # The call cannot be read: refused, or the connection lost
            # (RFC 8166 section 4.5.5); an empty call may be dropped.
            V(name, m, {ERRC, CLOSE, DROP} if ln == 0 else {ERRC, CLOSE}, x, s)
        for pos in (4, 40, 41, 0x7FFFFFFF, 0xFFFFFFF8):
            x, s = self.next_xid(), self.slot()
            c.data.write(bytes(8), 8, s * SLOT_DATA)
            m = hdr(x, RDMA_MSG, 32, [(pos, c.data.rkey, 8, c.slot_addr(s))]) + rpc_call(x)
            V(f"read_position_{pos:#x}", m, any_fail | {DROP}, x, s)
        # Overlapping and out-of-order read segments.
        for name, segs in (("overlap", [(40, 0, 8), (40, 4, 8)]), ("same_range", [(40, 0, 8), (40, 0, 8)]),
                           ("out_of_order", [(48, 0, 8), (40, 8, 8)]), ("pos0_twice", [(0, 0, 40), (0, 0, 40)])):
            x, s = self.next_xid(), self.slot()
            call = rpc_call(x)
            c.data.write(call + bytes(16), len(call) + 16, s * SLOT_DATA)
            reads = [(p, c.data.rkey, ln, c.slot_addr(s) + o) for p, o, ln in segs]
            proc = RDMA_NOMSG if segs[0][0] == 0 else RDMA_MSG
            m = hdr(x, proc, 32, reads) + (b"" if proc == RDMA_NOMSG else call)
            V(f"read_{name}", m, any_fail | {DROP}, x, s)
        # Write and reply chunks too small, or missing, for the reply: an
        # NFSv4 COMPOUND whose reply is ~3 KB (PUTROOTFH + GETFH, 40 times).
        for name, reply, allowed in (("big_reply_no_reply_chunk", None, {ERRC, CLOSE}),
                                     ("big_reply_reply_chunk_too_small", 256, {ERRC, CLOSE}),
                                     ("big_reply_in_reply_chunk", SLOT_DATA, {REPLY})):
            x, s = self.next_xid(), self.slot()
            rc = None if reply is None else [(c.data.rkey, reply, c.slot_addr(s))]
            m = hdr(x, RDMA_MSG, 32, reply=rc) + compound_getfh(x, 40)
            V(name, m, allowed, x, s, check=check_reply_chunk)
        x, s = self.next_xid(), self.slot()
        m = hdr(x, RDMA_MSG, 32, writes=[[(c.data.rkey, 64, c.slot_addr(s))]]) + compound_read(x, self.a.file, 8192)
        V("write_chunk_too_small", m, {ERRC, CLOSE, REPLY}, x, s, check=check_read_refusable)
        x, s = self.next_xid(), self.slot()
        m = hdr(x, RDMA_MSG, 32, writes=[[(c.data.rkey, 8192, c.slot_addr(s))]]) + compound_read(x, self.a.file, 8192)
        V("read_into_write_chunk", m, {REPLY}, x, s, check=check_read)
        # The connection still serves after all of that.
        for i in range(5):
            x = self.next_xid()
            V("null_after", self.null(x), {REPLY}, x)

    # --- random mode --------------------------------------------------------

    def template(self, kind, xid, slot):
        c = self.c
        if kind == 0:
            return self.null(xid)
        if kind == 1:
            return self.nomsg_call(xid, slot)
        if kind == 2:
            return self.null(xid, writes=[[(c.data.rkey, 4096, c.slot_addr(slot))]])
        return self.null(xid, reply=[(c.data.rkey, 4096, c.slot_addr(slot))])

    INTERESTING = (0, 1, 2, 3, 4, 5, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
                   0xFFFFFFFE, 0xFFFFFFFF)

    def mutate(self, rng, m, hlen):
        """One or two random mutations, mostly in the transport header (hlen
        bytes). The XID is left alone, so replies still match their call."""
        b = bytearray(m)
        for _ in range(1 + (rng.random() < 0.3)):
            r = rng.random()
            # Mostly the 16-byte prefix: damaged chunk lists tend to end the
            # connection (a failed RDMA Read or Write), and a reconnect
            # costs as much as ~20 messages under emulation.
            lim = rng.choice((16, 16, 16, hlen, hlen, len(b)))
            lim = min(lim, len(b))
            if r < 0.75 and lim < 8:
                r = 0.95
            if r < 0.35:  # bit flips
                for _ in range(rng.randint(1, 3)):
                    b[rng.randrange(4, lim)] ^= 1 << rng.randrange(8)
            elif r < 0.75:  # a word replaced
                w = rng.randrange(1, lim // 4)
                v = rng.choice(self.INTERESTING) if rng.random() < 0.7 else rng.getrandbits(32)
                b[w * 4:w * 4 + 4] = u32(v)
            elif r < 0.9 and len(b) > 17:  # truncated (shorter: directed cases)
                b = b[:rng.randrange(16, len(b))]
            else:  # extended
                b += rng.randbytes(rng.choice((4, 8, 16, 64, rng.randrange(1, 900))))
        return bytes(b)

    def random_mode(self, n):
        rng = random.Random(self.a.seed + 1)
        c = self.c
        for i in range(n):
            if not c.up:
                c.reconnect()
            # Mostly inline calls: a damaged chunk usually costs a
            # reconnect (a failed RDMA Read or Write ends the connection).
            kind = rng.choice((0, 0, 0, 0, 0, 0, 0, 1, 2, 3))
            x = self.next_xid()
            slot = None
            if kind and c.free_slots:
                slot = c.free_slots.pop()
            elif kind:
                kind = 0
            t = self.template(kind, x, slot)
            hlen = len(t) - 40
            m = self.mutate(rng, t, hlen)
            allowed = expect(m, t)
            xids = [x]
            if len(m) >= 4 and m[:4] != t[:4]:
                xids.append(struct.unpack(">I", m[:4])[0])
            case = Case("random", m, allowed, xids, slot, any_xid=len(m) < 8)
            if len(m) < 8 or any(xx in c.out for xx in xids):
                c.drain()
                if not c.up:
                    c.reconnect()
            if not c.send(case):
                c.unsent(case)
                continue
            c.progress(0)
            self.done = i + 1
            if self.a.progress and (i + 1) % self.a.progress == 0:
                print(f"random: {i + 1} sent, {self.s.c.get('mismatches', 0)} mismatches, "
                      f"{time.monotonic() - self.t0:.0f} s", flush=True)
        c.drain()

    def limits(self):
        c, V = self.c, self.case
        for kb in (600, 900):
            x, s = self.next_xid(), self.slot()
            call = rpc_call(x)
            # The call at the start of the client's memory, then padding
            # (never read: the Call is refused before any RDMA Read).
            c.data.write(call, len(call), 0)
            m = hdr(x, RDMA_NOMSG, 32, [(0, c.data.rkey, kb * 1024, c.slot_addr(0))])
            V(f"read_chunk_{kb}k_over_the_mr_pool", m, {ERRC}, x, s)
        for i in range(3):
            x = self.next_xid()
            V("null_after_limits", self.null(x), {REPLY}, x)

    def overrun(self, extra):
        c, V = self.c, self.case
        x = self.next_xid()
        V("null_for_the_grant", self.null(x), {REPLY}, x)
        # Our own send and receive slots bound what can be outstanding.
        n = min(c.credits + extra, SEND_SLOTS, RECV_SLOTS - 1)
        if n <= c.credits:
            self.s.bad(Case("overrun", b"", set(), []), f"grant {c.credits}: no room for calls over it")
            return
        cases = []
        for i in range(n):
            x = self.next_xid()
            case = Case(f"overrun_{i}", self.null(x), {REPLY, ERRC}, [x])
            if not c.send(case, ignore_credits=True):
                break
            cases.append(case)
        while c.up and c.pending:
            c.progress(0.05)
        if not c.up:
            self.s.bad(Case("overrun", b"", set(), []), "the server closed the connection of a client over its credits")
            c.reconnect()
        got = {}
        for case in cases:
            got[case.outcome] = got.get(case.outcome, 0) + 1
        print(f"overrun: grant {c.credits}, {len(cases)} NULL calls sent at once: "
              + ", ".join(f"{k} {v}" for k, v in sorted(got.items(), key=str)), flush=True)
        for i in range(3):
            x = self.next_xid()
            V("null_after_overrun", self.null(x), {REPLY}, x)

    def fresh(self, n):
        """n new connections, each sending a NULL call the moment it is
        established: the Call can reach the server before the CM tells it
        the connection is up, and must be answered all the same."""
        c, V = self.c, self.case
        hangs = self.s.c.get("hangs", 0)
        t = time.monotonic()
        for i in range(n):
            if i:
                c.close("fresh")
                c.connect()
            x = self.next_xid()
            V("first_call_on_a_new_connection", self.null(x), {REPLY}, x)
        print(f"fresh: {n} new connections, each answered its first call: "
              f"{n - (self.s.c.get('hangs', 0) - hangs)} within {self.a.timeout:g} s; "
              f"{time.monotonic() - t:.0f} s", flush=True)

    def run(self):
        self.t0 = t1 = time.monotonic()
        self.done = 0
        # A run stopped by timeout(1) still reports what it saw.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("hostile: terminated"))
        try:
            self.c.connect()
            if self.a.limits:
                self.limits()
                return self.summary(time.monotonic())
            if self.a.overrun:
                self.overrun(self.a.overrun)
                return self.summary(time.monotonic())
            if self.a.fresh:
                self.fresh(self.a.fresh)
                return self.summary(time.monotonic())
            self.directed()
            t1 = time.monotonic()
            if self.a.random:
                self.random_mode(self.a.random)
        except BaseException:
            self.s.add("aborted")
            traceback.print_exc()
        return self.summary(t1)

    def summary(self, t1):
        dt = time.monotonic() - t1
        c = self.s.c
        rate = f", random {self.done} in {dt:.0f} s, {self.done / dt:.1f} msg/s" if self.done and dt > 0 else ""
        keys = ("sent", "answered_ok", "err_vers", "err_chunk", "no_answer", "closes", "reconnects",
                "close_collateral", "hangs", "mismatches")
        print("hostile: seed %d, %d random; %s; %.0f s%s" % (
            self.a.seed, self.a.random, ", ".join(f"{k} {c.get(k, 0)}" for k in keys),
            time.monotonic() - self.t0, rate))
        if self.a.verbose:
            for k in sorted(c):
                print(f"  {k} {c[k]}")
        for m in self.s.mismatches:
            print("MISMATCH " + m)
        return 1 if c.get("mismatches", 0) or c.get("hangs", 0) or c.get("aborted", 0) else 0


# --- NFSv4 calls whose replies need chunks ------------------------------------

def compound(xid, ops):
    body = u32(0) + u32(0) + u32(len(ops)) + b"".join(ops)  # tag "", minorversion 0
    return rpc_call(xid, NFS_PROG, NFS_V4, 1, body, auth_sys=True)


def compound_getfh(xid, n):
    return compound(xid, [u32(24), u32(10)] * n)  # PUTROOTFH, GETFH


def xdr_string(s):
    b = s.encode()
    return u32(len(b)) + b + bytes(-len(b) % 4)


def compound_read(xid, name, count):
    # PUTROOTFH, LOOKUP name, READ with the anonymous stateid from offset 0.
    read = u32(25) + bytes(16) + struct.pack(">Q", 0) + u32(count)
    return compound(xid, [u32(24), u32(15) + xdr_string(name), read])


def pattern(n):
    """The file's contents: the suite writes the same bytes."""
    return bytes((i * 7 + (i >> 12)) & 0xFF for i in range(n))


def check_write_unused(client, case, proc, chunks, body):
    problem = check_null(client, case, proc, chunks, body)
    if problem:
        return problem
    for ch in chunks[1]:
        if sum(s[1] for s in ch) != 0:
            return f"NULL reply claims {sum(s[1] for s in ch)} bytes written"
    return None


def reply_chunk_body(client, chunks):
    """The RPC reply an RDMA_NOMSG reply wrote into the reply chunk offered
    (whose segments its header returns), and None; or None and what is
    wrong."""
    if chunks[2] is None:
        return None, "RDMA_NOMSG reply without a reply chunk"
    n = sum(s[1] for s in chunks[2])
    if n > SLOT_DATA:
        return None, f"reply chunk of {n} bytes, more than offered"
    return client.data.read(n, (chunks[2][0][2] - client.data.buf) if chunks[2] else 0), None


def check_reply_chunk(client, case, proc, chunks, body):
    """A reply inline, or in the reply chunk offered (RDMA_NOMSG)."""
    x = case.xids[0]
    if proc == RDMA_NOMSG:
        body, problem = reply_chunk_body(client, chunks)
        if problem:
            return problem
    problem, off = rpc_reply(body, x)
    return problem


def check_read_refusable(client, case, proc, chunks, body):
    """A READ whose write chunk is too small: refusing it at the NFS level
    is a valid answer; a READ that succeeds must still be right."""
    return check_read(client, case, proc, chunks, body, refusable=True)


def check_read(client, case, proc, chunks, body, refusable=False):
    """An NFSv4 READ reply: the data in the write chunk is the file's."""
    problem, off = rpc_reply(body, case.xids[0])
    if problem:
        return problem
    try:
        d = Dec(body, off)
        status = d.u()
        d.opaque()
        nops = d.u()
        for _ in range(2):
            d.u()
            if d.u() != 0:
                return "PUTROOTFH or LOOKUP failed"
        if nops != 3 or d.u() != 25 or d.u() != 0:
            return None if refusable else f"READ failed (COMPOUND status {status})"
        d.u()
        n = d.u()
    except IndexError:
        return "short READ reply"
    if len(chunks[1]) != 1:
        return f"{len(chunks[1])} write chunks in the reply, want 1"
    got = sum(s[1] for s in chunks[1][0])
    offered = sum(s[1] for s in case_writes(case))
    if got != n or got > offered:
        return f"write chunk holds {got} bytes, READ says {n}, {offered} offered"
    data = client.data.read(n, case_writes(case)[0][2] - client.data.buf) if n else b""
    if data != pattern(n):
        return "READ data in the write chunk differs from the file"
    return None


def case_writes(case):
    d = Dec(case.msg)
    d.off = 16
    return parse_chunks(d)[1][0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("server")
    p.add_argument("port", type=int)
    p.add_argument("--seed", type=int, default=8166)
    p.add_argument("--random", type=int, default=0, help="random mutations to send")
    p.add_argument("--timeout", type=float, default=30, help="seconds a call may wait for its outcome")
    p.add_argument("--file", default="hostile.dat", help="a file in the export's root, pattern() bytes")
    p.add_argument("--progress", type=int, default=0, help="print progress every N random messages")
    p.add_argument("--overrun", type=int, default=0, metavar="K",
                   help="only the over-the-credits case: K calls more than the grant at once")
    p.add_argument("--fresh", type=int, default=0, metavar="N",
                   help="only N new connections, each sending a NULL call as soon as it is up")
    p.add_argument("--limits", action="store_true",
                   help="only the over-the-limits cases (server with MRs of one page)")
    p.add_argument("--grant", type=int, default=0,
                   help="the credit grant every reply must carry (the connection's sysfs credits; 0: any >= 1)")
    p.add_argument("--only", default="", metavar="PREFIXES",
                   help="directed cases whose names start with one of these (comma-separated)")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args()
    sys.exit(Suite(a).run())


if __name__ == "__main__":
    main()
