// SPDX-License-Identifier: GPL-2.0
/*
 * hostile_volume: the volume half of the hostile client (hostile.py is the
 * directed half). Sends N randomly mutated RPC-over-RDMA version 1 Calls
 * (RFC 8166) to an NFS/RDMA listener, pipelined up to the credits the
 * server grants, over K connections at once, and checks every answer.
 *
 *   hostile_volume [-n N] [-k K] [-s SEED] [-t SECS] [-p EVERY] ADDR PORT
 *   hostile_volume -d [-n N] [-s SEED]     (draws N Calls, sends nothing)
 *   hostile_volume -T                      (the judge's self-test, no server)
 *
 * Speed is the point: a Python verbs client makes 4-11 messages a second in
 * an emulated guest, and a million messages need hundreds a second. So the
 * messages are the mutations whose outcome RFC 8166 fixes without a
 * timeout or a reconnect: each starts from a valid NFSv3 NULL Call (inline,
 * or offering a Write chunk or a Reply chunk of this client's memory) and
 * gets one to two mutations of its transport header — bits flipped, a word
 * replaced by a boundary value or a random one, the header cut short — and
 * the outcome allowed is:
 *   rdma_vers other than 1                    ERR_VERS, low = high = 1
 *                                             (RFC 8166 sections 4.5.1, 5.3.2)
 *   version 1, header cut before the chunk    ERR_CHUNK (section 4.5.2)
 *   lists, a list that does not decode, an
 *   unknown rdma_proc, RDMA_NOMSG without
 *   chunks
 *   a header equal to the template but for    the RPC reply
 *   the credit request
 *   Write or Reply chunk values changed       the reply, ERR_CHUNK or a close
 *                                             (sections 4.5.3-4.5.5)
 * Mutations whose outcome may be no answer at all (RDMA_DONE, RDMA_ERROR
 * or RDMA_MSGP from a requester, a damaged RPC message, RDMA_NOMSG with no
 * call), that make the server read memory named by damaged values (a Read
 * chunk), or whose changed chunk values name this client's memory outside
 * the Call's own slot (a reply written there would land in another Call's)
 * are drawn again and counted as "redrawn": hostile.py's directed and
 * random modes send the first two kinds, with the timeouts and reconnects
 * they need. The Calls that allow a close go on connection 0 only, one at
 * a time ("held_back" counts the draws put back for that), so a close is
 * owned by the one Call that allows it: a close on any other connection,
 * or with no such Call outstanding, is a mismatch.
 *
 * Every answer is checked: version 1, a credit grant of at least 1, an XID
 * of an outstanding Call, at most the 1024-byte inline receive size this
 * client announces (no RFC 8797 private data), an outcome in the allowed
 * set, no Read list, no Write chunk bytes claimed for a NULL reply, an
 * RDMA_NOMSG answer only to a Call that offered a Reply chunk and within
 * it; the reply to an unchanged header is an accepted RPC reply (SUCCESS)
 * to that XID, to changed chunks any RPC reply to it. A Call neither
 * answered nor closed within SECS is a hang; after 3 hangs the run stops.
 * Prints progress every EVERY messages and one summary line; exits 1 on
 * any mismatch or hang or if fewer than N were sent, 2 on a usage or
 * set-up error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MAX_CONNS 16
#define SLOTS 64		/* Calls outstanding per connection, at most */
#define NSEND (SLOTS + 8)
#define NRECV (SLOTS + 8)
#define MSG_MAX 256		/* bytes per send buffer */
#define INLINE 1024		/* our receive size (RFC 8166's default) */
#define RING 4096		/* outstanding Calls by XID, per connection */
#define CHUNK_BYTES 4096	/* this client's memory offered per Call */
#define EVENT_MS 20000
#define RECV_WR (1ULL << 31)	/* wr_id bit of receives (opcode is undefined on errors) */
#define MAX_HANGS 3		/* hangs before giving up on the server */

enum { RDMA_MSG, RDMA_NOMSG, RDMA_MSGP, RDMA_DONE, RDMA_ERROR };
enum { ERR_VERS = 1, ERR_CHUNK = 2 };

/* Outcomes, as bits of an allowed set. */
enum { O_REPLY = 1, O_ERRV = 2, O_ERRC = 4, O_CLOSE = 8, O_REDRAW = 16 };

struct call {
	uint32_t xid;
	uint8_t allowed;
	uint8_t live;
	int16_t slot;		/* chunk memory slot, or -1 */
	uint8_t kind;		/* template: 0 inline, 1 Write chunk, 2 Reply chunk */
	double sent;
};

struct conn {
	int idx;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	int up;			/* established and not yet closed */
	int opened;		/* was established before */
	int close_live;		/* Calls live that allow a close (connection 0 only) */
	int down;		/* a close was seen (event or completion) */
	uint32_t credits;
	int outstanding;
	uint32_t seq;
	int sfree[NSEND], nsfree;
	int dfree[SLOTS], ndfree;
	struct call ring[RING];
};

static struct rdma_event_channel *ch;
static struct ibv_comp_channel *cc;
static struct addrinfo *peer;
static struct ibv_context *verbs;
static struct ibv_pd *pd;
static struct ibv_mr *send_mr, *recv_mr, *data_mr;
static char *send_buf, *recv_buf, *data_buf;
static struct conn conns[MAX_CONNS];
static int nconns = 4;
static double timeout_s = 20;
static uint64_t rng;

static struct {
	unsigned long sent, answered_ok, err_vers, err_chunk, closes, reconnects,
		collateral, hangs, mismatches, redrawn, unchanged, held_back, may_close;
} st;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ULL;
}

static uint32_t below(uint32_t n)
{
	return n ? (uint32_t)(rnd() >> 33) % n : 0;
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, v >> 32);
	put32(p + 4, (uint32_t)v);
}

