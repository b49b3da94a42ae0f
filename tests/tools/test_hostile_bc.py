#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Host tests of hostile_bc.py (run by scripts/host-test).

The XDR it builds and parses (EXCHANGE_ID, CREATE_SESSION, the replies
nfsd encodes, backward Calls as nfsd sends them, the Reply nfsd decodes),
its case list, and its judgement: a wrong server's answers (an RPC reply
to a Reply, ERR_CHUNK where ERR_VERS is owed, a malformed backward Call,
silence after a case) must each count as a mismatch or a hang, which
makes the run exit 1; the right answers must not. No RDMA is needed:
pyverbs is replaced by empty modules (test_hostile.load_hostile()).
"""
import importlib.util
import os
import struct
import sys
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_hostile  # noqa: E402

H = test_hostile.H
sys.modules["hostile"] = H  # hostile_bc's import finds the stubbed one
spec = importlib.util.spec_from_file_location("hostile_bc", os.path.join(HERE, "hostile_bc.py"))
B = importlib.util.module_from_spec(spec)
spec.loader.exec_module(B)
u32 = H.u32

SID = bytes(range(16))
XID = 0x6D2A1F00


def words(b):
    return list(struct.unpack(f">{len(b) // 4}I", b))


def rpc_accepted(xid):
    return u32(xid) + u32(1) + u32(0) + u32(0) + u32(0) + u32(0)


def compound_reply(xid, status, results):
    """A COMPOUND reply as nfsd encodes it: status, empty tag, results."""
    return rpc_accepted(xid) + u32(status) + u32(0) + u32(len(results)) + b"".join(results)


def attrs(a, ird=()):
    return b"".join(u32(v) for v in a) + u32(len(ird)) + b"".join(u32(v) for v in ird)


def cb_call(xid, prog=B.CB_PROGRAM, ops=None, vers=1, credits=2, proc=H.RDMA_MSG, rpc_xid=None, cbproc=1,
            chunks=None):
    """A backward Call as nfsd sends one: RDMA_MSG, no chunks, AUTH_NONE,
    CB_COMPOUND (CB_SEQUENCE on slot 0, CB_RECALL) unless ops is given."""
    if ops is None:
        seq = u32(B.OP_CB_SEQUENCE) + SID + u32(7) + u32(0) + u32(1) + u32(0) + u32(0)
        recall = u32(B.OP_CB_RECALL) + bytes(range(100, 116)) + u32(0) + B.opaque(b"\x01" * 28)
        ops = [seq, recall]
    args = u32(0) + u32(1) + u32(1) + u32(len(ops)) + b"".join(ops)  # tag, minor 1, ident, ops
    rpc = (u32(xid if rpc_xid is None else rpc_xid) + u32(0) + u32(2) + u32(prog) + u32(1) + u32(cbproc)
           + u32(0) + u32(0) + u32(0) + u32(0))
    h = H.hdr(xid, proc, credits, vers=vers, **(chunks or {}))
    return h + rpc + (args if cbproc == 1 else b"")


class Builders(unittest.TestCase):
    """The forward Calls, field by field (RFC 8881 section 18)."""

    def test_exchange_id(self):
        b = B.op_exchange_id(b"owner-1", b"V" * 8)
        d = H.Dec(b)
        self.assertEqual(d.u(), 42)
        self.assertEqual(B.fixed(d, 8), b"V" * 8)
        self.assertEqual(d.opaque(), b"owner-1")
        self.assertEqual(d.u(), B.EXCHGID4_FLAG_USE_NON_PNFS)
        self.assertEqual(d.u(), 0)  # SP4_NONE
        self.assertEqual(d.u(), 0)  # no implementation id
        self.assertEqual(d.off, len(b))

    def test_create_session_asks_for_the_backchannel(self):
        b = B.op_create_session(0x1122334455667788, 9)
        w = words(b)
        self.assertEqual(w[:5], [43, 0x11223344, 0x55667788, 9, B.CREATE_SESSION4_FLAG_CONN_BACK_CHAN])
        fore, back = w[5:12], w[12:19]
        self.assertEqual(fore, list(B.FORE_ATTRS) + [0])
        self.assertEqual(back, list(B.BACK_ATTRS) + [0])
        # The back channel's sizes fit the 1024-byte inline receive size
        # this client announces; nfsd wants 2 operations at least.
        self.assertLessEqual(max(back[1], back[2]), H.INLINE)
        self.assertGreaterEqual(back[4], 2)
        self.assertEqual(w[19:], [B.CB_PROGRAM, 1, 0])  # one callback_sec_parms4, AUTH_NONE
        self.assertEqual(len(b), 4 * 22)

    def test_compound41_is_minorversion_1_with_auth_sys(self):
        b = B.compound41(XID, [B.op_reclaim_complete()])
        d = H.Dec(b)
        self.assertEqual([d.u() for _ in range(6)], [XID, 0, 2, H.NFS_PROG, 4, 1])
        self.assertEqual(d.u(), 1)  # AUTH_SYS
        d.opaque()
        d.u(), d.opaque()
        self.assertEqual(d.opaque(), b"")  # tag
        self.assertEqual([d.u(), d.u(), d.u(), d.u()], [1, 1, 58, 0])

    def test_open_creates_for_reading_and_wants_a_read_delegation(self):
        b = B.op_open_create_read(5, b"oo", "f")
        d = H.Dec(b)
        self.assertEqual([d.u(), d.u(), d.u(), d.u()], [18, 0, 0x101, 0])
        self.assertEqual(d.q(), 5)
        self.assertEqual(d.opaque(), b"oo")
        self.assertEqual([d.u(), d.u()], [1, 0])  # OPEN4_CREATE, UNCHECKED4
        self.assertEqual([d.u(), d.u(), d.u()], [2, 0, 2])  # bitmap: mode
        self.assertEqual(d.opaque(), u32(0o644))
        self.assertEqual(d.u(), 0)  # CLAIM_NULL
        self.assertEqual(d.opaque(), b"f")
        self.assertEqual(d.off, len(b))

    def test_free_stateid(self):
        self.assertEqual(B.op_free_stateid(b"S" * 16), u32(45) + b"S" * 16)
        st, res = B.parse_compound(compound_reply(XID, 0, [u32(45) + u32(0)]), XID)
        self.assertEqual(res, [(45, 0, {})])

    def test_nfs3_write(self):
        b = B.nfs3_write(XID, b"F" * 20, b"data")
        d = H.Dec(b)
        self.assertEqual([d.u() for _ in range(6)], [XID, 0, 2, H.NFS_PROG, 3, 7])


class Parsers(unittest.TestCase):
    """Replies as nfsd encodes them."""

    def test_exchange_id_and_create_session_replies(self):
        eid = (u32(42) + u32(0) + struct.pack(">Q", 0xABCDEF0012345678) + u32(3) + u32(0x10001) + u32(0)
               + struct.pack(">Q", 0) + B.opaque(b"major") + B.opaque(b"scope")
               + u32(1) + B.opaque(b"kernel.org") + B.opaque(b"Linux") + struct.pack(">Q", 0) + u32(0))
        st, res = B.parse_compound(compound_reply(XID, 0, [eid]), XID)
        self.assertEqual(st, 0)
        self.assertEqual(res[0][2], {"clientid": 0xABCDEF0012345678, "seqid": 3, "flags": 0x10001})
        cs = (u32(43) + u32(0) + SID + u32(3) + u32(2) + attrs((0, 1024, 1024, 80, 8, 4))
              + attrs((0, 1024, 1024, 0, 2, 2), ird=(7,)))
        st, res = B.parse_compound(compound_reply(XID, 0, [cs]), XID)
        r = res[0][2]
        self.assertEqual((r["sessionid"], r["flags"]), (SID, 2))
        self.assertEqual(r["back"], (0, 1024, 1024, 0, 2, 2, [7]))

    def test_an_error_ends_the_results(self):
        st, res = B.parse_compound(compound_reply(XID, 10022, [u32(43) + u32(10022)]), XID)
        self.assertEqual((st, res), (10022, [(43, 10022, {})]))

    def test_open_with_a_read_delegation(self):
        seq = u32(53) + u32(0) + SID + u32(1) + u32(0) + u32(3) + u32(3) + u32(0)
        ace = u32(0) + u32(0) + u32(0) + B.opaque(b"")
        op = (u32(18) + u32(0) + b"S" * 16 + u32(1) + bytes(16) + u32(4) + u32(0)
              + u32(1) + b"D" * 16 + u32(0) + ace)
        st, res = B.parse_compound(compound_reply(XID, 0, [seq, u32(24) + u32(0), op, u32(10) + u32(0)
                                                           + B.opaque(b"h" * 28)]), XID)
        self.assertEqual(res[2][2]["deleg_type"], 1)
        self.assertEqual(res[2][2]["deleg_stateid"], b"D" * 16)
        self.assertEqual(res[3][2]["fh"], b"h" * 28)
        none_ext = u32(18) + u32(0) + b"S" * 16 + u32(1) + bytes(16) + u32(4) + u32(0) + u32(3) + u32(1) + u32(0)
        st, res = B.parse_compound(compound_reply(XID, 0, [none_ext]), XID)
        self.assertEqual((res[0][2]["deleg_type"], res[0][2]["why_no_deleg"]), (3, 1))

    def test_malformed_replies_are_refused(self):
        with self.assertRaises(ValueError):
            B.parse_compound(compound_reply(XID, 0, [u32(43) + u32(0) + SID]), XID)  # cut short
        with self.assertRaises(ValueError):
            B.parse_compound(compound_reply(XID + 1, 0, []), XID)  # another XID
        with self.assertRaises(ValueError):
            B.parse_compound(compound_reply(XID, 0, [u32(99) + u32(0)]), XID)  # an operation not sent


class BackwardCalls(unittest.TestCase):
    """Telling a backward Call among the receives, and answering it."""

    def test_a_recall_is_recognised(self):
        call, problem = B.parse_bc_call(cb_call(XID))
        self.assertIsNone(problem)
        self.assertEqual((call.xid, call.credits, call.proc), (XID, 2, 1))
        self.assertEqual([op for op, _ in call.ops], [B.OP_CB_SEQUENCE, B.OP_CB_RECALL])
        self.assertEqual(call.ops[0][1]["seq"], 7)

    def test_cb_null(self):
        call, problem = B.parse_bc_call(cb_call(XID, cbproc=0))
        self.assertEqual((call.proc, problem), (0, None))

    def test_answers_and_forward_replies_are_no_calls(self):
        for b in (test_hostile.null_reply(XID), test_hostile.err_vers(XID), test_hostile.err_chunk(XID),
                  u32(XID) + u32(1)):
            self.assertEqual(B.parse_bc_call(b), (None, None), b.hex())

    def test_malformed_calls_are_problems(self):
        bad = {
            "program": cb_call(XID, prog=0x40000001),
            "rdma_vers": cb_call(XID, vers=2),
            "chunks": cb_call(XID, chunks={"writes": [[(1, 64, 0)]]}),
            "rpc xid": cb_call(XID, rpc_xid=XID + 1),
            "credits 0": cb_call(XID, credits=0),
            "no CB_SEQUENCE": cb_call(XID, ops=[u32(B.OP_CB_RECALL) + bytes(16) + u32(0) + B.opaque(b"h")]),
            "cut": cb_call(XID)[:60],
        }
        for what, b in bad.items():
            call, problem = B.parse_bc_call(b)
            self.assertIsNone(call, what)
            self.assertTrue(problem, what)

    def test_the_reply_is_what_nfsd_decodes(self):
        """Decoded the way nfsd's nfs4callback.c does: CB_COMPOUND4res,
        then CB_SEQUENCE's session, sequence and slot must echo the Call's,
        then CB_RECALL's status."""
        call, _ = B.parse_bc_call(cb_call(XID))
        m = B.bc_reply(call)
        d = H.Dec(m)
        self.assertEqual([d.u(), d.u(), d.u(), d.u()], [XID, 1, B.BC_REPLY_CREDITS, H.RDMA_MSG])
        self.assertEqual(H.parse_chunks(d), ([], [], None))
        problem, off = H.rpc_reply(m[d.off:], XID)
        self.assertIsNone(problem)
        r = H.Dec(m[d.off:], off)
        self.assertEqual(r.u(), 0)
        r.opaque()
        self.assertEqual(r.u(), 2)
        self.assertEqual([r.u(), r.u()], [B.OP_CB_SEQUENCE, 0])
        self.assertEqual(B.fixed(r, 16), SID)
        self.assertEqual([r.u(), r.u(), r.u(), r.u()], [7, 0, 1, 1])
        self.assertEqual([r.u(), r.u()], [B.OP_CB_RECALL, 0])
        self.assertEqual(r.off, len(m) - d.off)

    def test_an_unknown_operation_is_answered_notsupp(self):
        seq = u32(B.OP_CB_SEQUENCE) + SID + u32(1) + u32(0) + u32(0) + u32(0) + u32(0)
        call, problem = B.parse_bc_call(cb_call(XID, ops=[seq, u32(14) + u32(0)]))
        self.assertIsNone(problem)
        body = B.bc_reply_body(call)
        self.assertEqual(words(body)[6], B.NFS4ERR_NOTSUPP)
        self.assertEqual(words(body)[-2:], [14, B.NFS4ERR_NOTSUPP])


