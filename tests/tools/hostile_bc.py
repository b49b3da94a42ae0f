#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A hostile RPC-over-RDMA client of the backward direction (RFC 8167).

    hostile_bc.py SERVER PORT [--timeout SECS] [--verbose] [--hold-file PATH]

Connects to an NFS/RDMA listener like hostile.py (whose connection,
transport-header and reply-checking code it reuses), then, on that one
connection, becomes an NFSv4.1 client whose backchannel is the connection:
EXCHANGE_ID (a client owner unique to the run), CREATE_SESSION with
CREATE_SESSION4_FLAG_CONN_BACK_CHAN (back channel: 2 requests, 1024-byte
messages, as this client receives 1024 bytes inline; callback security
AUTH_NONE), RECLAIM_COMPLETE. Forward Calls use AUTH_SYS (the export's
flavour).

nfsd sends no CB_NULL probe to an NFSv4.1 client (it marks the callback
path UP without one), so this client makes nfsd call back: it OPENs a new
file for reading, which gets a read delegation, and WRITEs the file with
NFSv3 (another client, to nfsd), which makes nfsd recall the delegation:
a CB_COMPOUND (CB_SEQUENCE, CB_RECALL) arrives as an RDMA_MSG on this
connection. nfsd gives a callback about a second to be answered (a tenth
of the lease, at least 1 s) and sends it again while it goes unanswered,
so fresh backward Calls keep coming while the cases run.

