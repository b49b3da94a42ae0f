// SPDX-License-Identifier: GPL-2.0

//! A client transport (`struct rpc_xprt`) as its implementation sees it,
//! and the requests (`struct rpc_rqst`) sunrpc hands it.
//!
//! sunrpc owns a transport once its class's `setup` has returned it: the
//! reference count (`xprt_get()`, `xprt_put()`) ends in the class's
//! `destroy` op, which frees it with `xprt_free()`. Replies are matched to
//! their requests under the transport's `queue_lock`, as sunrpc's own
//! transports do.

use core::marker::PhantomData;

use kernel::{prelude::*, str::CString, types::Opaque};

use crate::bindings;

/// An `rpc_xprt`, borrowed from sunrpc.
#[repr(transparent)]
pub(crate) struct RpcXprt(Opaque<bindings::rpc_xprt>);

// sunrpc shares transports between threads and guards their state with its
// own locks and atomic bit operations.
// SAFETY: this type only offers such accesses, or writes to a transport
// nobody else can see yet.
unsafe impl Sync for RpcXprt {}
// SAFETY: as above; a transport is not tied to a thread.
unsafe impl Send for RpcXprt {}

/// Why a Reply was not delivered to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplyMiss {
    /// No request waits for that XID (answered already, given up, or never
    /// sent).
    NoRequest,
    /// The request's receive buffer has room for fewer bytes than the
    /// Reply.
    TooLong {
        /// Bytes the receive buffer holds.
        room: usize,
    },
}

/// The transport's `queue_lock`, held while this lives.
struct QueueLock<'a>(&'a RpcXprt);

impl<'a> QueueLock<'a> {
    fn lock(x: &'a RpcXprt) -> Self {
        // SAFETY: a live transport; unlocked when the guard drops.
        unsafe { bindings::svcrdma_rs_rpc_xprt_queue_lock(x.as_ptr()) };
        Self(x)
    }
}

impl Drop for QueueLock<'_> {
    fn drop(&mut self) {
        // SAFETY: locked by `QueueLock::lock`, on this thread.
        unsafe { bindings::svcrdma_rs_rpc_xprt_queue_unlock(self.0.as_ptr()) };
    }
}

impl RpcXprt {
    /// Allocates a transport of `size` bytes, its `rpc_xprt` first and the
    /// rest zeroed, with `slots` request slots (all preallocated), in
    /// namespace `net`. It holds one reference, the caller's; until it is
    /// handed to sunrpc, [`RpcXprt::free`] releases it.
    ///
    /// # Safety
    ///
    /// `net` must be a live network namespace.
    pub(super) unsafe fn alloc(
        net: *mut bindings::net,
        size: usize,
        slots: u32,
    ) -> Result<*mut bindings::rpc_xprt> {
        if size < core::mem::size_of::<bindings::rpc_xprt>() {
            return Err(EINVAL);
        }
        // SAFETY: `net` is live (caller's promise); sunrpc takes its own
        // reference on it.
        let x = unsafe { bindings::xprt_alloc(net, size, slots, slots) };
        if x.is_null() {
            return Err(ENOMEM);
        }
        Ok(x)
    }

    /// Frees a transport (`xprt_free()`: its slots, its namespace
    /// reference, the memory after an RCU grace period).
    ///
    /// # Safety
    ///
    /// `ptr` must come from [`RpcXprt::alloc`], and nothing may refer to
    /// it any more: never handed to sunrpc, or its last reference gone (the
    /// class's `destroy` op).
    pub(super) unsafe fn free(ptr: *mut bindings::rpc_xprt) {
        // SAFETY: per the function's safety requirements.
        unsafe { bindings::xprt_free(ptr) };
    }

    /// Borrows the transport behind a pointer sunrpc passed us.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live `rpc_xprt` that stays valid for `'a`.
    pub(super) unsafe fn from_raw<'a>(ptr: *mut bindings::rpc_xprt) -> &'a Self {
        // SAFETY: `RpcXprt` is a transparent wrapper of `Opaque<rpc_xprt>`;
        // validity is the caller's promise.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::rpc_xprt {
        self.0.get()
    }

    /// Takes one more reference.
    pub(super) fn get(&self) {
        // SAFETY: a live transport has a reference count above zero, so
        // this always succeeds; its result is the transport itself.
        unsafe { bindings::xprt_get(self.as_ptr()) };
    }

