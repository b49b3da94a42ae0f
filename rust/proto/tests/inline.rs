// SPDX-License-Identifier: GPL-2.0

//! Credits, queue depths, and the inline limits negotiated by RFC 8797.

use proptest::prelude::*;
use svcrdma_proto::cm_private::{decode, CmPrivate};
use svcrdma_proto::inline::{
    max_inline_reply, server_private, Depths, BC_CREDITS, CREDITS, RECV_BATCH, RECV_SIZE,
    SEND_SIZE, SEND_WR_PER_RPC,
};

#[test]
fn a_roomy_device_gets_the_default_credits() {
    let d = Depths::for_device(16384, 65536).unwrap();
    // The C svcrdma's default in 7.3 (RPCRDMA_MAX_REQUESTS).
    assert_eq!(d.credits, 128);
    assert_eq!(d.credits, CREDITS);
    assert_eq!(d.recv_batch, RECV_BATCH);
    assert_eq!(d.recv_buffers, CREDITS + BC_CREDITS + RECV_BATCH - 1);
    assert_eq!(d.recv_wr, d.recv_buffers + 1);
    assert!(d.send_wr > d.credits);
    // 16 per credit plus the drain would be 2,049: rxe and siw would make
    // that 4,096 slots. 2,047 fills 2,048 on both.
    assert_eq!(d.send_wr, 2047);
}

#[test]
fn a_small_device_gets_fewer_credits_and_never_overflows() {
    let d = Depths::for_device(20, 1000).unwrap();
    assert_eq!(d.credits, 20 - 1 - BC_CREDITS);
    // No credit is given up for batching: no spare buffer, no batch.
    assert_eq!(d.recv_batch, 1);
    assert!(d.recv_wr <= 20 && d.send_wr <= 20);
    // Between the two: the batch takes what is left over.
    let d = Depths::for_device(CREDITS + BC_CREDITS + 1 + 3, 100_000).unwrap();
    assert_eq!((d.credits, d.recv_batch), (CREDITS, 4));
    assert_eq!(Depths::for_device(3, 100), None);
    assert_eq!(Depths::for_device(0, 0), None);
    assert!(Depths::for_device(4, 100).is_some());
}

#[test]
fn a_roomy_send_queue_sets_room_apart_for_unsignaled_replies() {
    let d = Depths::for_device(16384, 65536).unwrap();
    // What accept passes: 16 Replies of 2 requests at most.
    let s = d.send_split(d.send_wr, 16, 2);
    assert_eq!(s.unsignaled, 16);
    // The drain's request and the unsignaled room come off the queue.
    assert_eq!(s.slots, d.send_wr - 1 - 16 * 2);
    // A QP with fewer requests than asked for: its queue counts.
    let s = d.send_split(1000, 16, 2);
    assert_eq!((s.slots, s.unsignaled), (1000 - 1 - 32, 16));
}

#[test]
fn a_small_send_queue_has_no_unsignaled_room() {
    let d = Depths::for_device(16384, 65536).unwrap();
    // 4 x 32 = 128 requests needed to spare the room; one short of it.
    let s = d.send_split(128, 16, 2);
    assert_eq!((s.slots, s.unsignaled), (127, 0));
    let s = d.send_split(129, 16, 2);
    assert_eq!((s.slots, s.unsignaled), (128 - 32, 16));
    // Nothing at all, or only the drain's request: no slot.
    assert_eq!(d.send_split(0, 16, 2).slots, 0);
    assert_eq!(d.send_split(1, 16, 2).slots, 0);
}

#[test]
fn contexts_start_at_a_quarter_of_the_credits_and_end_at_eight_each() {
    let d = Depths::for_device(16384, 65536).unwrap();
    let c = d.contexts();
    assert_eq!((c.initial, c.max), (CREDITS / 4, CREDITS * 8));
    // One credit still gets one context at first.
    let d = Depths::for_device(4, 100).unwrap();
    assert_eq!(d.credits, 1);
    assert_eq!((d.contexts().initial, d.contexts().max), (1, 8));
}

proptest! {
    #[test]
    fn the_send_split_never_exceeds_the_queue(
        wr in 0u32..100_000,
        cqe in 0u32..100_000,
        qp in 0u32..100_000,
        max in 0u32..64,
        each in 0u32..8,
    ) {
        if let Some(d) = Depths::for_device(wr, cqe) {
            let s = d.send_split(qp, max, each);
            let queue = qp.min(d.send_wr).saturating_sub(1);
            prop_assert!(s.slots + s.unsignaled * each <= queue);
            prop_assert!(s.unsignaled == 0 || s.unsignaled == max);
            let c = d.contexts();
            prop_assert!(1 <= c.initial && c.initial <= c.max);
        }
    }

    #[test]
    fn depths_always_fit_the_device(wr in 0u32..100_000, cqe in 0u32..100_000) {
        if let Some(d) = Depths::for_device(wr, cqe) {
            prop_assert!(d.credits >= 1 && d.credits <= CREDITS);
            // Credits first: the most the device allows, up to CREDITS.
            prop_assert_eq!(d.credits, CREDITS.min(wr.min(cqe) - 1 - BC_CREDITS));
            prop_assert!(d.recv_batch >= 1 && d.recv_batch <= RECV_BATCH);
            // Every credit and backchannel slot is covered while up to
            // recv_batch - 1 released buffers wait to be posted.
            prop_assert_eq!(d.recv_buffers, d.credits + BC_CREDITS + d.recv_batch - 1);
            prop_assert!(d.recv_wr <= wr.min(cqe));
            prop_assert!(d.send_wr <= wr.min(cqe));
            prop_assert_eq!(d.recv_buffers + 1, d.recv_wr);
            // The send queue: what the credits need, or the largest
            // 2^k - 1 below it, never less than half of it.
            let want = (d.credits * SEND_WR_PER_RPC).min(wr.min(cqe) - 1) + 1;
            prop_assert!(d.send_wr <= want && d.send_wr >= want / 2);
            prop_assert!(d.send_wr == want || (d.send_wr + 1).is_power_of_two());
            prop_assert!(d.send_wr > SEND_WR_PER_RPC || d.send_wr == want);
        }
    }
}

#[test]
fn our_message_says_our_buffer_sizes_and_the_r_bit() {
    let m = decode(&server_private(true).encode());
    assert_eq!(
        (m.send_size, m.recv_size, m.remote_invalidate),
        (SEND_SIZE, RECV_SIZE, true)
    );
    assert!(!decode(&server_private(false).encode()).remote_invalidate);
}

#[test]
fn inline_replies_respect_the_clients_receive_size() {
    let c = |recv| CmPrivate {
        remote_invalidate: false,
        send_size: 1024,
        recv_size: recv,
    };
    // A client with the default 1024-byte buffers gets no more than 1024.
    assert_eq!(max_inline_reply(&c(1024)), 1024);
    assert_eq!(max_inline_reply(&c(2048)), 2048);
    // Never more than we send inline.
    assert_eq!(max_inline_reply(&c(262_144)), SEND_SIZE);
    assert_eq!(max_inline_reply(&CmPrivate::DEFAULT), 1024);
}