class Answers(unittest.TestCase):
    def test_classification(self):
        self.assertEqual(B.classify_answer(test_hostile.err_vers(XID)), (H.ERRV, None))
        self.assertEqual(B.classify_answer(test_hostile.err_chunk(XID)), (H.ERRC, None))
        for b in (test_hostile.err_vers(XID, lo=1, hi=2), test_hostile.err_vers(XID, vers=2),
                  test_hostile.null_reply(XID, credits=0), u32(XID) + u32(1) + u32(1) + u32(4) + u32(3),
                  u32(XID) + u32(1)):
            self.assertEqual(B.classify_answer(b)[0], B.BAD, b.hex())
        self.assertEqual(B.classify_answer(test_hostile.null_reply(XID))[0], B.RPC_REPLY_MSG)


class FakeData:
    rkey = 0x1234
    buf = 0x10000

    def __init__(self):
        self.mem = bytearray(64)

    def write(self, b, n, off):
        self.mem[off:off + n] = b


def ctx(real=XID):
    fresh = iter(range(0x100, 0x10000))
    data = FakeData()
    c = B.Ctx(lambda: real, lambda: next(fresh), data.rkey, data.buf, lambda b: data.write(b, len(b), 0), 64, 2)
    c.data = data
    return c


class Cases(unittest.TestCase):
    def setUp(self):
        self.cases = B.cases()
        self.by = {c.name: c for c in self.cases}

    def test_names_are_unique_and_cover_the_brief(self):
        self.assertEqual(len(self.by), len(self.cases))
        for n in range(1, 28):
            self.assertIn(f"truncated_header_{n}", self.by)
        for name in ("unknown_xid", "version_0x0", "version_0x2", "version_0xffffffff", "reply_with_read_list",
                     "reply_with_write_list", "reply_with_reply_chunk", "proc_nomsg_without_chunks",
                     "proc_rdma_done", "proc_rdma_error_vers", "burst_3x_bc_credits", "burst_over_recv_buffers"):
            self.assertIn(name, self.by)
        self.assertTrue(any(n.startswith("truncated_body_") for n in self.by))

    def test_no_case_accepts_a_reply_or_a_bad_answer_and_every_case_a_close(self):
        for c in self.cases:
            self.assertNotIn(B.RPC_REPLY_MSG, c.allowed, c.name)
            self.assertNotIn(H.REPLY, c.allowed, c.name)
            self.assertNotIn(B.BAD, c.allowed, c.name)
            self.assertIn(H.CLOSE, c.allowed, c.name)

    def test_the_rfc_8166_answers(self):
        for v in ("0x0", "0x2", "0xffffffff"):
            self.assertEqual(self.by[f"version_{v}"].allowed, {H.ERRV, H.CLOSE})
        for n in range(8, 28):
            self.assertEqual(self.by[f"truncated_header_{n}"].allowed, {H.ERRC, H.CLOSE}, n)
        self.assertEqual(self.by["unknown_xid"].allowed, {H.DROP, H.CLOSE})
        self.assertNotIn(H.ERRC, self.by["proc_rdma_error_chunk"].allowed)

    def test_messages(self):
        c = ctx()
        m = {k: v.build(c) for k, v in self.by.items()}
        valid = B.reply_for(XID)
        for n in range(1, 28):
            self.assertEqual(m[f"truncated_header_{n}"], [valid[:n]])
        self.assertEqual(len(valid), 28 + 24)
        self.assertNotEqual(struct.unpack(">I", m["unknown_xid"][0][:4])[0], XID)
        self.assertEqual(words(m["version_0x2"][0][:8]), [XID, 2])
        for name, lists in (("reply_with_read_list", 0), ("reply_with_write_list", 1),
                            ("reply_with_reply_chunk", 2)):
            d = H.Dec(m[name][0])
            d.off = 16
            self.assertTrue(H.parse_chunks(d)[lists], name)
        nm = m["reply_nomsg_in_read_chunk"][0]
        self.assertEqual(words(nm[:4 * 4]), [XID, 1, 2, H.RDMA_NOMSG])
        self.assertEqual(bytes(c.data.mem[:24]), B.bc_reply_body(B.BcCall(XID, 2, B.CB_NULL)))
        self.assertEqual(len(m["burst_3x_bc_credits"]), 6)
        self.assertGreater(len(m["burst_over_recv_buffers"]), 64 + 2)
        self.assertLessEqual(len(m["burst_over_recv_buffers"]), H.SEND_SLOTS)
        for name in ("burst_3x_bc_credits", "burst_over_recv_buffers"):
            xids = {struct.unpack(">I", x[:4])[0] for x in m[name]}
            self.assertEqual(len(xids), len(m[name]))
            self.assertNotIn(XID, xids)