static void mismatch(const char *what, uint32_t xid, const uint8_t *msg, int len)
{
	st.mismatches++;
	if (st.mismatches > 30)
		return;
	printf("MISMATCH xid %#x: %s", xid, what);
	if (msg) {
		printf("; message ");
		for (int i = 0; i < len && i < 64; i++)
			printf("%02x", msg[i]);
		printf(" (%d bytes)", len);
	}
	printf("\n");
}

static void on_answer(struct conn *c, const uint8_t *b, int len);
static void resolve(struct conn *c, struct call *k, int outcome, const char *detail);

/* --- messages ------------------------------------------------------------ */

/*
 * A valid NFSv3 NULL Call with XID @xid: kind 0 inline, 1 with a Write
 * chunk, 2 with a Reply chunk (either naming @addr); returns its length,
 * and the length of its transport header in *hlen.
 */
static int template(uint8_t *b, int kind, uint32_t xid, uint64_t addr, uint32_t rkey, int *hlen)
{
	int n = 0;

	put32(b + n, xid); n += 4;
	put32(b + n, 1); n += 4;
	put32(b + n, 32); n += 4;
	put32(b + n, RDMA_MSG); n += 4;
	put32(b + n, 0); n += 4;		/* no Read chunks */
	if (kind == 1) {
		put32(b + n, 1); n += 4;
		put32(b + n, 1); n += 4;	/* one segment */
		put32(b + n, rkey); n += 4;
		put32(b + n, CHUNK_BYTES); n += 4;
		put64(b + n, addr); n += 8;
	}
	put32(b + n, 0); n += 4;		/* end of the Write list */
	if (kind == 2) {
		put32(b + n, 1); n += 4;
		put32(b + n, 1); n += 4;
		put32(b + n, rkey); n += 4;
		put32(b + n, CHUNK_BYTES); n += 4;
		put64(b + n, addr); n += 8;
	} else {
		put32(b + n, 0); n += 4;
	}
	*hlen = n;
	/* RPC Call: xid, CALL, rpcvers 2, NFS 100003 v3 NULL, AUTH_NONE x 2. */
	put32(b + n, xid); n += 4;
	put32(b + n, 0); n += 4;
	put32(b + n, 2); n += 4;
	put32(b + n, 100003); n += 4;
	put32(b + n, 3); n += 4;
	put32(b + n, 0); n += 4;
	for (int i = 0; i < 4; i++) {
		put32(b + n, 0);
		n += 4;
	}
	return n;
}

/* A segment: handle, length, offset. */
struct seg {
	uint32_t handle, length;
	uint64_t offset;
};

/* The chunk lists of a header (RFC 8166 section 5.3.1), as parsed. */
struct chunks {
	int nreads, nwrites, has_reply, nsegs;
	int nreply_segs;	/* segments of the Reply chunk */
	uint64_t write_bytes;	/* sum of the Write list's segment lengths */
	struct seg segs[8];	/* the first segments, for comparison */
	struct seg reply0;	/* the Reply chunk's first segment */
	int end;		/* offset of the first byte after the lists */
};

/* A reader of received or drawn XDR: every read is bounds-checked. */
struct xdr {
	const uint8_t *b;
	int len, off;
};

/* The next word in *v; -1 if the message ends first. */
static int word(struct xdr *x, uint32_t *v)
{
	if ((long)x->off + 4 > x->len)
		return -1;
	*v = get32(x->b + x->off);
	x->off += 4;
	return 0;
}

/* A list's discriminator: 1 another item, 0 the end, -1 neither. */
static int more(struct xdr *x)
{
	uint32_t d;

	if (word(x, &d) || d > 1)
		return -1;
	return (int)d;
}

/* One segment into @c (the first 8 are kept); -1 if it runs past the end. */
static int segment(struct xdr *x, struct chunks *c, struct seg *out)
{
	uint32_t w[4];
	struct seg s;

	for (int i = 0; i < 4; i++)
		if (word(x, &w[i]))
			return -1;
	s.handle = w[0];
	s.length = w[1];
	s.offset = (uint64_t)w[2] << 32 | w[3];
	if (c->nsegs < 8)
		c->segs[c->nsegs] = s;
	c->nsegs++;
	*out = s;
	return 0;
}

/* A counted array of segments (a Write chunk or the Reply chunk). */
static int segments(struct xdr *x, struct chunks *c, uint32_t *n, uint64_t *bytes,
		    struct seg *first)
{
	struct seg s;

	if (word(x, n) || (uint64_t)*n * 16 > (uint64_t)(x->len - x->off))
		return -1;
	for (uint32_t i = 0; i < *n; i++) {
		if (segment(x, c, &s))
			return -1;
		if (i == 0 && first)
			*first = s;
		if (bytes)
			*bytes += s.length;
	}
	return 0;
}

/*
 * Parses the chunk lists of @b (@len bytes) from byte 16. Returns 0, or -1
 * if they do not decode (a list running past the end, a bad discriminant).
 */
static int parse_chunks(const uint8_t *b, int len, struct chunks *c)
{
	struct xdr x = { b, len, 16 };
	struct seg s;
	uint32_t position, n;
	int m;

	memset(c, 0, sizeof(*c));
	while ((m = more(&x)) == 1) {
		if (word(&x, &position) || segment(&x, c, &s))
			return -1;
		c->nreads++;
	}
	if (m < 0)
		return -1;
	while ((m = more(&x)) == 1) {
		if (segments(&x, c, &n, &c->write_bytes, NULL))
			return -1;
		c->nwrites++;
	}
	if (m < 0 || (m = more(&x)) < 0)
		return -1;
	if (m == 1) {
		if (segments(&x, c, &n, NULL, &c->reply0))
			return -1;
		c->nreply_segs = n;
		c->has_reply = 1;
	}
	c->end = x.off;
	return 0;
}

static int same_chunks(const struct chunks *a, const struct chunks *b)
{
	if (a->nreads != b->nreads || a->nwrites != b->nwrites ||
	    a->has_reply != b->has_reply || a->nsegs != b->nsegs || a->nsegs > 8)
		return 0;
	for (int i = 0; i < a->nsegs; i++)
		if (a->segs[i].handle != b->segs[i].handle ||
		    a->segs[i].length != b->segs[i].length ||
		    a->segs[i].offset != b->segs[i].offset)
			return 0;
	return 1;
}

