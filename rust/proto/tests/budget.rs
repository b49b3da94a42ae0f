// SPDX-License-Identifier: GPL-2.0

//! Whether a Call fits its connection: the boundary cases.

use proptest::prelude::*;
use svcrdma_proto::budget::{frmr_piece, Budget, Cost, OverLimit, ReadSink};

const PAGE: usize = 4096;

fn frmr(pages_per_mr: usize, local_inv: bool, mrs: usize, sq_slots: usize) -> Budget {
    Budget {
        page_size: PAGE,
        sink: ReadSink::Frmr {
            pages_per_mr,
            local_inv,
        },
        mrs,
        sq_slots,
    }
}

fn sge(max_sge: usize, sq_slots: usize) -> Budget {
    Budget {
        page_size: PAGE,
        sink: ReadSink::Sge { max_sge },
        mrs: 0,
        sq_slots,
    }
}

#[test]
fn one_aligned_maximal_segment_takes_one_mr() {
    let b = frmr(257, true, 128, 1024);
    let c = b.read_cost(0, [256 * PAGE]);
    assert_eq!(c, Cost { mrs: 1, wrs: 3 });
    // Read With Invalidate: no LOCAL_INV.
    let b = frmr(257, false, 128, 1024);
    assert_eq!(b.read_cost(0, [256 * PAGE]).wrs, 2);
}

#[test]
fn an_unaligned_segment_one_byte_over_an_mr_takes_two() {
    let b = frmr(4, true, 128, 1024);
    // Starting 100 bytes into a page, an MR maps 4 * PAGE - 100 bytes.
    assert_eq!(b.read_cost(100, [4 * PAGE - 100]).mrs, 1);
    assert_eq!(b.read_cost(100, [4 * PAGE - 99]).mrs, 2);
    assert_eq!(frmr_piece(100, 10 * PAGE, 4 * PAGE, PAGE), 4 * PAGE - 100);
}

#[test]
fn segments_follow_each_other_in_the_sink() {
    let b = frmr(1, true, 128, 1024);
    // Two 2048-byte segments share a page: each is its own piece.
    assert_eq!(b.read_cost(0, [2048, 2048]).mrs, 2);
    // The second starts at 2048: 3000 bytes cross a page boundary.
    assert_eq!(b.read_cost(0, [2048, 3000]).mrs, 3);
}

#[test]
fn the_mr_pool_boundary() {
    // 64 one-page segments: 64 MRs, 192 work requests.
    let lens = [PAGE; 64];
    let b = frmr(257, true, 64, 192);
    let c = b.read_cost(0, lens);
    assert_eq!(c, Cost { mrs: 64, wrs: 192 });
    assert_eq!(b.check(c), Ok(()));
    let b = frmr(257, true, 63, 1024);
    assert_eq!(b.check(c), Err(OverLimit::Mrs { need: 64, have: 63 }));
}

#[test]
fn the_send_queue_boundary() {
    let c = Cost { mrs: 1, wrs: 100 };
    assert_eq!(frmr(1, true, 1, 100).check(c), Ok(()));
    assert_eq!(
        frmr(1, true, 1, 99).check(c),
        Err(OverLimit::SendQueue {
            need: 100,
            have: 99
        })
    );
}

#[test]
fn dma_mr_reads_take_max_sge_pages_each() {
    let b = sge(4, 1024);
    assert_eq!(b.read_cost(0, [4 * PAGE]), Cost { mrs: 0, wrs: 1 });
    assert_eq!(b.read_cost(0, [4 * PAGE + 1]), Cost { mrs: 0, wrs: 2 });
    // One byte before a page boundary: two pages.
    assert_eq!(b.read_cost(PAGE - 1, [2]).wrs, 1);
    assert_eq!(sge(1, 1024).read_cost(PAGE - 1, [2]).wrs, 2);
    assert_eq!(
        b.check(Cost { mrs: 1, wrs: 1 }),
        Err(OverLimit::Mrs { need: 1, have: 0 })
    );
}

#[test]
fn nothing_costs_nothing() {
    let b = frmr(0, true, 0, 0);
    assert_eq!(b.read_cost(0, []), Cost::default());
    assert_eq!(b.check(Cost::default()), Ok(()));
    assert_eq!(b.check(Cost { mrs: 0, wrs: 1 }), Err(OverLimit::Unusable));
}

