// SPDX-License-Identifier: GPL-2.0

//! Tracepoints (`events/svcrdma_rs/` in tracefs; defined in
//! `include/svcrdma_rs_trace.h`), as safe functions. Each call formats its
//! strings into a small stack buffer and calls the C wrapper, which tests
//! the tracepoint's static key: so the events sit only where the C
//! transport has them, on connection set-up and error paths, never once
//! per RPC.

use core::fmt::{self, Write};

use crate::bindings;

/// A NUL-terminated copy of a value's text, cut at 63 bytes.
struct CText {
    buf: [u8; 64],
    len: usize,
}

impl CText {
    fn of(v: fmt::Arguments<'_>) -> Self {
        let mut t = Self {
            buf: [0; 64],
            len: 0,
        };
        // A value longer than the buffer is cut; that is not an error.
        let _ = t.write_fmt(v);
        t
    }

    fn as_ptr(&self) -> *const kernel::ffi::c_char {
        self.buf.as_ptr().cast()
    }
}

impl Write for CText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            // Keep the last byte for the NUL (the buffer starts zeroed).
            if self.len + 1 >= self.buf.len() {
                return Err(fmt::Error);
            }
            // A NUL inside would end the C string early: shown as '?'.
            self.buf[self.len] = if b == 0 { b'?' } else { b };
            self.len += 1;
        }
        Ok(())
    }
}

/// A connection was accepted.
pub(crate) fn accept(conn: u64, peer: fmt::Arguments<'_>, device: fmt::Arguments<'_>, model: &str) {
    let (p, d, m) = (
        CText::of(peer),
        CText::of(device),
        CText::of(format_args!("{model}")),
    );
    // SAFETY: the strings are NUL-terminated and outlive the call.
    unsafe { bindings::svcrdma_rs_trace_accept(conn, p.as_ptr(), d.as_ptr(), m.as_ptr()) };
}

/// A connection request was refused.
pub(crate) fn reject(
    peer: fmt::Arguments<'_>,
    device: fmt::Arguments<'_>,
    reason: fmt::Arguments<'_>,
) {
    let (p, d, r) = (CText::of(peer), CText::of(device), CText::of(reason));
    // SAFETY: the strings are NUL-terminated and outlive the call.
    unsafe { bindings::svcrdma_rs_trace_reject(p.as_ptr(), d.as_ptr(), r.as_ptr()) };
}

/// A transport header was refused (`xid` 0 if it had none).
pub(crate) fn decode_err(conn: u64, xid: u32, reason: &str) {
    let r = CText::of(format_args!("{reason}"));
    // SAFETY: the string is NUL-terminated and outlives the call.
    unsafe { bindings::svcrdma_rs_trace_decode_err(conn, xid, r.as_ptr()) };
}

/// An RDMA_ERROR (`err`: 1 ERR_VERS, 2 ERR_CHUNK) goes out.
pub(crate) fn rdma_error(conn: u64, xid: u32, err: u32) {
    // SAFETY: plain values.
    unsafe { bindings::svcrdma_rs_trace_rdma_error(conn, xid, err) };
}

/// Posting `wrs` work requests failed with `rc`.
pub(crate) fn post_err(conn: u64, wrs: u32, rc: i32) {
    // SAFETY: plain values.
    unsafe { bindings::svcrdma_rs_trace_post_err(conn, wrs, rc) };
}

/// A work request completed with an error (not a flush).
pub(crate) fn wc_err(conn: u64, status: u32, vendor_err: u32) {
    // SAFETY: plain values.
    unsafe { bindings::svcrdma_rs_trace_wc_err(conn, status, vendor_err) };
}

/// A QP event that closes the connection.
pub(crate) fn qp_err(conn: u64, event: u32) {
    // SAFETY: plain values.
    unsafe { bindings::svcrdma_rs_trace_qp_err(conn, event) };
}

/// A CM event that ends the connection (disconnect, device removal, ...).
pub(crate) fn cm_event(conn: u64, event: u32) {
    // SAFETY: plain values.
    unsafe { bindings::svcrdma_rs_trace_cm_event(conn, event) };
}

/// An nfsd thread waits for `wrs` send-queue slots.
pub(crate) fn sq_wait(conn: u64, wrs: u32) {
    // SAFETY: plain values.
    unsafe { bindings::svcrdma_rs_trace_sq_wait(conn, wrs) };
}