/*
 * This client's memory a Call may name: rkey, and the Call's own slot.
 * Changed chunk values that name our memory elsewhere are redrawn: a
 * server that writes a reply there would corrupt another Call's slot.
 */
struct own {
	uint32_t rkey;
	uint64_t lo, hi;	/* [lo, hi): the whole region */
	uint64_t slot_lo, slot_hi;
};

static int names_elsewhere(const struct chunks *c, const struct own *o)
{
	for (int i = 0; i < c->nsegs && i < 8; i++) {
		const struct seg *g = &c->segs[i];
		uint64_t end = g->offset + g->length;

		if (g->handle != o->rkey || end < g->offset || g->offset >= o->hi || end <= o->lo)
			continue;	/* not our memory: an access error */
		if (g->offset < o->slot_lo || end > o->slot_hi)
			return 1;
	}
	return c->nsegs > 8;
}

/* The outcomes RFC 8166 allows for @m, a mutation of template @t. */
static int expect(const uint8_t *m, int mlen, const uint8_t *t, int tlen, const struct own *o)
{
	struct chunks mc, tc;
	uint32_t proc;

	if (mlen < 8)
		return O_REDRAW;	/* no version: nothing prescribed */
	if (get32(m + 4) != 1)
		return O_ERRV;
	if (mlen < 16)
		return O_ERRC;
	proc = get32(m + 12);
	if (proc == RDMA_DONE || proc == RDMA_ERROR || proc == RDMA_MSGP)
		return O_REDRAW;	/* no answer allowed */
	if (proc != RDMA_MSG && proc != RDMA_NOMSG)
		return O_ERRC;
	if (parse_chunks(m, mlen, &mc))
		return O_ERRC;
	if (proc == RDMA_NOMSG && !mc.nreads && !mc.nwrites && !mc.has_reply)
		return O_ERRC;
	if (proc == RDMA_NOMSG || mc.nreads)
		return O_REDRAW;	/* no call, or Reads of damaged values */
	if (parse_chunks(t, tlen, &tc))
		return O_REDRAW;	/* cannot happen: templates decode */
	/* The RPC message must be the template's, where the header ends. */
	if (mlen - mc.end != tlen - tc.end || memcmp(m + mc.end, t + tc.end, tlen - tc.end))
		return O_REDRAW;
	if (same_chunks(&mc, &tc))
		return O_REPLY;
	if (names_elsewhere(&mc, o))
		return O_REDRAW;
	return O_REPLY | O_ERRC | O_CLOSE;
}

static const uint32_t interesting[] = {
	0, 1, 2, 3, 4, 5, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x7fffffff,
	0x80000000, 0xfffffffe, 0xffffffff,
};

/*
 * One or two mutations of the transport header of @b (@len bytes, header
 * @hlen bytes), the XID left alone. Returns the new length.
 */
static int mutate(uint8_t *b, int len, int hlen)
{
	int rounds = 1 + (below(10) < 3);

	for (int r = 0; r < rounds; r++) {
		int lim = below(2) ? 16 : hlen;
		uint32_t k = below(100);

		if (lim > len)
			lim = len;
		if (lim < 8)
			lim = 8;
		if (k < 40) {			/* bit flips */
			int flips = 1 + below(3);

			while (flips--)
				b[4 + below(lim - 4)] ^= 1 << below(8);
		} else if (k < 85) {		/* a word replaced */
			uint32_t w = 1 + below(lim / 4 - 1);
			uint32_t v = below(10) < 7 ?
				interesting[below(sizeof(interesting) / 4)] : (uint32_t)rnd();

			put32(b + w * 4, v);
		} else if (len > 8) {		/* cut inside the header */
			int cut = 8 + below((hlen < len ? hlen : len) - 8);

			len = cut;
		}
	}
	return len;
}

/*
 * Draws a mutated Call into @m (MSG_MAX bytes) from a template of @kind
 * naming @o's slot; returns its length and the outcomes allowed in
 * *allowed. Without @may_close, draws that allow a close are drawn again.
 */
static int draw(uint8_t *m, int kind, uint32_t xid, const struct own *o, int may_close,
		int *allowed)
{
	uint8_t t[MSG_MAX];
	int tlen, mlen, hlen;

	tlen = template(t, kind, xid, o->slot_lo, o->rkey, &hlen);
	for (;;) {
		memcpy(m, t, tlen);
		mlen = mutate(m, tlen, hlen);
		if (mlen == tlen && !memcmp(m, t, tlen)) {
			st.unchanged++;
			continue;
		}
		*allowed = expect(m, mlen, t, tlen, o);
		if (*allowed & O_CLOSE && !may_close) {
			st.held_back++;
			continue;
		}
		if (*allowed != O_REDRAW)
			return mlen;
		st.redrawn++;
	}
}

/* -d: draws @n Calls without a server and prints what was allowed. */
static int dry_run(unsigned long n)
{
	unsigned long sets[32] = { 0 };
	uint8_t m[MSG_MAX];

	for (unsigned long i = 0; i < n; i++) {
		int allowed, kind = below(10) < 6 ? 0 : 1 + below(2);

		struct own o = { 0x1234, 0x10000, 0x10000 + SLOTS * CHUNK_BYTES,
				 0x10000, 0x10000 + CHUNK_BYTES };

		draw(m, kind, 0x48000000u + (uint32_t)i, &o, 1, &allowed);
		sets[allowed & 31]++;
	}
	printf("hostile_volume: dry run of %lu: reply %lu, err_vers %lu, err_chunk %lu, "
	       "reply/err_chunk/close %lu, redrawn %lu, unchanged %lu\n", n, sets[O_REPLY],
	       sets[O_ERRV], sets[O_ERRC], sets[O_REPLY | O_ERRC | O_CLOSE], st.redrawn, st.unchanged);
	return 0;
}