class FakeClient:
    """The transport a Suite drives, without RDMA: answers (or not) the
    forward NULL after a case."""

    def __init__(self, answer=True, close=False):
        self.up, self.out, self.pending, self.credits = True, {}, {}, 64
        self.answer, self.closing = answer, close
        self.sent = []
        self.data = FakeData()
        self.sfree = [0]

    def slot_addr(self, s):
        return self.data.buf

    def send_raw(self, m):
        self.sent.append(m)
        return self.up

    def send(self, case):
        self.sent.append(case.msg)
        self.out[case.xids[0]] = case
        self.pending[id(case)] = case
        self.probe = case
        return True

    def progress(self, wait):
        if self.closing:
            self.close("server")
        elif self.answer and self.probe.outcome is None:
            self.probe.outcome = H.REPLY
            self.pending.pop(id(self.probe))
        time.sleep(0.001)

    def close(self, why):
        self.up = False

    def reconnect(self):
        self.up = True
        self.closing = False


class RfcServer(FakeClient):
    """A server that answers each message as RFC 8166 says (ERR_VERS,
    ERR_CHUNK, nothing, a close on the peer's RDMA_ERROR)."""

    def __init__(self):
        super().__init__()
        self.answers = []
        self.suite = None

    def send_raw(self, m):
        self.sent.append(m)
        if len(m) < 8:
            return True
        xid, vers = struct.unpack_from(">II", m)
        if vers != 1:
            self.answers.append(test_hostile.err_vers(xid))
        elif len(m) < 16:
            self.answers.append(test_hostile.err_chunk(xid))
        else:
            proc = struct.unpack_from(">I", m, 12)[0]
            d = H.Dec(m)
            d.off = 16
            try:
                chunks = H.parse_chunks(d)
            except (IndexError, ValueError):
                chunks = None
            if proc == H.RDMA_ERROR:
                self.closing = True
            elif proc not in (H.RDMA_MSG, H.RDMA_NOMSG, H.RDMA_DONE) or chunks is None or (
                    proc == H.RDMA_NOMSG and chunks == ([], [], None)):
                self.answers.append(test_hostile.err_chunk(xid))
        return True

    def progress(self, wait):
        while self.answers:
            self.suite.on_message(self.answers.pop(0))
        super().progress(wait)