#[test]
fn sums_saturate() {
    let c = Cost {
        mrs: usize::MAX,
        wrs: 1,
    }
    .plus(Cost { mrs: 1, wrs: 1 });
    assert_eq!(c.mrs, usize::MAX);
    assert!(frmr(1, true, usize::MAX - 1, usize::MAX).check(c).is_err());
}

proptest! {
    /// The pieces cover the segment exactly, none empty, none larger than
    /// an MR, none crossing more pages than an MR maps.
    #[test]
    fn pieces_tile_the_sink(dst in 0usize..3 * PAGE, len in 1usize..(1 << 21), ppm in 1usize..300) {
        let mr_bytes = ppm * PAGE;
        let (mut done, mut n) = (0usize, 0usize);
        while done < len {
            let at = dst + done;
            let p = frmr_piece(at, len - done, mr_bytes, PAGE);
            prop_assert!(p > 0 && p <= mr_bytes);
            prop_assert!((at % PAGE + p).div_ceil(PAGE) <= ppm);
            done += p;
            n += 1;
        }
        prop_assert_eq!(done, len);
        let b = frmr(ppm, true, usize::MAX, usize::MAX);
        prop_assert_eq!(b.read_cost(dst, [len]), Cost { mrs: n, wrs: 3 * n });
    }

    /// A Call's cost fits exactly when the budget is at least the cost.
    #[test]
    fn check_is_a_comparison(mrs in 0usize..300, wrs in 0usize..900, have_m in 0usize..300, have_w in 0usize..900) {
        let b = frmr(16, true, have_m, have_w);
        let ok = b.check(Cost { mrs, wrs }).is_ok();
        prop_assert_eq!(ok, mrs <= have_m && wrs <= have_w);
    }
}

mod busy {
    use svcrdma_proto::budget::answer_when_busy;
    use svcrdma_proto::rpcrdma::header::{ChunkError, DecodeError, Limits};

    const LIMITS: Limits = Limits {
        max_read_segments: 64,
        max_write_chunks: 4,
        max_segments_per_chunk: 64,
        max_chunk_bytes: 1 << 20,
    };

    /// An RDMA_MSG header with empty lists, then `body`.
    fn msg(xid: u32, vers: u32, proc_: u32, body: &[u32]) -> Vec<u8> {
        [xid, vers, 32, proc_, 0, 0, 0]
            .iter()
            .chain(body)
            .flat_map(|w| w.to_be_bytes())
            .collect()
    }

    #[test]
    fn a_good_call_gets_err_chunk() {
        // XID, CALL, RPC version 2, program, version, procedure, ...
        let m = msg(7, 1, 0, &[7, 0, 2, 100003, 3, 0, 0, 0, 0, 0]);
        assert_eq!(
            answer_when_busy(&m, &LIMITS),
            Some(DecodeError::Chunk {
                xid: 7,
                reason: ChunkError::OverResources
            })
        );
    }

    #[test]
    fn a_bad_header_gets_its_own_error() {
        let m = msg(8, 2, 0, &[8, 0]);
        assert_eq!(
            answer_when_busy(&m, &LIMITS),
            Some(DecodeError::Version { xid: 8, vers: 2 })
        );
    }

    #[test]
    fn no_answer_without_an_xid_or_to_an_error() {
        assert_eq!(answer_when_busy(&[0, 0, 0, 1], &LIMITS), None);
        // RDMA_ERROR (4), ERR_CHUNK (2).
        let m: Vec<u8> = [9u32, 1, 32, 4, 2]
            .iter()
            .flat_map(|w| w.to_be_bytes())
            .collect();
        assert_eq!(answer_when_busy(&m, &LIMITS), None);
    }

    #[test]
    fn a_backward_reply_is_not_answered() {
        // XID, REPLY, MSG_ACCEPTED, null verifier, SUCCESS.
        let m = msg(10, 1, 0, &[10, 1, 0, 0, 0, 0]);
        assert_eq!(answer_when_busy(&m, &LIMITS), None);
    }
}