/*
 * -T: the judge against a wrong server, without one. Each answer below is
 * fed to on_answer() for one outstanding Call; the answers a wrong server
 * would give must each count one mismatch (which makes a run exit 1), the
 * right ones none; and expect() must prescribe the RFC's outcome for the
 * plain mutations. Returns 0 if the judge judged every case as it should.
 */
struct answer {
	uint8_t b[96];
	int len;
};

static void a_word(struct answer *a, uint32_t v)
{
	put32(a->b + a->len, v);
	a->len += 4;
}

/* A transport header, then (for RDMA_MSG) the empty lists. */
static void a_header(struct answer *a, uint32_t xid, uint32_t vers, uint32_t credits, uint32_t proc)
{
	a->len = 0;
	a_word(a, xid);
	a_word(a, vers);
	a_word(a, credits);
	a_word(a, proc);
}

/* An accepted RPC reply to @xid with @stat (0: SUCCESS). */
static void a_rpc(struct answer *a, uint32_t xid, uint32_t stat)
{
	a_word(a, xid);
	a_word(a, 1);		/* REPLY */
	a_word(a, 0);		/* MSG_ACCEPTED */
	a_word(a, 0);		/* verifier AUTH_NONE, */
	a_word(a, 0);		/* empty */
	a_word(a, stat);
}

static void a_null_reply(struct answer *a, uint32_t xid, uint32_t credits, uint32_t rpc_xid,
			 uint32_t stat)
{
	a_header(a, xid, 1, credits, RDMA_MSG);
	for (int i = 0; i < 3; i++)
		a_word(a, 0);
	a_rpc(a, rpc_xid, stat);
}

static void a_error(struct answer *a, uint32_t xid, uint32_t vers, uint32_t code, uint32_t lo,
		    uint32_t hi)
{
	a_header(a, xid, vers, 32, RDMA_ERROR);
	a_word(a, code);
	if (code == ERR_VERS) {
		a_word(a, lo);
		a_word(a, hi);
	}
}

/* The mismatches @a causes when a Call allowing @allowed is outstanding (none if 0). */
static unsigned long judge(int allowed, uint32_t xid, const struct answer *a)
{
	struct conn *c = &conns[0];
	unsigned long before = st.mismatches;

	if (allowed) {
		struct call *k = &c->ring[xid % RING];

		*k = (struct call){ .xid = xid, .allowed = allowed, .live = 1, .slot = -1,
				    .sent = now() };
		c->outstanding++;
	}
	on_answer(c, a->b, a->len);
	for (int i = 0; i < RING; i++)
		if (c->ring[i].live)
			resolve(c, &c->ring[i], 0, NULL);
	return st.mismatches - before;
}

static int self_test(void)
{
	const uint32_t x = 0x48000100;
	struct own o = { 0x1234, 0x10000, 0x10000 + SLOTS * CHUNK_BYTES, 0x10000,
			 0x10000 + CHUNK_BYTES };
	uint8_t t[MSG_MAX], m[MSG_MAX];
	struct answer a;
	int failed = 0, cases = 0, tlen, hlen;

#define JUDGE(name, allowed, want)						\
	do {									\
		unsigned long got = judge(allowed, x, &a);			\
										\
		cases++;							\
		if (got != (want)) {						\
			printf("self-test FAILED: %s: %lu mismatches, want %d\n",	\
			       name, got, want);				\
			failed++;						\
		}								\
	} while (0)

	printf("hostile_volume: self-test: each MISMATCH line below is a wrong answer caught\n");
	conns[0].up = 1;
	/* What a right server answers. */
	a_null_reply(&a, x, 32, x, 0);
	JUDGE("the NULL reply", O_REPLY, 0);
	JUDGE("a reply where a reply, ERR_CHUNK or a close may come", O_REPLY | O_ERRC | O_CLOSE, 0);
	a_error(&a, x, 1, ERR_VERS, 1, 1);
	JUDGE("ERR_VERS 1..1 in a version 1 message", O_ERRV, 0);
	a_error(&a, x, 1, ERR_CHUNK, 0, 0);
	JUDGE("ERR_CHUNK", O_ERRC, 0);
	/* What a wrong server answers. */
	a_null_reply(&a, x, 32, x, 0);
	JUDGE("a reply where ERR_CHUNK is prescribed", O_ERRC, 1);
	JUDGE("a reply where ERR_VERS is prescribed", O_ERRV, 1);
	a_error(&a, x, 2, ERR_VERS, 1, 1);
	JUDGE("ERR_VERS in the request's version 2", O_ERRV, 1);
	a_error(&a, x, 1, ERR_VERS, 1, 2);
	JUDGE("ERR_VERS 1..2", O_ERRV, 1);
	a_error(&a, x, 1, ERR_CHUNK, 0, 0);
	JUDGE("ERR_CHUNK where ERR_VERS is prescribed", O_ERRV, 1);
	JUDGE("ERR_CHUNK where the reply is owed", O_REPLY, 1);
	a_error(&a, x, 1, 3, 0, 0);
	JUDGE("an unknown RDMA_ERROR code", O_ERRC, 1);
	a_null_reply(&a, x, 0, x, 0);
	JUDGE("a credit grant of 0", O_REPLY, 1);
	a_null_reply(&a, x, 32, x + 7, 0);
	JUDGE("an RPC reply to another XID", O_REPLY, 1);
	a_null_reply(&a, x, 32, x, 1);
	JUDGE("an RPC reply that is not SUCCESS", O_REPLY, 1);
	a_null_reply(&a, x + 1, 32, x + 1, 0);
	JUDGE("an answer to no outstanding Call", 0, 1);
	a_header(&a, x, 1, 32, RDMA_MSG);
	a_word(&a, 1);			/* a Read list in a reply */
	for (int i = 0; i < 5; i++)
		a_word(&a, 0);
	for (int i = 0; i < 3; i++)
		a_word(&a, 0);
	a_rpc(&a, x, 0);
	JUDGE("an answer with a Read list", O_REPLY, 1);
	a_header(&a, x, 1, 32, RDMA_MSG);
	a.len = 12;
	JUDGE("an answer of 12 bytes", O_REPLY, 1);
	a_header(&a, x, 1, 32, 7);
	JUDGE("an answer with rdma_proc 7", O_REPLY, 1);

	/* expect(): the RFC's outcomes for plain mutations of a template. */
	tlen = template(t, 0, x, 0, 0, &hlen);
	cases += 4;
	if (expect(t, tlen, t, tlen, &o) != O_REPLY) {
		printf("self-test FAILED: the template is not owed its reply\n");
		failed++;
	}
	memcpy(m, t, tlen);
	put32(m + 4, 2);
	if (expect(m, tlen, t, tlen, &o) != O_ERRV) {
		printf("self-test FAILED: version 2 is not owed ERR_VERS alone\n");
		failed++;
	}
	put32(m + 4, 1);
	put32(m + 12, 9);
	if (expect(m, tlen, t, tlen, &o) != O_ERRC) {
		printf("self-test FAILED: rdma_proc 9 is not owed ERR_CHUNK alone\n");
		failed++;
	}
	put32(m + 12, RDMA_MSG);
	put32(m + 16, 2);
	if (expect(m, tlen, t, tlen, &o) != O_ERRC) {
		printf("self-test FAILED: a bad Read list discriminator is not owed ERR_CHUNK alone\n");
		failed++;
	}
#undef JUDGE
	printf("hostile_volume: self-test %s: %d cases, %d failed\n", failed ? "FAILED" : "passed",
	       cases, failed);
	return failed ? 1 : 0;
}