Then the hostile backward-direction Replies, each case named (cases()):
before any backchannel exists; an XID that matches no backward Call;
rdma_vers 0, 2 and 0xFFFFFFFF; every truncation 1..27 of a backward Reply's
transport header and truncations of its RPC reply; chunks in a Reply
(read list, write list, reply chunk, RDMA_NOMSG with the Reply in a read
chunk), which backward messages do not carry; RDMA_NOMSG without chunks,
RDMA_MSGP, RDMA_DONE, RDMA_ERROR and an unknown procedure; bursts of
Replies beyond the backchannel's credits (3x the credits of the server's
backward Call), within and beyond the receive buffers the server posts (its
forward credit grant plus the backchannel's); last, the real outstanding
backward Call answered correctly twice (the second a duplicate). Where a
case can carry the XID of a real outstanding backward Call, it does.

Each case is judged (outcomes as in hostile.py): after its messages, a
forward NFSv3 NULL Call must be answered (the connection survived), or
the server closes the connection (then this client reconnects, binds the
new connection to the session with BIND_CONN_TO_SESSION, and goes on);
neither within --timeout seconds is a hang. Whatever the server sends
about a case must be a well-formed answer that RFC 8166 allows for what
the case sent (cases()): never an RPC reply to a Reply; RDMA_ERROR only
with the XID sent, version 1 and a sane body; ERR_VERS (low = high = 1)
for a version other than 1, ERR_CHUNK for a header that does not decode;
no answer for a Reply that decodes. Every backward Call the server sends
must be well formed (parse_bc_call()), and nothing it sends may exceed
the 1024-byte inline receive size. Prints
    hostile_bc: sent N, survived N, closes N, hangs N, mismatches N
and exits 1 on any hang or mismatch.

--hold-file PATH: once the session's backchannel carried a backward Call,
writes "ready" to PATH and waits (up to 300 s) until PATH is removed, so a
test can look at the server's side of the connection.
"""
import argparse
import os
import random
import struct
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile as H  # noqa: E402
from hostile import (CLOSE, DROP, ERR_CHUNK, ERR_VERS, ERRC, ERRV, NFS_PROG, RDMA_DONE,  # noqa: E402
                     RDMA_ERROR, RDMA_MSG, RDMA_MSGP, RDMA_NOMSG, Case, Dec, hdr, parse_chunks, rpc_call,
                     u32, xdr_string)

NFS_V3 = 3
RPC_REPLY_MSG = "rpc_reply"  # an RPC reply sent in answer to one of ours: never right here
BAD = "bad_answer"  # a malformed answer

# NFSv4.1 (RFC 8881) operations and constants.
OP_CLOSE, OP_DELEGRETURN, OP_GETFH, OP_OPEN, OP_PUTFH, OP_PUTROOTFH = 4, 8, 10, 18, 22, 24
OP_BIND_CONN, OP_EXCHANGE_ID, OP_CREATE_SESSION, OP_DESTROY_SESSION, OP_FREE_STATEID = 41, 42, 43, 44, 45
OP_SEQUENCE, OP_DESTROY_CLIENTID, OP_RECLAIM_COMPLETE = 53, 57, 58
OP_CB_RECALL, OP_CB_RECALL_ANY, OP_CB_SEQUENCE = 4, 8, 11
NFS4_OK = 0
NFS4ERR_NOTSUPP = 10004
NFS4ERR_DELAY = 10008
NFS4ERR_GRACE = 10013
NFS4ERR_DELEG_REVOKED = 10087
NFS4ERR_SEQ_MISORDERED = 10063
NFS4ERR_RETRY_UNCACHED_REP = 10068
EXCHGID4_FLAG_USE_NON_PNFS = 0x00010000
SP4_NONE = 0
CREATE_SESSION4_FLAG_CONN_BACK_CHAN = 0x2
NFS4_CDFC4_BACK_OR_BOTH = 0x7
OPEN4_SHARE_ACCESS_READ = 1
OPEN4_SHARE_ACCESS_WANT_READ_DELEG = 0x0100
OPEN4_CREATE, UNCHECKED4, CLAIM_NULL = 1, 0, 0
FATTR4_MODE = 33
AUTH_NONE = 0
CB_PROGRAM = 0x40000000
CB_VERSION = 1
CB_NULL, CB_COMPOUND = 0, 1
# Channel attributes (RFC 8881 section 18.36): headerpadsize, maxrequestsize,
# maxresponsesize, maxresponsesize_cached, maxoperations, maxrequests. Both
# directions within the 1024-byte inline size this client receives.
FORE_ATTRS = (0, 1024, 1024, 0, 8, 4)
BACK_ATTRS = (0, 1024, 1024, 0, 2, 2)
BC_REPLY_CREDITS = 2  # the credits this client's backward Replies grant
OPEN_DELEGATE_NAMES = {0: "none", 1: "read", 2: "write", 3: "none_ext", 4: "read_attrs", 5: "write_attrs"}


# --- XDR -------------------------------------------------------------------------

def u64(v):
    return struct.pack(">Q", v & (2**64 - 1))


def opaque(b):
    return u32(len(b)) + b + bytes(-len(b) % 4)


def fixed(d, n):
    """n bytes of fixed-length opaque data (padded to 4) from Dec d."""
    if d.off + n > len(d.b):
        raise IndexError
    v = d.b[d.off:d.off + n]
    d.off += (n + 3) & ~3
    return v


def compound41(xid, ops, tag=b""):
    """An NFSv4.1 COMPOUND Call (minorversion 1) with AUTH_SYS."""
    body = opaque(tag) + u32(1) + u32(len(ops)) + b"".join(ops)
    return rpc_call(xid, NFS_PROG, H.NFS_V4, 1, body, auth_sys=True)


def channel_attrs(a):
    return b"".join(u32(v) for v in a) + u32(0)  # ca_rdma_ird<1>: none


def op_exchange_id(owner, verifier, flags=EXCHGID4_FLAG_USE_NON_PNFS):
    # client_owner4, eia_flags, state_protect4_a (SP4_NONE), impl_id<1> (none)
    return u32(OP_EXCHANGE_ID) + verifier[:8].ljust(8, b"\0") + opaque(owner) + u32(flags) + u32(SP4_NONE) + u32(0)


def op_create_session(clientid, seq, flags=CREATE_SESSION4_FLAG_CONN_BACK_CHAN, fore=FORE_ATTRS,
                      back=BACK_ATTRS, cb_program=CB_PROGRAM):
    # ... csa_cb_program, csa_sec_parms<>: one, AUTH_NONE.
    return (u32(OP_CREATE_SESSION) + u64(clientid) + u32(seq) + u32(flags) + channel_attrs(fore)
            + channel_attrs(back) + u32(cb_program) + u32(1) + u32(AUTH_NONE))


def op_sequence(sessionid, seq, slot=0, highest=0, cachethis=False):
    return u32(OP_SEQUENCE) + sessionid + u32(seq) + u32(slot) + u32(highest) + u32(int(cachethis))


def op_reclaim_complete(one_fs=False):
    return u32(OP_RECLAIM_COMPLETE) + u32(int(one_fs))


def op_bind_conn(sessionid, direction=NFS4_CDFC4_BACK_OR_BOTH):
    return u32(OP_BIND_CONN) + sessionid + u32(direction) + u32(0)  # not RDMA mode: it is RDMA already


def op_open_create_read(clientid, owner, name, access=OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG):
    """OPEN name for reading, creating it (UNCHECKED4, mode 0644)."""
    mode_bitmap = u32(2) + u32(0) + u32(1 << (FATTR4_MODE - 32))
    attrs = mode_bitmap + opaque(u32(0o644))
    return (u32(OP_OPEN) + u32(0) + u32(access) + u32(0) + u64(clientid) + opaque(owner)
            + u32(OPEN4_CREATE) + u32(UNCHECKED4) + attrs + u32(CLAIM_NULL) + xdr_string(name))


def op_putrootfh():
    return u32(OP_PUTROOTFH)


def op_putfh(fh):
    return u32(OP_PUTFH) + opaque(fh)


def op_getfh():
    return u32(OP_GETFH)


def op_delegreturn(stateid):
    return u32(OP_DELEGRETURN) + stateid


def op_close(stateid):
    return u32(OP_CLOSE) + u32(0) + stateid


def op_free_stateid(stateid):
    return u32(OP_FREE_STATEID) + stateid


def op_destroy_session(sessionid):
    return u32(OP_DESTROY_SESSION) + sessionid


def op_destroy_clientid(clientid):
    return u32(OP_DESTROY_CLIENTID) + u64(clientid)


def nfs3_write(xid, fh, data, offset=0):
    """An NFSv3 WRITE (FILE_SYNC) with AUTH_SYS: another client to nfsd."""
    body = opaque(fh) + u64(offset) + u32(len(data)) + u32(2) + opaque(data)
    return rpc_call(xid, NFS_PROG, NFS_V3, 7, body, auth_sys=True)


def res_exchange_id(d):
    r = {"clientid": d.q(), "seqid": d.u(), "flags": d.u()}
    how = d.u()
    if how != SP4_NONE:
        raise ValueError(f"state protection {how}")
    d.q()
    d.opaque()  # server_owner
    d.opaque()  # server_scope
    n = d.u()
    if n > 1:
        raise ValueError(f"{n} server impl ids")
    for _ in range(n):
        d.opaque(), d.opaque(), d.q(), d.u()
    return r


def res_create_session(d):
    r = {"sessionid": fixed(d, 16), "seq": d.u(), "flags": d.u()}
    for k in ("fore", "back"):
        a = [d.u() for _ in range(6)]
        ird = [d.u() for _ in range(d.u())]
        r[k] = tuple(a) + (ird,)
    return r


def res_sequence(d):
    return {"sessionid": fixed(d, 16), "seq": d.u(), "slot": d.u(), "highest": d.u(), "target": d.u(),
            "status_flags": d.u()}


def res_open(d):
    r = {"stateid": fixed(d, 16)}
    d.u(), d.q(), d.q()  # change_info4
    r["rflags"] = d.u()
    for _ in range(d.u()):
        d.u()  # attrset
    t = r["deleg_type"] = d.u()
    if t in (1, 2, 4, 5):
        r["deleg_stateid"] = fixed(d, 16)
        d.u()  # recall
        if t in (2, 5):
            d.u(), d.q()  # space limit
        d.u(), d.u(), d.u(), d.opaque()  # nfsace4
    elif t == 3:
        why = r["why_no_deleg"] = d.u()
        if why in (1, 2):
            d.u()
    elif t != 0:
        raise ValueError(f"delegation type {t}")
    return r


def res_bind_conn(d):
    return {"sessionid": fixed(d, 16), "dir": d.u(), "rdma": d.u()}


RESULTS = {
    OP_EXCHANGE_ID: res_exchange_id,
    OP_CREATE_SESSION: res_create_session,
    OP_SEQUENCE: res_sequence,
    OP_OPEN: res_open,
    OP_GETFH: lambda d: {"fh": d.opaque()},
    OP_CLOSE: lambda d: {"stateid": fixed(d, 16)},
    OP_BIND_CONN: res_bind_conn,
    OP_RECLAIM_COMPLETE: lambda d: {},
    OP_PUTROOTFH: lambda d: {},
    OP_PUTFH: lambda d: {},
    OP_DELEGRETURN: lambda d: {},
    OP_DESTROY_SESSION: lambda d: {},
    OP_FREE_STATEID: lambda d: {},
    OP_DESTROY_CLIENTID: lambda d: {},
}


def parse_compound(body, xid):
    """An NFSv4 COMPOUND reply: (status, [(op, status, result dict)]), the
    results of the operations this client sends; ValueError if it is not
    one."""
    problem, off = H.rpc_reply(body, xid)
    if problem:
        raise ValueError(problem)
    try:
        d = Dec(body, off)
        status = d.u()
        d.opaque()  # tag
        n = d.u()
        ops = []
        for _ in range(n):
            op, st = d.u(), d.u()
            if op not in RESULTS:
                raise ValueError(f"result of operation {op}, not sent")
            ops.append((op, st, RESULTS[op](d) if st == NFS4_OK else {}))
            if st != NFS4_OK:
                break
    except IndexError:
        raise ValueError(f"short COMPOUND reply ({len(body)} bytes)")
    return status, ops


# --- the backward direction ------------------------------------------------------

class BcCall:
    """A backward Call from the server: its XID, credits, procedure and
    (CB_COMPOUND) operations [(op, args dict)]."""

    def __init__(self, xid, credits, proc, tag=b"", ops=(), unknown_op=None):
        self.xid, self.credits, self.proc = xid, credits, proc
        self.tag, self.ops, self.unknown_op = tag, list(ops), unknown_op
        self.t = time.monotonic()
        self.used = False  # answered, or consumed by a case


def parse_cb_compound(d):
    """CB_COMPOUND4args after the RPC header: (tag, ops, unknown op or None),
    ValueError if malformed."""
    tag = d.opaque()
    minor = d.u()
    if minor != 1:
        raise ValueError(f"CB_COMPOUND minorversion {minor}")
    d.u()  # callback_ident
    n = d.u()
    if n > 16:
        raise ValueError(f"CB_COMPOUND of {n} operations")
    ops = []
    for i in range(n):
        op = d.u()
        if op == OP_CB_SEQUENCE:
            a = {"sessionid": fixed(d, 16), "seq": d.u(), "slot": d.u(), "highest": d.u(), "cachethis": d.u()}
            for _ in range(d.u()):  # referring_call_list4
                fixed(d, 16)
                for _ in range(d.u()):
                    d.u(), d.u()
        elif op == OP_CB_RECALL:
            a = {"stateid": fixed(d, 16), "truncate": d.u(), "fh": d.opaque()}
        elif op == OP_CB_RECALL_ANY:
            a = {"keep": d.u(), "mask": [d.u() for _ in range(d.u())]}
        else:
            return tag, ops, op  # arguments of unknown size: answered NOTSUPP
        if i == 0 and op != OP_CB_SEQUENCE:
            raise ValueError(f"CB_COMPOUND starts with operation {op}, not CB_SEQUENCE")
        ops.append((op, a))
    if not ops or ops[0][0] != OP_CB_SEQUENCE:
        raise ValueError("CB_COMPOUND without CB_SEQUENCE")
    return tag, ops, None


def parse_bc_call(b, cb_program=CB_PROGRAM):
    """(BcCall, None) if b is a well-formed backward Call (RFC 8167: an
    inline RDMA_MSG without chunks whose RPC message is a CALL of the
    callback program); (None, problem) if it is a backward Call that is
    malformed; (None, None) if it is no backward Call (an answer of some
    kind, judged elsewhere)."""
    try:
        d = Dec(b)
        xid, vers, credits, proc = d.u(), d.u(), d.u(), d.u()
        if proc not in (RDMA_MSG, RDMA_NOMSG, RDMA_MSGP):
            return None, None
        reads, writes, reply = parse_chunks(d)
        body = b[d.off:]
        if len(body) < 8 or struct.unpack_from(">I", body, 4)[0] != 0:
            return None, None
    except (IndexError, ValueError):
        return None, None
    if vers != 1:
        return None, f"backward Call in rdma_vers {vers}"
    if proc != RDMA_MSG:
        return None, f"backward Call as rdma_proc {proc}"
    if reads or writes or reply is not None:
        return None, "backward Call with chunks"
    if credits < 1:
        return None, "backward Call with credits 0"
    try:
        r = Dec(body)
        rx, _, rpcvers, prog, pvers, pproc = r.u(), r.u(), r.u(), r.u(), r.u(), r.u()
        if rx != xid:
            return None, f"backward Call RPC XID {rx:#x} in a header of XID {xid:#x}"
        if rpcvers != 2:
            return None, f"backward Call in RPC version {rpcvers}"
        if prog != cb_program or pvers != CB_VERSION:
            return None, f"backward Call of program {prog:#x} version {pvers}"
        for _ in range(2):  # credential, verifier
            r.u()
            r.opaque()
        if pproc == CB_NULL:
            return BcCall(xid, credits, pproc), None
        if pproc != CB_COMPOUND:
            return None, f"backward Call of procedure {pproc}"
        tag, ops, unknown = parse_cb_compound(r)
    except IndexError:
        return None, f"short backward Call ({len(b)} bytes)"
    except ValueError as ex:
        return None, str(ex)
    return BcCall(xid, credits, pproc, tag, ops, unknown), None


def bc_reply_body(call):
    """The RPC reply that answers call correctly: CB_NULL's empty result, or
    CB_COMPOUND's with CB_SEQUENCE echoing the session, sequence and slot,
    CB_RECALL and CB_RECALL_ANY done, any other operation NOTSUPP."""
    rpc = u32(call.xid) + u32(1) + u32(0) + u32(0) + u32(0) + u32(0)  # accepted, AUTH_NONE, SUCCESS
    if call.proc == CB_NULL:
        return rpc
    res = []
    status = NFS4_OK
    for op, a in call.ops:
        if op == OP_CB_SEQUENCE:
            res.append(u32(op) + u32(NFS4_OK) + a["sessionid"] + u32(a["seq"]) + u32(a["slot"])
                       + u32(a["highest"]) + u32(a["highest"]))
        else:
            res.append(u32(op) + u32(NFS4_OK))
    if call.unknown_op is not None:
        status = NFS4ERR_NOTSUPP
        res.append(u32(call.unknown_op) + u32(status))
    return rpc + u32(status) + opaque(call.tag) + u32(len(res)) + b"".join(res)


def bc_reply(call, credits=BC_REPLY_CREDITS):
    return hdr(call.xid, RDMA_MSG, credits) + bc_reply_body(call)


def classify_answer(b):
    """What a server message that is no backward Call says about a case:
    (outcome, problem): ERRV, ERRC, RPC_REPLY_MSG (an RPC message answering
    a Reply: never right) or BAD with what is wrong."""
    try:
        d = Dec(b)
        xid, vers, credits, proc = d.u(), d.u(), d.u(), d.u()
    except IndexError:
        return BAD, f"a {len(b)}-byte message: {b.hex()}"
    if vers != 1:
        return BAD, f"answer in rdma_vers {vers}"
    if credits < 1:
        return BAD, "answer granting 0 credits"
    if proc == RDMA_ERROR:
        try:
            err = d.u()
            if err == ERR_VERS:
                lo, hi = d.u(), d.u()
                if (lo, hi) != (1, 1):
                    return BAD, f"ERR_VERS low {lo} high {hi}"
                return ERRV, None
            if err == ERR_CHUNK:
                return ERRC, None
            return BAD, f"RDMA_ERROR code {err}"
        except IndexError:
            return BAD, f"truncated RDMA_ERROR {b.hex()}"
    if proc in (RDMA_MSG, RDMA_NOMSG):
        return RPC_REPLY_MSG, f"rdma_proc {proc} message answering a Reply: {b[:64].hex()}"
    return BAD, f"answer with rdma_proc {proc}"


# --- the cases -----------------------------------------------------------------

# What a case may get (besides CLOSE, always allowed: a server may end a
# connection on anything it dislikes, RFC 8166 section 4.5.5):
DECODES = {DROP}  # a backward Reply that decodes: nothing on the wire
BADHDR = {ERRC}  # version 1, a header that does not decode: ERR_CHUNK (section 4.5.2)
BADVERS = {ERRV}  # rdma_vers other than 1: ERR_VERS (section 4.5.1)
NOVERS = {ERRV, ERRC, DROP}  # no version to read: nothing prescribed
PEERERR = {DROP}  # the peer's RDMA_ERROR: nothing to answer (the server may close)


class Ctx:
    """What cases are built from: the XID to use (a real outstanding
    backward Call's where there is one), unmatched XIDs, this client's
    memory for chunks, the credit numbers."""

    def __init__(self, real_xid, fresh_xid, rkey, addr, put, credits, bc_credits):
        self.real_xid, self.fresh_xid = real_xid, fresh_xid
        self.rkey, self.addr, self.put = rkey, addr, put  # put(b): b at addr
        self.credits, self.bc_credits = credits, bc_credits


def reply_for(xid, proc=RDMA_MSG, credits=BC_REPLY_CREDITS, vers=1, **chunks):
    """A backward Reply as a client would send one: a valid CB_NULL reply
    (the simplest reply any backward Call accepts) behind the header."""
    return hdr(xid, proc, credits, vers=vers, **chunks) + bc_reply_body(BcCall(xid, credits, CB_NULL))


class BcCase:
    """One named case: build(ctx) gives its messages; allowed the outcomes
    (CLOSE is added); uses_real: it wants a real backward Call's XID and,
    consumes: sends one a Reply the RPC layer will take."""

    def __init__(self, name, build, allowed, any_xid=False, uses_real=False, consumes=False):
        self.name, self.build, self.any_xid = name, build, any_xid
        self.allowed = set(allowed) | {CLOSE}
        self.uses_real, self.consumes = uses_real, consumes
        self.answers = []
        self.closed = False
        self.outcome = None


def nomsg_reply(c):
    """RDMA_NOMSG, the Reply in a position-zero read chunk."""
    x = c.real_xid()
    body = bc_reply_body(BcCall(x, BC_REPLY_CREDITS, CB_NULL))
    c.put(body)
    return [hdr(x, RDMA_NOMSG, BC_REPLY_CREDITS, [(0, c.rkey, len(body), c.addr)])]


def cases():
    """The directed cases, in order (the real call answered twice is last,
    run separately: Suite.final_answer)."""
    L = []

    def add(name, build, allowed, **kw):
        L.append(BcCase(name, build, allowed, **kw))

    add("unknown_xid", lambda c: [reply_for(c.fresh_xid())], DECODES)
    add("unknown_xid_credits_0", lambda c: [reply_for(c.fresh_xid(), credits=0)], DECODES)
    add("unknown_xid_credits_max", lambda c: [reply_for(c.fresh_xid(), credits=0xFFFFFFFF)], DECODES)
    for v in (0, 2, 0xFFFFFFFF):
        add(f"version_{v:#x}", lambda c, v=v: [reply_for(c.real_xid(), vers=v)], BADVERS, uses_real=True)
    # Every truncation of a backward Reply's 28-byte transport header.
    for n in range(1, 28):
        add(f"truncated_header_{n}", lambda c, n=n: [reply_for(c.real_xid())[:n]],
            NOVERS if n < 8 else BADHDR, any_xid=n < 4, uses_real=True)
    # The header whole, the RPC reply cut: too short to say REPLY (no
    # backward Reply, and no Call either: dropped, or refused as an
    # RDMA_MSG without an RPC message), then a REPLY cut short (a backward
    # Reply, the RPC layer's to refuse).
    for n in (0, 4, 7, 8, 12, 16, 20):
        add(f"truncated_body_{n}", lambda c, n=n: [reply_for(c.real_xid())[:28 + n]],
            DECODES if n >= 8 else DECODES | BADHDR, uses_real=True, consumes=n >= 8)
    # Chunks, which backward messages never carry (RFC 8167 section 4):
    # the message is no backward Reply; it may be refused, dropped, or
    # end the connection.
    chunked = DECODES | BADHDR
    add("reply_with_read_list",
        lambda c: [reply_for(c.real_xid(), reads=[(24, c.rkey, 8, c.addr)])], chunked, uses_real=True)
    add("reply_with_read_list_bad_rkey",
        lambda c: [reply_for(c.real_xid(), reads=[(24, 0xDEADBEEF, 8, c.addr)])], chunked, uses_real=True)
    add("reply_with_write_list",
        lambda c: [reply_for(c.real_xid(), writes=[[(c.rkey, 4096, c.addr)]])], chunked, uses_real=True)
    add("reply_with_reply_chunk",
        lambda c: [reply_for(c.real_xid(), reply=[(c.rkey, 4096, c.addr)])], chunked, uses_real=True)
    add("reply_nomsg_in_read_chunk", nomsg_reply, chunked, uses_real=True)
    # Procedures.
    add("proc_nomsg_without_chunks", lambda c: [reply_for(c.real_xid(), proc=RDMA_NOMSG)], BADHDR, uses_real=True)
    add("proc_msgp", lambda c: [reply_for(c.real_xid(), proc=RDMA_MSGP)], BADHDR | DECODES, uses_real=True)
    add("proc_unknown_5", lambda c: [reply_for(c.real_xid(), proc=5)], BADHDR, uses_real=True)
    add("proc_rdma_done", lambda c: [hdr(c.real_xid(), RDMA_DONE)[:16]], BADHDR | DECODES, uses_real=True)
    add("proc_rdma_error_vers",
        lambda c: [hdr(c.real_xid(), RDMA_ERROR)[:16] + u32(ERR_VERS) + u32(1) + u32(1)], PEERERR, uses_real=True)
    add("proc_rdma_error_chunk",
        lambda c: [hdr(c.real_xid(), RDMA_ERROR)[:16] + u32(ERR_CHUNK)], PEERERR, uses_real=True)
    # More Replies at once than the backchannel's credits: within the
    # server's receive buffers, then beyond them (the RDMA layer's
    # receiver-not-ready retries, unlimited on this client's QP, hold the
    # excess until buffers are reposted).
    add("burst_3x_bc_credits", lambda c: [reply_for(c.fresh_xid()) for _ in range(3 * c.bc_credits)], DECODES)
    add("burst_over_recv_buffers",
        lambda c: [reply_for(c.fresh_xid()) for _ in range(min(c.credits + c.bc_credits + 12, H.SEND_SLOTS - 2))],
        DECODES)
    return L


# --- the client ----------------------------------------------------------------

class BcClient(H.Client):
    """hostile.Client that also takes backward Calls and answers to its
    backward Replies among its receives."""

    def __init__(self, args, stats, suite):
        super().__init__(args, stats)
        self.suite = suite

    def expire(self):
        pass  # the suite bounds every wait itself

    def on_reply(self, b):
        self.suite.on_message(b) or super().on_reply(b)

    def send_raw(self, msg):
        """Posts msg as one Send, outside the forward credit accounting (a
        backward Reply is no Call)."""
        while self.up and not self.sfree:
            self.progress(0.05)
        if not self.up:
            return False
        i = self.sfree.pop()
        self.send_mr.write(msg, len(msg), i * H.SEND_SIZE)
        sge = H.SGE(self.send_mr.buf + i * H.SEND_SIZE, len(msg), self.send_mr.lkey)
        self.qp.post_send(H.SendWR(wr_id=i, opcode=H.e.IBV_WR_SEND, num_sge=1, sg=[sge]))
        return True


class Suite:
    def __init__(self, args):
        self.a = args
        self.s = H.Stats(args.verbose)
        self.c = BcClient(args, self.s, self)
        self.rng = random.Random()
        self.xid = 0x4B000000 + self.rng.randrange(1 << 20) * 16
        self.n = {k: 0 for k in ("sent", "survived", "closes", "hangs", "mismatches")}
        self.bc = {k: 0 for k in ("calls", "answered", "bad_calls")}
        self.calls = []  # backward Calls received, oldest first
        self.hx = {}  # XID -> BcCase, for answers to cases
        self.cur = None
        self.auto = False  # answer every backward Call as it comes
        self.to_send = []
        self.replies = {}  # forward XID -> RPC reply body
        self.session = None
        self.delegs = []  # (fh, delegation stateid)
        self.opens = []  # (fh, open stateid)
        self.credits = 0  # the server's forward grant
        self.last_renew = 0.0
        self.grace = 0.3  # how long answers to a case may trail the NULL's reply

    def next_xid(self):
        self.xid = (self.xid + 1) & 0xFFFFFFFF
        return self.xid

    def log(self, msg):
        if self.a.verbose:
            print(msg, flush=True)

    def bad(self, what):
        self.n["mismatches"] += 1
        print(f"MISMATCH {what}", flush=True)

    # --- receiving ----------------------------------------------------------

    def on_message(self, b):
        """Takes b if it is a backward Call or an answer to a case; False
        leaves it to hostile's reply path (forward replies)."""
        call, problem = parse_bc_call(b, self.a.cb_program)
        if problem:
            self.bc["bad_calls"] += 1
            self.bad(f"malformed backward Call: {problem}; got {b[:64].hex()}")
            return True
        if call:
            self.bc["calls"] += 1
            self.calls.append(call)
            self.log(f"backward Call xid {call.xid:#x} proc {call.proc} ops {[o for o, _ in call.ops]} "
                     f"credits {call.credits}")
            if self.auto:
                call.used = True
                self.to_send.append(bc_reply(call))
                self.bc["answered"] += 1
            return True
        if len(b) >= 4:
            x = struct.unpack_from(">I", b)[0]
            # An answer to a message too short for a whole XID carries
            # whatever XID the server made of it.
            if self.cur is not None and self.cur.any_xid and x not in self.c.out:
                case = self.cur
            else:
                case = self.hx.get(x)
            if case is not None:
                outcome, problem = classify_answer(b)
                self.judge_answer(case, outcome, problem, b)
                return True
        return False

    def judge_answer(self, case, outcome, problem, b):
        case.answers.append(outcome)
        self.s.add(outcome)
        if outcome not in case.allowed:
            why = f" ({problem})" if problem else ""
            self.bad(f"{case.name}: got {outcome}{why}, want {'/'.join(sorted(case.allowed))}"
                     f"{' (late)' if case.outcome else ''}; got {b[:48].hex()}")

    def pump(self, wait):
        self.c.progress(wait)
        while self.to_send and self.c.up:
            self.c.send_raw(self.to_send.pop(0))
        if not self.c.up:
            self.to_send.clear()

    def wait_for(self, pred, secs):
        t = time.monotonic() + secs
        while self.c.up and not pred() and time.monotonic() < t:
            self.pump(0.02)
        return pred()

    # --- forward Calls ------------------------------------------------------

    def call(self, name, msg, xid, wait=None):
        """Sends a forward Call; its reply body, or None (closed, or none
        within the wait)."""
        c = self.c
        case = Case(name, msg, {H.REPLY, CLOSE}, [xid], check=self.keep)
        if not c.up or not c.send(case):
            return None
        self.wait_for(lambda: case.outcome is not None, self.a.timeout if wait is None else wait)
        self.credits = c.credits
        if case.outcome is None:
            return None
        return self.replies.pop(xid, None)

    def keep(self, client, case, proc, chunks, body):
        """hostile's reply check for this client's forward Calls: an inline
        RPC reply; kept for the caller."""
        if proc != RDMA_MSG:
            return f"reply as rdma_proc {proc}"
        problem, off = H.rpc_reply(body, case.xids[0])
        if not problem and case.name == "nfs3_write" and len(body) >= off + 4:
            self.log(f"NFSv3 WRITE: status {struct.unpack_from('>I', body, off)[0]} (10008: JUKEBOX, a recall)")
        elif not problem:
            self.replies[case.xids[0]] = body
        return problem

    def compound(self, name, ops):
        x = self.next_xid()
        body = self.call(name, hdr(x) + compound41(x, ops), x)
        if body is None:
            raise RuntimeError(f"{name}: no reply")
        status, res = parse_compound(body, x)
        self.log(f"{name}: status {status}, {[(op, st) for op, st, _ in res]}")
        for op, st, r in res:
            if op == OP_SEQUENCE and st == NFS4_OK:
                self.seq += 1
                self.last_renew = time.monotonic()
        return status, res

    def seq_compound(self, name, ops):
        """A COMPOUND behind SEQUENCE on slot 0; once more after a
        misordered sequence (a reply lost to a close)."""
        for _ in range(2):
            status, res = self.compound(name, [op_sequence(self.session, self.seq)] + ops)
            if res and res[0][1] in (NFS4ERR_SEQ_MISORDERED, NFS4ERR_RETRY_UNCACHED_REP):
                self.seq += 1
                continue
            return status, res
        return status, res

    def setup_session(self):
        owner = f"hostile_bc.{os.uname().nodename}.{os.getpid()}.{time.time_ns()}".encode()
        self.owner = owner
        st, res = self.compound("exchange_id", [op_exchange_id(owner, os.urandom(8))])
        if st != NFS4_OK:
            raise RuntimeError(f"EXCHANGE_ID: status {st}")
        eid = res[0][2]
        self.clientid = eid["clientid"]
        st, res = self.compound("create_session", [op_create_session(self.clientid, eid["seqid"],
                                                                     cb_program=self.a.cb_program)])
        if st != NFS4_OK:
            raise RuntimeError(f"CREATE_SESSION: status {st}")
        cs = res[0][2]
        if not cs["flags"] & CREATE_SESSION4_FLAG_CONN_BACK_CHAN:
            raise RuntimeError(f"CREATE_SESSION: the server did not take the connection as backchannel "
                               f"(flags {cs['flags']:#x})")
        self.session, self.seq = cs["sessionid"], 1
        self.log(f"session {self.session.hex()}, fore {cs['fore']}, back {cs['back']}")
        st, _ = self.seq_compound("reclaim_complete", [op_reclaim_complete()])
        if st != NFS4_OK:
            raise RuntimeError(f"RECLAIM_COMPLETE: status {st}")

    def renew(self):
        """SEQUENCE now and then: the lease is short in the test VM."""
        if self.session and time.monotonic() - self.last_renew > 3:
            self.seq_compound("renew", [])

    def trigger_recall(self, patience=None):
        """A read delegation on a new file, then an NFSv3 WRITE of it:
        nfsd recalls the delegation over the backchannel. True if a
        delegation was granted. nfsd grants none while any grace period
        lasts (lockd's: 50 s after nfsd starts), so the OPEN is repeated
        for up to `patience` seconds (3 timeouts, at least 60)."""
        name = f"hostile_bc.{os.getpid()}.{len(self.delegs)}"
        t = time.monotonic() + (patience if patience is not None else max(60, 3 * self.a.timeout))
        while True:
            # DELAY: another client's directory delegation on the root is
            # being recalled (the create breaks it); GRACE: nfsd's grace.
            st, res = self.seq_compound("open", [op_putrootfh(), op_open_create_read(self.clientid, self.owner, name),
                                                 op_getfh()])
            if st == NFS4_OK:
                o, fh = res[2][2], res[3][2]["fh"]
                # Each OPEN of the file moves its stateid's seqid on.
                self.opens = [(f, sid) for f, sid in self.opens if f != fh] + [(fh, o["stateid"])]
                kind = OPEN_DELEGATE_NAMES.get(o["deleg_type"], o["deleg_type"])
                self.log(f"OPEN {name}: delegation {kind} {o.get('why_no_deleg', '')}")
                if "deleg_stateid" in o:
                    break
            elif st not in (NFS4ERR_DELAY, NFS4ERR_GRACE):
                raise RuntimeError(f"OPEN {name}: status {st} {[(op, s) for op, s, _ in res]}")
            if time.monotonic() > t:
                print(f"hostile_bc: OPEN {name}: no delegation (status {st})", flush=True)
                return False
            self.wait_for(lambda: False, 2)
        self.delegs.append((fh, o["deleg_stateid"]))
        x = self.next_xid()
        # Not waited for: nfsd may hold it until the recall is over.
        self.c.send(Case("nfs3_write", hdr(x) + nfs3_write(x, fh, b"conflict"), {H.REPLY, CLOSE}, [x],
                         check=self.keep))
        return True

    def rebind(self):
        """Binds a new connection to the session, both directions: nfsd
        moves its callbacks onto it."""
        if self.session is None:
            return
        st, res = self.compound("bind_conn_to_session", [op_bind_conn(self.session)])
        if st != NFS4_OK:
            self.bad(f"BIND_CONN_TO_SESSION after a reconnect: status {st}")

    def reconnect(self, recall=True):
        """A new connection, bound to the session. nfsd drops a callback
        whose backchannel went (nfsd4_run_cb_work: no client, give up), so
        a new recall keeps backward Calls coming."""
        if self.c.up:
            self.c.close("ours")
        self.c.reconnect()
        self.cur = None
        self.rebind()
        if recall and self.session and self.c.up:
            try:
                self.trigger_recall(patience=10)
            except RuntimeError as ex:
                print(f"hostile_bc: no new recall after the reconnect: {ex}", flush=True)

    # --- backward Calls -----------------------------------------------------

    def real(self):
        """The newest backward Call, if not yet answered or consumed (an
        older one has timed out at the server or been called again)."""
        if self.calls and not self.calls[-1].used:
            return self.calls[-1]
        return None

    def wait_call(self, secs, after=0.0):
        """A backward Call received after `after` and not yet used (waiting
        up to secs for one), or None."""
        def fresh():
            return [c for c in self.calls if not c.used and c.t > after]

        self.wait_for(lambda: fresh(), secs)
        got = fresh()
        return got[-1] if got else None

    # --- the cases ----------------------------------------------------------

    def ctx(self, case):
        def real_xid():
            call = self.real()
            if call is None:
                return self.next_xid()
            if case.consumes:
                call.used = True
            self.real_used = True
            return call.xid

        def put(b):
            self.c.data.write(b, len(b), 0)

        return Ctx(real_xid, self.next_xid, self.c.data.rkey, self.c.slot_addr(0), put, self.credits or 64,
                   self.bc_credits)

    def run_case(self, case, renew=True):
        c = self.c
        if not c.up:
            self.reconnect()
        if renew:
            try:
                self.renew()
            except RuntimeError as ex:  # a close: the next case reconnects
                self.log(f"renew: {ex}")
                if c.up:
                    raise
        self.real_used = False
        msgs = case.build(self.ctx(case))
        for m in msgs:
            if len(m) >= 4:
                self.hx[struct.unpack_from(">I", m)[0]] = case
        self.cur = case
        t0 = time.monotonic()
        for m in msgs:
            if not c.send_raw(m):
                break
            self.n["sent"] += 1
        self.probe(case)
        case.outcome = CLOSE if case.closed else (case.answers[0] if case.answers else DROP)
        if not case.closed and not case.answers and DROP not in case.allowed:
            self.bad(f"{case.name}: no answer, want {'/'.join(sorted(case.allowed))}")
        self.s.add(f"case_{case.outcome}")
        self.log(f"{case.name}: {case.outcome} ({len(msgs)} sent{', real XID' if self.real_used else ''}, "
                 f"{time.monotonic() - t0:.2f} s)")
        self.cur = None
        if not c.up:
            self.reconnect()

    def probe(self, case):
        """The forward NULL after a case: survived, closed, or a hang."""
        c = self.c
        x = self.next_xid()
        p = Case("null_after_" + case.name, hdr(x) + rpc_call(x), {H.REPLY, CLOSE}, [x])
        if c.up and c.send(p):
            t = time.monotonic() + self.a.timeout
            while c.up and p.outcome is None and time.monotonic() < t:
                self.pump(0.02)
        if c.up and p.outcome == H.REPLY:
            # Answers to the case are sent before the NULL's reply, or by
            # another thread at about the same time.
            self.wait_for(lambda: False, self.grace)
            self.n["survived"] += 1
            return
        if not c.up:
            case.closed = True
            self.n["closes"] += 1
            return
        self.n["hangs"] += 1
        print(f"HANG {case.name}: no reply to the forward NULL within {self.a.timeout:g} s and no close",
              flush=True)
        c.pending.pop(id(p), None)
        c.out.pop(x, None)
        case.closed = True  # closed by us
        c.close("hang")

    def hold(self):
        if not self.a.hold_file:
            return
        with open(self.a.hold_file, "w") as f:
            f.write("ready\n")
        t = time.monotonic() + 300
        while os.path.exists(self.a.hold_file) and time.monotonic() < t:
            if time.monotonic() - self.last_renew > 3:
                self.renew()
            self.pump(0.1)
            if not self.c.up:
                raise RuntimeError("connection lost while holding")

    def final_answer(self):
        """The real outstanding backward Call answered correctly, then again
        (a duplicate); later Calls answered once each as they come."""
        case = BcCase("reply_twice", None, DECODES)
        if not self.c.up:
            self.reconnect()
        self.renew()
        call = self.real()
        if call is None or time.monotonic() - call.t > 0.5:
            call = self.wait_call(self.a.timeout, after=time.monotonic())
        if call is None and self.trigger_recall():
            call = self.wait_call(self.a.timeout, after=time.monotonic() - 1)
        if call is None:
            print("hostile_bc: no outstanding backward Call left to answer", flush=True)
            self.auto = True
            return
        call.used = True
        self.auto = True
        case.build = lambda c: [bc_reply(call), bc_reply(call)]
        self.bc["answered"] += 1
        self.run_case(case, renew=False)
        # nfsd calls again until a Reply it takes arrives: quiet means the
        # answer was taken.
        n = self.bc["calls"]
        self.wait_for(lambda: False, 3)
        self.log(f"backward Calls after the answer: {self.bc['calls'] - n}")
        self.s.add("bc_calls_after_answer", self.bc["calls"] - n)

    def cleanup(self):
        """Returns the delegations, destroys the session and the client ID."""
        self.auto = True
        if not self.c.up:
            self.reconnect(recall=False)
        for fh, sid in self.delegs:
            st, _ = self.seq_compound("delegreturn", [op_putfh(fh), op_delegreturn(sid)])
            self.s.add(f"delegreturn_status_{st}")
            if st == NFS4ERR_DELEG_REVOKED:  # nfsd revoked it (recall unanswered for a lease): forget it
                st, _ = self.seq_compound("free_stateid", [op_free_stateid(sid)])
                self.s.add(f"free_stateid_status_{st}")
        for fh, sid in self.opens:
            st, _ = self.seq_compound("close", [op_putfh(fh), op_close(sid)])
            self.s.add(f"close_status_{st}")
        if self.session:
            st, _ = self.compound("destroy_session", [op_destroy_session(self.session)])
            self.s.add(f"destroy_session_status_{st}")
            st, _ = self.compound("destroy_clientid", [op_destroy_clientid(self.clientid)])
            self.s.add(f"destroy_clientid_status_{st}")

    def run(self):
        self.t0 = time.monotonic()
        self.bc_credits = 2
        try:
            self.c.connect()
            self.run_case(BcCase("reply_before_backchannel", lambda c: [reply_for(c.fresh_xid())], DECODES))
            self.setup_session()
            if not self.trigger_recall():
                self.bad("no delegation granted: nfsd has nothing to call back")
            call = self.wait_call(self.a.timeout)
            if call is None:
                self.bad(f"no backward Call within {self.a.timeout:g} s of the delegation's recall")
            else:
                self.bc_credits = call.credits
            self.hold()
            for case in cases():
                self.run_case(case)
            self.final_answer()
            self.cleanup()
            self.wait_for(lambda: not self.c.pending, 5)
            self.c.close("done")
        except BaseException:
            self.s.add("aborted")
            traceback.print_exc()
        return self.summary()

    def summary(self):
        n, c = self.n, self.s.c
        n["mismatches"] += c.get("mismatches", 0)  # hostile's own checks (replies, sizes)
        print("hostile_bc: " + ", ".join(f"{k} {n[k]}" for k in ("sent", "survived", "closes", "hangs", "mismatches")))
        outs = ", ".join(f"{k[5:]} {v}" for k, v in sorted(c.items()) if k.startswith("case_"))
        print(f"hostile_bc: cases: {outs}; backward Calls {self.bc['calls']}, answered {self.bc['answered']}, "
              f"malformed {self.bc['bad_calls']}; {time.monotonic() - self.t0:.0f} s")
        if self.a.verbose:
            for k in sorted(c):
                print(f"  {k} {c[k]}")
        for m in self.s.mismatches:
            print("MISMATCH " + m)
        return 1 if n["mismatches"] or n["hangs"] or c.get("aborted", 0) else 0


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("server")
    p.add_argument("port", type=int)
    p.add_argument("--timeout", type=float, default=20, help="seconds the forward NULL after a case may take")
    p.add_argument("--hold-file", help="write 'ready' here once the backchannel works; wait until it is removed")
    p.add_argument("--cb-program", type=lambda s: int(s, 0), default=CB_PROGRAM)
    p.add_argument("-v", "--verbose", action="store_true")
    # hostile.py's Client, whose reply path this client reuses, checks each
    # grant against --grant when set; backward sessions are not checked so.
    p.set_defaults(grant=0)
    return p


def main():
    a = parser().parse_args()
    rc = Suite(a).run()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: pyverbs' objects, freed at interpreter exit in no
    # particular order, print errors about a device already closed. The
    # kernel frees what is left.
    os._exit(rc)


if __name__ == "__main__":
    main()