    /// Fills in a new transport that rides on a connection someone else
    /// made (a backchannel): always bound and connected, never idle-closed
    /// or reconnected. It gets its class, ops, protocol number and largest
    /// RPC payload, the server transport it rides on, and a major timeout
    /// of `timeout_ms` stored in `timeout` (which must live as long as the
    /// transport: e.g. in the same allocation).
    ///
    /// # Safety
    ///
    /// The transport must be new (from [`RpcXprt::alloc`], not yet handed
    /// to sunrpc); `class`, `ops` and `timeout` must outlive it; `server`
    /// must stay valid while sunrpc may call the transport's ops.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn init_connected(
        &self,
        class: *const bindings::xprt_class,
        ops: &'static bindings::rpc_xprt_ops,
        prot: i32,
        max_payload: usize,
        server: *mut bindings::svc_xprt,
        timeout: *mut bindings::rpc_timeout,
        timeout_ms: u32,
    ) {
        let jiffies = kernel::time::msecs_to_jiffies(timeout_ms);
        // Nobody else sees the transport yet (caller's promise): these plain
        // writes race with nothing.
        // SAFETY: so; and `timeout` is writable and outlives the transport.
        unsafe {
            let x = self.as_ptr();
            timeout.write(bindings::rpc_timeout {
                to_initval: jiffies,
                to_maxval: jiffies,
                ..Default::default()
            });
            (*x).timeout = timeout;
            (*x).xprt_class = class;
            (*x).ops = ops;
            (*x).prot = prot;
            (*x).max_payload = max_payload;
            (*x).bind_timeout = 0;
            (*x).reestablish_timeout = 0;
            (*x).idle_timeout = 0;
            (*x).bc_xprt = server;
            bindings::svcrdma_rs_xprt_set_bound(x);
            bindings::svcrdma_rs_xprt_set_connected(x);
        }
    }

    /// Records the peer's address (`len` bytes at `sa`) and the strings
    /// sunrpc shows for it: the address and port, `proto` and `netid`.
    /// The address and port strings are allocated; free them with
    /// [`RpcXprt::free_peer_strings`].
    ///
    /// # Safety
    ///
    /// The transport must be new (as for [`RpcXprt::init_connected`]);
    /// `sa` must point to `len` readable bytes of an `AF_INET` or
    /// `AF_INET6` address.
    pub(super) unsafe fn set_peer(
        &self,
        sa: *const bindings::sockaddr,
        len: usize,
        proto: &'static CStr,
        netid: &'static CStr,
    ) -> Result {
        let x = self.as_ptr();
        // SAFETY: the transport is ours alone (caller's promise).
        let xr = unsafe { &mut *x };
        if len > core::mem::size_of_val(&xr.addr) {
            return Err(EBADF);
        }
        // SAFETY: `len` readable bytes at `sa` (caller's promise), and room
        // for them in `addr` (checked above); the two do not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(
                sa.cast::<u8>(),
                core::ptr::from_mut(&mut xr.addr).cast::<u8>(),
                len,
            )
        };
        xr.addrlen = len;
        let mut text = [0u8; 64];
        // SAFETY: `sa` is a valid address (caller's promise); `rpc_ntop`
        // writes at most `text.len()` bytes, NUL-terminated.
        let n = unsafe { bindings::rpc_ntop(sa, text.as_mut_ptr(), text.len()) };
        if n == 0 || n >= text.len() {
            return Err(EAFNOSUPPORT);
        }
        // SAFETY: as above.
        let port = unsafe { bindings::svcrdma_rs_rpc_get_port(sa) };
        let port = CString::try_from_fmt(fmt!("{}", port))?;
        // SAFETY: `text` is NUL-terminated (above).
        let addr_s = unsafe { bindings::svcrdma_rs_kstrdup(text.as_ptr()) };
        // SAFETY: a C string.
        let port_s = unsafe { bindings::svcrdma_rs_kstrdup(port.as_char_ptr()) };
        if addr_s.is_null() || port_s.is_null() {
            // SAFETY: each is null or fresh from `kstrdup`.
            unsafe {
                bindings::kfree(addr_s.cast());
                bindings::kfree(port_s.cast());
            }
            return Err(ENOMEM);
        }
        let s = &mut xr.address_strings;
        s[bindings::RPC_DISPLAY_ADDR as usize] = addr_s;
        s[bindings::RPC_DISPLAY_PORT as usize] = port_s;
        s[bindings::RPC_DISPLAY_PROTO as usize] = proto.as_char_ptr();
        s[bindings::RPC_DISPLAY_NETID as usize] = netid.as_char_ptr();
        Ok(())
    }

    /// Frees the strings [`RpcXprt::set_peer`] allocated (the address
    /// string may have been replaced through sunrpc's sysfs since, with
    /// another allocated one).
    ///
    /// # Safety
    ///
    /// Nobody else may use the transport any more (its `destroy` op).
    pub(super) unsafe fn free_peer_strings(&self) {
        // SAFETY: ours alone (caller's promise).
        let s = unsafe { &mut (*self.as_ptr()).address_strings };
        for i in [bindings::RPC_DISPLAY_ADDR, bindings::RPC_DISPLAY_PORT] {
            let p = s[i as usize];
            s[i as usize] = core::ptr::null();
            // SAFETY: null, or allocated by `set_peer` (or sunrpc's sysfs)
            // with kmalloc and referred to by nothing else.
            unsafe { bindings::kfree(p.cast()) };
        }
    }

    /// The server transport a backchannel rides on (set by
    /// [`RpcXprt::init_connected`]).
    pub(super) fn server(&self) -> *mut bindings::svc_xprt {
        // SAFETY: a live transport; `bc_xprt` is written once, before
        // sunrpc sees the transport.
        unsafe { (*self.as_ptr()).bc_xprt }
    }

    /// Marks the transport disconnected and wakes the requests waiting on
    /// it, which fail (`xprt_disconnect_done()`).
    pub(crate) fn disconnect_done(&self) {
        // SAFETY: a live transport; sunrpc takes its own locks.
        unsafe { bindings::xprt_disconnect_done(self.as_ptr()) };
    }

    /// Sets the congestion window to `calls` requests at once (the
    /// transport's `reserve_xprt_cong` admits no more).
    pub(crate) fn set_window(&self, calls: u32) {
        let x = self.as_ptr();
        // SAFETY: a live transport; `cwnd` is guarded by `transport_lock`.
        unsafe {
            bindings::svcrdma_rs_rpc_xprt_transport_lock(x);
            (*x).cwnd = (calls as c_ulong) << bindings::RPC_CWNDSHIFT;
            bindings::svcrdma_rs_rpc_xprt_transport_unlock(x);
        }
    }

    /// Delivers `reply` to the request waiting for `xid` (host order):
    /// copies it into the request's receive buffer and completes the
    /// request, waking its task.
    pub(crate) fn complete_reply(&self, xid: u32, reply: &[u8]) -> Result<(), ReplyMiss> {
        let len = c_int::try_from(reply.len()).map_err(|_| ReplyMiss::TooLong { room: 0 })?;
        let _guard = QueueLock::lock(self);
        // SAFETY: a live transport, its `queue_lock` held; the XID goes in
        // network order, as it was on the wire.
        let req = unsafe { bindings::xprt_lookup_rqst(self.as_ptr(), xid.to_be()) };
        if req.is_null() {
            return Err(ReplyMiss::NoRequest);
        }
        // A request waiting for its reply is on the receive queue, which
        // sunrpc enters only after copying `rq_rcv_buf` to
        // `rq_private_buf`: both describe the same receive buffer, and
        // `xprt_complete_rqst()` records the length in the private copy.
        // SAFETY: found under `queue_lock`, which keeps it on the queue
        // (and so alive) until we complete it.
        let head = unsafe { (*req).rq_private_buf.head[0] };
        if head.iov_base.is_null() || head.iov_len < reply.len() {
            return Err(ReplyMiss::TooLong { room: head.iov_len });
        }
        // The head kvec is the request's own receive buffer, with room for
        // the reply (checked); nothing reads it until it is completed here.
        // SAFETY: so the copy stays inside memory nobody else uses now.
        unsafe {
            core::ptr::copy_nonoverlapping(reply.as_ptr(), head.iov_base.cast::<u8>(), reply.len());
            bindings::xprt_complete_rqst((*req).rq_task, len);
        }
        Ok(())
    }
}