/* --- connections ----------------------------------------------------------- */

static struct conn *conn_of(struct rdma_cm_id *id)
{
	for (int i = 0; i < nconns; i++)
		if (conns[i].id == id)
			return &conns[i];
	return NULL;
}

/* Handles an event of an id other than the one being connected. */
static void other_event(struct rdma_cm_event *ev)
{
	struct conn *c = conn_of(ev->id);

	if (c && (ev->event == RDMA_CM_EVENT_DISCONNECTED ||
		  ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
		  ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT))
		c->down = 1;
}

/* Waits for the next event of @id; 0 and its type in *type, or -1. */
static int wait_event(struct rdma_cm_id *id, enum rdma_cm_event_type *type, int *status)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	double end = now() + EVENT_MS / 1000.0;
	struct rdma_cm_event *ev;

	for (;;) {
		int left = (int)((end - now()) * 1000);

		if (left <= 0 || poll(&p, 1, left) <= 0)
			return -1;
		if (rdma_get_cm_event(ch, &ev))
			return -1;
		if (ev->id == id) {
			*type = ev->event;
			*status = ev->status;
			rdma_ack_cm_event(ev);
			return 0;
		}
		other_event(ev);
		rdma_ack_cm_event(ev);
	}
}

static int expect_event(struct rdma_cm_id *id, enum rdma_cm_event_type want, const char *what)
{
	enum rdma_cm_event_type t;
	int status;

	if (wait_event(id, &t, &status)) {
		fprintf(stderr, "hostile_volume: %s: no CM event\n", what);
		return -1;
	}
	if (t != want) {
		fprintf(stderr, "hostile_volume: %s: %s (status %d)\n", what, rdma_event_str(t), status);
		return -1;
	}
	return 0;
}

static void post_recv(struct conn *c, int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(recv_buf + ((size_t)c->idx * NRECV + i) * INLINE),
		.length = INLINE,
		.lkey = recv_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = RECV_WR | i, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(c->id->qp, &wr, &bad))
		c->down = 1;
}