def suite(client, timeout=0.3):
    a = types.SimpleNamespace(timeout=timeout, verbose=False, hold_file=None, cb_program=B.CB_PROGRAM)
    s = B.Suite(a)
    s.c = client
    s.bc_credits = 2
    s.t0 = time.monotonic()
    s.rebind = lambda: None
    s.grace = 0.0
    return s


def quiet(f, *args):
    with open(os.devnull, "w") as null:
        old, sys.stdout = sys.stdout, null
        try:
            return f(*args)
        finally:
            sys.stdout = old


class Judgement(unittest.TestCase):
    def case(self, name):
        return {c.name: c for c in B.cases()}[name]

    def test_a_case_answered_by_the_null_survives(self):
        s = suite(FakeClient())
        c = self.case("unknown_xid")
        quiet(s.run_case, c, False)
        self.assertEqual((s.n["sent"], s.n["survived"], s.n["hangs"], s.n["mismatches"]), (1, 1, 0, 0))
        self.assertEqual(c.outcome, H.DROP)
        self.assertEqual(quiet(s.summary), 0)

    def test_an_unanswered_null_is_a_hang(self):
        s = suite(FakeClient(answer=False))
        c = self.case("unknown_xid")
        t = time.monotonic()
        quiet(s.run_case, c, False)
        self.assertGreaterEqual(time.monotonic() - t, 0.3)
        self.assertEqual((s.n["survived"], s.n["hangs"]), (0, 1))
        self.assertEqual(quiet(s.summary), 1)

    def test_a_close_is_counted_and_the_client_reconnects(self):
        fc = FakeClient(close=True)
        s = suite(fc)
        c = self.case("proc_rdma_error_vers")
        quiet(s.run_case, c, False)
        self.assertEqual((s.n["closes"], s.n["hangs"], s.n["mismatches"]), (1, 0, 0))
        self.assertEqual(c.outcome, H.CLOSE)
        self.assertTrue(fc.up)
        self.assertEqual(quiet(s.summary), 0)

    def test_right_answers_pass(self):
        s = suite(FakeClient())
        v, t = self.case("version_0x2"), self.case("truncated_header_12")
        s.hx[XID], s.hx[XID + 1] = v, t
        self.assertTrue(s.on_message(test_hostile.err_vers(XID)))
        self.assertTrue(s.on_message(test_hostile.err_chunk(XID + 1)))
        self.assertEqual(s.n["mismatches"], 0)

    def test_wrong_answers_are_mismatches(self):
        for name, answer in (("version_0x2", test_hostile.err_chunk(XID)),  # ERR_VERS owed
                             ("truncated_header_12", test_hostile.err_vers(XID)),  # ERR_CHUNK owed
                             ("unknown_xid", test_hostile.null_reply(XID)),  # an RPC reply to a Reply
                             ("unknown_xid", test_hostile.err_chunk(XID)),  # a Reply that decodes
                             ("version_0x0", test_hostile.err_vers(XID, lo=0, hi=1)),
                             ("proc_rdma_error_chunk", test_hostile.err_chunk(XID))):
            s = suite(FakeClient())
            s.hx[XID] = self.case(name)
            quiet(s.on_message, answer)
            self.assertEqual(s.n["mismatches"], 1, name)
            self.assertEqual(quiet(s.summary), 1)

    def test_silence_where_an_answer_is_owed(self):
        s = suite(FakeClient())
        c = self.case("version_0x2")
        quiet(s.run_case, c, False)
        self.assertEqual(s.n["mismatches"], 1)

    def test_an_answer_to_a_short_message_goes_to_the_current_case(self):
        s = suite(FakeClient())
        s.cur = self.case("truncated_header_2")
        self.assertTrue(s.on_message(test_hostile.err_chunk(0xDEAD)))
        self.assertEqual(s.n["mismatches"], 0)
        s.cur = None
        self.assertFalse(s.on_message(test_hostile.err_chunk(0xDEAD)))  # left to hostile: no call

    def test_a_short_message_s_answer_is_not_taken_for_an_earlier_case_s(self):
        # A 3-byte message's answer may carry an XID made of its bytes and
        # the padding: that of an earlier case, which must not be blamed.
        s = suite(FakeClient())
        s.hx[XID] = self.case("version_0x2")
        s.cur = self.case("truncated_header_3")
        self.assertTrue(s.on_message(test_hostile.err_chunk(XID)))
        self.assertEqual(s.n["mismatches"], 0)
        self.assertEqual(s.cur.answers, [H.ERRC])

    def test_backward_calls_are_taken_and_auto_answered(self):
        s = suite(FakeClient())
        self.assertTrue(s.on_message(cb_call(XID)))
        self.assertEqual((s.bc["calls"], len(s.calls), s.real().xid), (1, 1, XID))
        s.auto = True
        self.assertTrue(s.on_message(cb_call(XID + 1)))
        self.assertEqual(s.to_send, [B.bc_reply(s.calls[-1])])
        self.assertIsNone(s.real())
        self.assertEqual(s.n["mismatches"], 0)

    def test_a_malformed_backward_call_is_a_mismatch(self):
        s = suite(FakeClient())
        self.assertTrue(quiet(s.on_message, cb_call(XID, prog=7)))
        self.assertEqual((s.n["mismatches"], s.bc["bad_calls"]), (1, 1))

    def test_a_server_answering_as_the_rfc_says_passes_every_case(self):
        fc = RfcServer()
        s = suite(fc)
        fc.suite = s
        s.calls.append(B.BcCall(XID, 2, B.CB_COMPOUND))
        for c in B.cases():
            quiet(s.run_case, c, False)
        self.assertEqual((s.n["hangs"], s.n["mismatches"]), (0, 0))
        self.assertEqual(s.n["closes"], 2)  # the two RDMA_ERRORs
        self.assertEqual(s.n["survived"] + s.n["closes"], len(B.cases()))
        self.assertEqual(quiet(s.summary), 0)

    def test_the_summary_line(self):
        s = suite(FakeClient())
        s.n.update(sent=5, survived=3, closes=1, hangs=0, mismatches=0)
        import io
        out = io.StringIO()
        old, sys.stdout = sys.stdout, out
        try:
            rc = s.summary()
        finally:
            sys.stdout = old
        self.assertEqual(out.getvalue().splitlines()[0],
                         "hostile_bc: sent 5, survived 3, closes 1, hangs 0, mismatches 0")
        self.assertEqual(rc, 0)


class Arguments(unittest.TestCase):
    """hostile_bc.py's arguments are enough for hostile.py's Client, whose
    reply path it reuses (hostile.py's options are not all its own)."""

    def test_the_forward_reply_path_runs_with_hostile_bc_arguments(self):
        a = B.parser().parse_args(["192.0.2.1", "20049"])
        s = H.Stats(False)
        c = H.Client(a, s)
        c.up, c.credits = True, 1
        c.out, c.pending = {}, {}
        c.free_slots = []
        c.next_expiry = 0.0
        xid = 0x48000020
        test_hostile.outstanding(c, "null", b"", {H.REPLY}, xid)
        c.on_reply(test_hostile.null_reply(xid))
        self.assertEqual(s.c.get("answered_ok"), 1, s.c)


if __name__ == "__main__":
    unittest.main()