/// An `rpc_rqst` sunrpc passed to one of a transport's ops.
///
/// # Invariants
///
/// `ptr` is a live request, not released while `'a` lasts.
pub(crate) struct RpcRqst<'a> {
    ptr: *mut bindings::rpc_rqst,
    _p: PhantomData<&'a bindings::rpc_rqst>,
}

impl<'a> RpcRqst<'a> {
    /// Borrows the request sunrpc passed to an op.
    ///
    /// # Safety
    ///
    /// `ptr` must be a live request that stays so for `'a` (true during a
    /// transport op that was given it).
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::rpc_rqst) -> Self {
        // INVARIANT: the caller's promise.
        Self {
            ptr,
            _p: PhantomData,
        }
    }

    fn r(&self) -> &bindings::rpc_rqst {
        // SAFETY: live (invariant).
        unsafe { &*self.ptr }
    }

    /// The transport the request is on.
    pub(crate) fn xprt(&self) -> &'a RpcXprt {
        // SAFETY: a live request holds its transport.
        unsafe { RpcXprt::from_raw(self.r().rq_xprt) }
    }

    /// The request's XID, host order.
    pub(crate) fn xid(&self) -> u32 {
        u32::from_be(self.r().rq_xid)
    }

    /// The length of the encoded RPC Call.
    pub(crate) fn send_len(&self) -> usize {
        self.r().rq_snd_buf.len as usize
    }

    /// Copies the encoded RPC Call (head, pages, tail of `rq_snd_buf`) to
    /// the start of `dst`; returns its length. Fails with `EMSGSIZE` if it
    /// does not fit, `EINVAL` if the buffer is inconsistent.
    pub(crate) fn copy_call(&self, dst: &mut [u8]) -> Result<usize> {
        let b = &self.r().rq_snd_buf;
        let total = b.len as usize;
        let dst = dst.get_mut(..total).ok_or(EMSGSIZE)?;
        let mut at = 0usize;
        // SAFETY: the head kvec describes that many readable bytes, which
        // do not change during the op.
        unsafe { copy_piece(dst, &mut at, b.head[0].iov_base.cast(), b.head[0].iov_len) }?;
        let page_size = crate::sunrpc::PAGE_SIZE;
        let (mut base, mut left) = (b.page_base as usize, b.page_len as usize);
        while left > 0 && at < total {
            let off = base % page_size;
            let n = (page_size - off).min(left);
            // SAFETY: the page array covers `page_base + page_len` bytes.
            let page = unsafe { *b.pages.add(base / page_size) };
            // SAFETY: a page of the send buffer, live during the op.
            let page = unsafe { super::rqst::borrow_page(page) }.ok_or(EINVAL)?;
            let d = dst.get_mut(at..).ok_or(EINVAL)?;
            let n = n.min(d.len());
            // SAFETY: `d` has room for `n` bytes; nothing writes the send
            // buffer during the op; the bounds in the page are checked.
            unsafe { page.read_raw(d.as_mut_ptr(), off, n) }?;
            at += n;
            base += n;
            left -= n;
        }
        // SAFETY: as for the head.
        unsafe { copy_piece(dst, &mut at, b.tail[0].iov_base.cast(), b.tail[0].iov_len) }?;
        if at != dst.len() {
            return Err(EINVAL);
        }
        Ok(at)
    }

    /// Allocates the request's buffers (its `buf_alloc` op): one
    /// allocation for the Call (`rq_callsize` bytes, `rq_buffer`) and the
    /// Reply (`rq_rcvsize`, `rq_rbuffer`), with the allocation flags
    /// sunrpc uses for its own (`rpc_task_gfp_mask()`: no retrying in
    /// rpciod). A transport that copies the Call out needs nothing more.
    pub(crate) fn alloc_buffers(&mut self) -> Result {
        let (call, rcv) = (self.r().rq_callsize, self.r().rq_rcvsize);
        let size = call.checked_add(rcv).ok_or(ENOMEM)?;
        // SAFETY: plain allocations, from the task's context.
        let buf = unsafe { bindings::svcrdma_rs_kmalloc(size, bindings::rpc_task_gfp_mask()) };
        if buf.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: live and ours during the op (invariant); `call` bytes
        // into the `size`-byte allocation is within it.
        unsafe {
            (*self.ptr).rq_buffer = buf;
            (*self.ptr).rq_rbuffer = buf.cast::<u8>().add(call).cast();
        }
        Ok(())
    }

    /// Frees what [`RpcRqst::alloc_buffers`] allocated (its `buf_free`
    /// op).
    pub(crate) fn free_buffers(&mut self) {
        // SAFETY: live and ours during the op (invariant); `rq_buffer` is
        // null or our allocation, which nothing uses any more.
        unsafe {
            bindings::kfree((*self.ptr).rq_buffer);
            (*self.ptr).rq_buffer = core::ptr::null_mut();
            (*self.ptr).rq_rbuffer = core::ptr::null_mut();
        }
    }

    /// Records the transmit time (`rq_xtime`, for sunrpc's round-trip
    /// statistics).
    pub(crate) fn stamp_transmit(&mut self) {
        // SAFETY: live (invariant); the transport op that has the request
        // is the only writer of `rq_xtime` while it runs.
        unsafe { (*self.ptr).rq_xtime = bindings::ktime_get() };
    }
}

/// Copies up to `n` bytes from `src` to `dst` at `*at` (no further than
/// `dst`'s end), advancing `*at`.
///
/// # Safety
///
/// `src` must be null or point to `n` readable bytes that do not change
/// while this runs.
unsafe fn copy_piece(dst: &mut [u8], at: &mut usize, src: *const u8, n: usize) -> Result {
    let n = n.min(dst.len() - *at);
    if n == 0 {
        return Ok(());
    }
    if src.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `n` readable bytes (function contract).
    let s = unsafe { core::slice::from_raw_parts(src, n) };
    dst[*at..*at + n].copy_from_slice(s);
    *at += n;
    Ok(())
}