static void conn_destroy(struct conn *c)
{
	if (!c->id)
		return;
	if (c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	rdma_destroy_id(c->id);
	c->id = NULL;
	c->cq = NULL;
}

/* Registers this client's memory once, on the first connection's device. */
static int register_memory(struct ibv_context *ctx)
{
	size_t sb = (size_t)MAX_CONNS * NSEND * MSG_MAX, rb = (size_t)MAX_CONNS * NRECV * INLINE,
	       db = (size_t)MAX_CONNS * SLOTS * CHUNK_BYTES;

	pd = ibv_alloc_pd(ctx);
	cc = ibv_create_comp_channel(ctx);
	send_buf = calloc(1, sb);
	recv_buf = calloc(1, rb);
	data_buf = calloc(1, db);
	if (!pd || !cc || !send_buf || !recv_buf || !data_buf)
		return -1;
	send_mr = ibv_reg_mr(pd, send_buf, sb, IBV_ACCESS_LOCAL_WRITE);
	recv_mr = ibv_reg_mr(pd, recv_buf, rb, IBV_ACCESS_LOCAL_WRITE);
	data_mr = ibv_reg_mr(pd, data_buf, db, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (!send_mr || !recv_mr || !data_mr)
		return -1;
	verbs = ctx;
	return 0;
}

/*
 * soft-iWARP (7.3) accepts by sending its MPA reply and only then hands the
 * socket's receive callback to the QP (siw_accept: siw_send_mpareqrep, then
 * siw_qp_socket_assoc). A message that reaches the server in between is
 * ignored by the CM's callback (siw_cm_llp_data_ready, state RDMA_MODE) and
 * waits in the socket until the next one arrives: any server, ours or the
 * C svcrdma, then seems not to answer. The client waits this long after
 * ESTABLISHED before its first send on iWARP.
 */
#define IWARP_SETTLE_US 200000

/* Connects @c; 0 when established, -1 otherwise (set-up failure). */
static int conn_open(struct conn *c)
{
	struct rdma_conn_param cp = {
		.responder_resources = 4, .initiator_depth = 4,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	struct ibv_qp_init_attr qa = { 0 };

	if (rdma_create_id(ch, &c->id, NULL, RDMA_PS_TCP)) {
		c->id = NULL;
		return -1;
	}
	if (rdma_resolve_addr(c->id, NULL, peer->ai_addr, 5000) ||
	    expect_event(c->id, RDMA_CM_EVENT_ADDR_RESOLVED, "resolve addr") ||
	    rdma_resolve_route(c->id, 5000) ||
	    expect_event(c->id, RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve route"))
		goto err;
	if (!verbs && register_memory(c->id->verbs)) {
		fprintf(stderr, "hostile_volume: cannot register memory\n");
		exit(2);
	}
	if (c->id->verbs != verbs) {
		fprintf(stderr, "hostile_volume: a connection on another device\n");
		goto err;
	}
	c->cq = ibv_create_cq(verbs, NSEND + NRECV, c, cc, 0);
	if (!c->cq || ibv_req_notify_cq(c->cq, 0))
		goto err;
	qa.send_cq = qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = NSEND;
	qa.cap.max_recv_wr = NRECV;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, pd, &qa))
		goto err;
	c->down = 0;
	for (int i = 0; i < NRECV; i++)
		post_recv(c, i);
	if (c->down || rdma_connect(c->id, &cp) ||
	    expect_event(c->id, RDMA_CM_EVENT_ESTABLISHED, "connect"))
		goto err;
	/* soft-iWARP's passive side lets the first message sit (see IWARP_SETTLE_US). */
	if (verbs->device->transport_type == IBV_TRANSPORT_IWARP)
		usleep(IWARP_SETTLE_US);
	c->up = 1;
	c->credits = 1;
	c->outstanding = 0;
	c->nsfree = 0;
	for (int i = 0; i < NSEND; i++)
		c->sfree[c->nsfree++] = i;
	c->ndfree = 0;
	for (int i = 0; i < SLOTS; i++)
		c->dfree[c->ndfree++] = i;
	memset(c->ring, 0, sizeof(c->ring));
	return 0;
err:
	conn_destroy(c);
	return -1;
}

static void resolve(struct conn *c, struct call *k, int outcome, const char *detail)
{
	if (!k->live)
		return;
	k->live = 0;
	c->outstanding--;
	if (k->slot >= 0)
		c->dfree[c->ndfree++] = k->slot;
	if (k->allowed & O_CLOSE)
		c->close_live--;
	switch (outcome) {
	case O_ERRV: st.err_vers++; break;
	case O_ERRC: st.err_chunk++; break;
	default: break;
	}
	if (outcome && !(k->allowed & outcome)) {
		char what[160];

		snprintf(what, sizeof(what), "outcome %s%s, allowed mask %#x",
			 outcome == O_REPLY ? "reply" : outcome == O_ERRV ? "ERR_VERS" :
			 outcome == O_ERRC ? "ERR_CHUNK" : outcome == O_CLOSE ? "close" : "?",
			 detail ? detail : "", k->allowed);
		mismatch(what, k->xid, NULL, 0);
	}
}

/*
 * Ends @c: every outstanding Call resolves as closed. @ours: this client
 * closes it (after a hang): the Calls left are abandoned, not judged.
 */
static void conn_close(struct conn *c, const char *why, int ours)
{
	int any_close = ours;

	if (!c->up)
		return;
	c->up = 0;
	st.closes++;
	for (int i = 0; i < RING; i++)
		if (c->ring[i].live && (c->ring[i].allowed & O_CLOSE))
			any_close = 1;
	for (int i = 0; i < RING; i++) {
		struct call *k = &c->ring[i];

		if (!k->live)
			continue;
		if (!(k->allowed & O_CLOSE) && any_close) {
			if (!ours)
				st.collateral++;
			resolve(c, k, 0, NULL);
		} else if (!(k->allowed & O_CLOSE)) {
			char what[96];

			snprintf(what, sizeof(what), "connection %d closed (%s), no outstanding Call allows it",
				 c->idx, why);
			mismatch(what, k->xid, NULL, 0);
			resolve(c, k, 0, NULL);
		} else {
			resolve(c, k, O_CLOSE, NULL);
		}
	}
	rdma_disconnect(c->id);
	conn_destroy(c);
}

/* --- answers ----------------------------------------------------------------- */

/* The RPC reply at @b (@len bytes) to @xid: NULL, or what is wrong. */
static const char *rpc_reply(const uint8_t *b, int len, uint32_t xid)
{
	uint32_t vlen;

	if (len < 24)
		return ": short RPC reply";
	if (get32(b) != xid)
		return ": RPC reply to another XID";
	if (get32(b + 4) != 1 || get32(b + 8) != 0)
		return ": not an accepted RPC reply";
	vlen = get32(b + 16);
	if (vlen > 400 || 24 + ((vlen + 3) & ~3u) > (uint32_t)len)
		return ": RPC reply verifier runs past the end";
	if (get32(b + 20 + ((vlen + 3) & ~3u)) != 0)
		return ": RPC accept_stat not SUCCESS";
	return NULL;
}

static void on_answer(struct conn *c, const uint8_t *b, int len)
{
	uint32_t xid, vers, credits, proc;
	struct call *k;
	struct chunks ch_;

	if (len < 16) {
		mismatch("answer shorter than 16 bytes", len >= 4 ? get32(b) : 0, b, len);
		return;
	}
	xid = get32(b);
	vers = get32(b + 4);
	credits = get32(b + 8);
	proc = get32(b + 12);
	k = &c->ring[xid % RING];
	if (!k->live || k->xid != xid) {
		mismatch("answer for no outstanding Call", xid, b, len);
		return;
	}
	if (vers != 1 || credits < 1) {
		resolve(c, k, 0, NULL);
		mismatch(vers != 1 ? "answer version not 1" : "credit grant 0", xid, b, len);
		return;
	}
	c->credits = credits;
	if (proc == RDMA_ERROR) {
		uint32_t err = len >= 20 ? get32(b + 16) : 0;

		if (err == ERR_VERS && len >= 28 && get32(b + 20) == 1 && get32(b + 24) == 1) {
			resolve(c, k, O_ERRV, NULL);
		} else if (err == ERR_CHUNK) {
			resolve(c, k, O_ERRC, NULL);
		} else {
			resolve(c, k, 0, NULL);
			mismatch("bad RDMA_ERROR", xid, b, len);
		}
		return;
	}
	if ((proc != RDMA_MSG && proc != RDMA_NOMSG) || parse_chunks(b, len, &ch_)) {
		resolve(c, k, 0, NULL);
		mismatch("answer header does not decode", xid, b, len);
		return;
	}
	if (ch_.nreads) {
		resolve(c, k, 0, NULL);
		mismatch("answer with a Read list", xid, b, len);
		return;
	}
	if (k->allowed == O_REPLY && ch_.write_bytes) {
		resolve(c, k, 0, NULL);
		mismatch("NULL reply claims bytes written to a Write chunk", xid, b, len);
		return;
	}
	{
		/* The RPC reply: inline, or where the Reply chunk it names says. */
		const uint8_t *r = b + ch_.end;
		uint64_t n = len - ch_.end;
		const char *bad = NULL;

		if (proc == RDMA_NOMSG) {
			uint64_t lo = (uintptr_t)data_buf +
				((size_t)c->idx * SLOTS + (k->slot < 0 ? 0 : k->slot)) * CHUNK_BYTES;
			const struct seg *g = &ch_.reply0;

			n = g->length;
			if (k->kind != 2 || !ch_.has_reply || !ch_.nreply_segs)
				bad = ": RDMA_NOMSG answer to a Call that offered no Reply chunk";
			else if (g->handle != data_mr->rkey || g->offset < lo ||
				 g->offset + n > lo + CHUNK_BYTES || g->offset + n < g->offset)
				bad = ": RDMA_NOMSG answer names memory outside the Call's Reply chunk";
			else
				r = (const uint8_t *)(uintptr_t)g->offset;
		}
		if (!bad && k->allowed == O_REPLY) {
			bad = rpc_reply(r, (int)n, xid);
		} else if (!bad) {
			/* Damaged chunks: any RPC reply to the Call will do. */
			if (n < 8 || get32(r) != xid || get32(r + 4) != 1)
				bad = ": not an RPC reply to the Call";
		}
		if (bad) {
			resolve(c, k, 0, NULL);
			mismatch(bad + 2, xid, b, len);
			return;
		}
		resolve(c, k, O_REPLY, NULL);
	}
	st.answered_ok++;
}

/* Handles what @c's queue completed; returns how many. */
static int poll_conn(struct conn *c)
{
	struct ibv_wc wc[32];
	int n, total = 0;

	while (c->up && (n = ibv_poll_cq(c->cq, 32, wc)) > 0) {
		total += n;
		for (int i = 0; i < n; i++) {
			int is_recv = !!(wc[i].wr_id & RECV_WR);
			int idx = (int)(wc[i].wr_id & ~RECV_WR);

			if (wc[i].status != IBV_WC_SUCCESS) {
				if (wc[i].status == IBV_WC_LOC_LEN_ERR && is_recv)
					mismatch("answer longer than our 1024-byte receive", 0, NULL, 0);
				c->down = 1;
				continue;
			}
			if (!is_recv) {
				c->sfree[c->nsfree++] = idx;
				continue;
			}
			on_answer(c, (const uint8_t *)recv_buf +
				  ((size_t)c->idx * NRECV + idx) * INLINE, wc[i].byte_len);
			post_recv(c, idx);
		}
	}
	return total;
}

/* Sends one mutated Call on @c. */
static void send_one(struct conn *c)
{
	uint8_t m[MSG_MAX];
	int mlen, kind, allowed, slot = -1, si;
	uint32_t xid;
	struct call *k;
	struct own o = { .rkey = data_mr->rkey };

	/* XIDs: per connection, 24 bits of sequence. */
	xid = 0x48000000u + ((uint32_t)c->idx << 24 & 0x0f000000u) + (c->seq & 0xffffff);
	k = &c->ring[xid % RING];
	if (k->live)
		return;		/* an old Call still holds the entry: wait */
	c->seq++;
	kind = below(10) < 6 ? 0 : 1 + below(2);
	if (kind) {
		if (!c->ndfree)
			kind = 0;
		else
			slot = c->dfree[--c->ndfree];
	}
	o.lo = (uintptr_t)data_buf;
	o.hi = o.lo + (size_t)MAX_CONNS * SLOTS * CHUNK_BYTES;
	if (slot >= 0) {
		o.slot_lo = o.lo + ((size_t)c->idx * SLOTS + slot) * CHUNK_BYTES;
		o.slot_hi = o.slot_lo + CHUNK_BYTES;
	}
	/*
	 * Calls that may close the connection go on connection 0 only, one at
	 * a time: a close is then owned by the one Call that allows it, and
	 * one on any other connection is a mismatch.
	 */
	mlen = draw(m, kind, xid, &o, c->idx == 0 && !c->close_live, &allowed);
	si = c->sfree[--c->nsfree];
	memcpy(send_buf + ((size_t)c->idx * NSEND + si) * MSG_MAX, m, mlen);
	{
		struct ibv_sge sge = {
			.addr = (uintptr_t)(send_buf + ((size_t)c->idx * NSEND + si) * MSG_MAX),
			.length = mlen,
			.lkey = send_mr->lkey,
		};
		struct ibv_send_wr wr = {
			.wr_id = si, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		}, *bad;

		k->xid = xid;
		k->allowed = allowed;
		k->slot = slot;
		k->kind = kind;
		if (allowed & O_CLOSE) {
			c->close_live++;
			st.may_close++;
		}
		k->sent = now();
		k->live = 1;
		c->outstanding++;
		st.sent++;
		if (ibv_post_send(c->id->qp, &wr, &bad)) {
			c->sfree[c->nsfree++] = si;
			c->down = 1;
		}
	}
}

static int window(const struct conn *c)
{
	return c->credits < SLOTS ? (int)c->credits : SLOTS;
}

/*
 * Closes connections that went down, and (twice a second) those with a
 * Call too old.
 */
static void check_conns(void)
{
	static double next_scan;
	double t = now();
	int scan = t >= next_scan;

	if (scan)
		next_scan = t + 0.5;
	for (int i = 0; i < nconns; i++) {
		struct conn *c = &conns[i];

		if (!c->up)
			continue;
		if (c->down) {
			conn_close(c, "by the server or a failed work request", 0);
			continue;
		}
		for (int j = 0; scan && j < RING; j++) {
			if (c->ring[j].live && t - c->ring[j].sent > timeout_s) {
				st.hangs++;
				mismatch("hang: no answer, the connection neither answered nor closed",
					 c->ring[j].xid, NULL, 0);
				resolve(c, &c->ring[j], 0, NULL);
				conn_close(c, "hang", 1);
				break;
			}
		}
	}
}

/* Waits for completions or CM events, up to 100 ms. */
static void wait_any(void)
{
	struct pollfd p[2] = {
		{ .fd = cc->fd, .events = POLLIN },
		{ .fd = ch->fd, .events = POLLIN },
	};

	if (poll(p, 2, 100) <= 0)
		return;
	if (p[0].revents & POLLIN) {
		struct ibv_cq *cq;
		void *ctx;

		if (!ibv_get_cq_event(cc, &cq, &ctx)) {
			ibv_ack_cq_events(cq, 1);
			ibv_req_notify_cq(cq, 0);
		}
	}
	if (p[1].revents & POLLIN) {
		struct rdma_cm_event *ev;

		if (!rdma_get_cm_event(ch, &ev)) {
			other_event(ev);
			rdma_ack_cm_event(ev);
		}
	}
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC };
	unsigned long n = 100000, every = 0, next_progress;
	unsigned long seed = 8166;
	double t0;
	int opt, open_failures = 0, dry = 0, self = 0;

	while ((opt = getopt(argc, argv, "dTn:k:s:t:p:")) != -1) {
		switch (opt) {
		case 'd': dry = 1; break;
		case 'T': self = 1; break;
		case 'n': {
			char *end;

			n = strtoul(optarg, &end, 10);
			if (*end || !n) {
				fprintf(stderr, "hostile_volume: -n wants a positive number, not '%s'\n", optarg);
				return 2;
			}
			break;
		}
		case 'k': nconns = atoi(optarg); break;
		case 's': seed = strtoul(optarg, NULL, 10); break;
		case 't': timeout_s = atof(optarg); break;
		case 'p': every = strtoul(optarg, NULL, 10); break;
		default: return 2;
		}
	}
	rng = seed * 0x9e3779b97f4a7c15ULL + 1;
	if (self)
		return self_test();
	if (dry)
		return dry_run(n);
	if (optind + 2 != argc || nconns < 1 || nconns > MAX_CONNS || timeout_s <= 0) {
		fprintf(stderr, "usage: hostile_volume [-d] [-n N] [-k 1..%d] [-s SEED] [-t SECS] [-p EVERY] ADDR PORT\n",
			MAX_CONNS);
		return 2;
	}
	if (getaddrinfo(argv[optind], argv[optind + 1], &hints, &peer)) {
		fprintf(stderr, "hostile_volume: cannot resolve %s\n", argv[optind]);
		return 2;
	}
	ch = rdma_create_event_channel();
	if (!ch)
		return 2;
	for (int i = 0; i < nconns; i++)
		conns[i].idx = i;
	t0 = now();
	next_progress = every;
	for (;;) {
		int busy = 0, live = 0;

		for (int i = 0; i < nconns; i++) {
			struct conn *c = &conns[i];

			if (!c->up && st.sent < n) {
				if (conn_open(c)) {
					if (++open_failures > 5) {
						fprintf(stderr, "hostile_volume: cannot connect\n");
						if (!st.sent)
							return 2;	/* set-up: never connected */
						mismatch("the server no longer accepts connections", 0, NULL, 0);
						goto out;
					}
					continue;
				}
				open_failures = 0;
				if (c->opened)
					st.reconnects++;
				c->opened = 1;
			}
			if (!c->up)
				continue;
			busy += poll_conn(c);
			while (st.sent < n && c->up && !c->down && c->outstanding < window(c) &&
			       c->nsfree && c->outstanding < SLOTS) {
				unsigned long before = st.sent;

				send_one(c);
				if (st.sent == before)
					break;
				busy++;
			}
			live += c->outstanding;
		}
		check_conns();
		if (st.hangs >= MAX_HANGS) {
			fprintf(stderr, "hostile_volume: %lu hangs, giving up\n", st.hangs);
			goto out;
		}
		if (every && st.sent >= next_progress) {
			printf("hostile_volume: %lu sent, %lu mismatches, %.0f s\n", st.sent,
			       st.mismatches, now() - t0);
			fflush(stdout);
			next_progress += every;
		}
		if (st.sent >= n && !live)
			break;
		if (!busy)
			wait_any();
	}
out:
	for (int i = 0; i < nconns; i++)
		if (conns[i].up) {
			conns[i].up = 0;
			rdma_disconnect(conns[i].id);
			conn_destroy(&conns[i]);
		}
	{
		double dt = now() - t0;

		printf("hostile_volume: seed %lu, %lu mutated messages on %d connections; sent %lu, "
		       "answered_ok %lu, err_vers %lu, err_chunk %lu, closes %lu, reconnects %lu, "
		       "close_collateral %lu, hangs %lu, mismatches %lu, may_close %lu, redrawn %lu, "
		       "held_back %lu; %.0f s, %.0f msg/s\n",
		       seed, n, nconns, st.sent, st.answered_ok, st.err_vers, st.err_chunk, st.closes,
		       st.reconnects, st.collateral, st.hangs, st.mismatches, st.may_close, st.redrawn,
		       st.held_back, dt, dt > 0 ? st.sent / dt : 0);
	}
	if (st.sent != n)
		printf("hostile_volume: sent %lu of %lu\n", st.sent, n);
	return st.mismatches || st.hangs || st.sent != n ? 1 : 0;
}
