// SPDX-License-Identifier: GPL-2.0

//! What sunrpc calls on a backchannel, the client transport that sends
//! the server's callbacks over one of its connections (`struct
//! rpc_xprt_ops`, and the `setup` of its `struct xprt_class`), as a trait.
//!
//! A transport implements [`BcOps`] with safe types. Its `setup` builds a
//! [`NewBackchannel`] ([`super::ClientClass::new_backchannel`]) and binds it to
//! the connection ([`NewBackchannel::bind`]), which yields the
//! [`BoundBackchannel`] sunrpc gets; the other ops see the request as an
//! [`RpcRqst`] and the connection as a [`SvcXprt`]. [`Adapter`] holds
//! every `extern "C"` entry point and the raw pointers they carry, and
//! `destroy` is its own: it frees the transport and then puts the module
//! reference the transport held.

use core::{marker::PhantomData, ptr::NonNull};

use kernel::prelude::*;

use super::{module_ref::ModuleRef, RpcRqst, RpcXprt, SvcXprt};
use crate::bindings;

/// A backchannel's operations, called by sunrpc.
///
/// Slots, congestion window and waiting for Replies are sunrpc's generic
/// ones; there is no connect, bind or timer: a backchannel is connected
/// for as long as its connection is.
#[vtable]
pub(crate) trait BcOps: Sized + 'static {
    /// The class's `setup` (`xprt_create_transport()`, in process context,
    /// sunrpc holding a reference on the class's module): a backchannel
    /// bound to the connection `args` names, with the reference that goes
    /// to the caller.
    fn setup(args: &SetupArgs<'_>) -> Result<BoundBackchannel>;

    /// `send_request` (`xprt_request_transmit()`, in rpciod or the thread
    /// of a synchronous task, with the transport's send lock `XPRT_LOCKED`
    /// held and no spinlock): sends `rq`'s Call over `server`, the
    /// connection the backchannel rides on. sunrpc's
    /// `call_transmit_status()` decides from the error whether the task
    /// retries or fails.
    fn send_request(server: &SvcXprt, rq: &mut RpcRqst<'_>) -> Result;

    /// `buf_alloc` (`call_allocate()`, the task's context): the request's
    /// Call and Reply buffers. `ENOMEM` makes the task retry after a short
    /// delay; any other error fails it.
    fn buf_alloc(rq: &mut RpcRqst<'_>) -> Result;

    /// `buf_free` (`xprt_release()`): frees what `buf_alloc` allocated.
    fn buf_free(rq: &mut RpcRqst<'_>);

    /// `close` (process context): sunrpc deletes the connection the
    /// backchannel rides on (`svc_delete_xprt()`), or closes the transport
    /// itself (`xprt_autoclose()`, with `XPRT_LOCKED` held).
    fn close(x: &RpcXprt);
}

/// The arguments of a backchannel class's `setup` (`struct xprt_create`).
///
/// # Invariants
///
/// `raw` is valid for `'a`, during a `setup` of one of this module's
/// classes, for which sunrpc holds a reference on this module. Its `net`
/// is live; `bc_xprt` is a live, initialized server transport, on which
/// the caller holds a reference for as long as it may call the ops of the
/// transport it gets (nfsd's callback client keeps its connection); and
/// `dstaddr` points to `addrlen` readable bytes of the peer's address.
pub(crate) struct SetupArgs<'a> {
    raw: &'a bindings::xprt_create,
}

impl<'a> SetupArgs<'a> {
    /// The server transport (a connection) the backchannel is for.
    pub(crate) fn server(&self) -> &'a SvcXprt {
        // SAFETY: live and held for `'a` (invariant).
        unsafe { SvcXprt::from_raw(self.raw.bc_xprt) }
    }

    /// Whether the peer's address is an IPv6 one.
    pub(crate) fn is_ipv6(&self) -> bool {
        // SAFETY: `dstaddr` points to the peer's address (invariant).
        let family = unsafe { (*self.raw.dstaddr).sa_family };
        u32::from(family) == bindings::AF_INET6
    }
}

/// How [`super::ClientClass::new_backchannel`] sets up a backchannel.
pub(crate) struct BcParams {
    /// Request slots, all preallocated: the most Calls outstanding at once.
    pub(crate) slots: u32,
    /// The largest RPC message it sends.
    pub(crate) max_payload: usize,
    /// How long a Call waits for its Reply unless its client says
    /// otherwise, in milliseconds.
    pub(crate) timeout_ms: u32,
    /// The protocol name sunrpc shows for the peer.
    pub(crate) proto: &'static CStr,
    /// The network identifier sunrpc shows for the peer.
    pub(crate) netid: &'static CStr,
}

/// A backchannel's memory, allocated by `xprt_alloc()` (zeroed) and freed
/// by `xprt_free()`: sunrpc's part first, then what lives as long as it.
/// Only ever reached through raw pointers.
#[repr(C)]
struct BcAlloc {
    xprt: bindings::rpc_xprt,
    /// The timeout sunrpc reads through `xprt.timeout`.
    timeout: bindings::rpc_timeout,
    /// The module reference of a bound backchannel, put once `destroy` has
    /// freed it.
    module: Option<ModuleRef>,
}

// `kmalloc()` aligns its memory to at least 8 bytes.
const _: () = assert!(core::mem::align_of::<BcAlloc>() <= 8);

impl BcAlloc {
    /// The transport.
    ///
    /// # Safety
    ///
    /// `a` must be live for `'b`.
    unsafe fn xprt<'b>(a: NonNull<Self>) -> &'b RpcXprt {
        // SAFETY: the `rpc_xprt` is the first field of a `#[repr(C)]`
        // struct, live for `'b` (the caller's promise).
        unsafe { RpcXprt::from_raw(a.as_ptr().cast()) }
    }

    /// Frees a backchannel's memory and returns the module reference it
    /// held, to be dropped after (this module's code is still running).
    ///
    /// # Safety
    ///
    /// `a` must come from [`super::ClientClass::new_backchannel`] (which wrote
    /// `module`) and nothing may refer to it any more.
    unsafe fn free(a: NonNull<Self>) -> Option<ModuleRef> {
        let p = a.as_ptr();
        // SAFETY: written and ours alone (the caller's promise).
        let module = unsafe { (*p).module.take() };
        // The peer strings are null or `set_peer`'s (or sunrpc's sysfs's),
        // and the memory is `xprt_alloc()`'s.
        // SAFETY: so, and nothing refers to the transport any more.
        unsafe {
            let x = Self::xprt(a);
            x.free_peer_strings();
            RpcXprt::free(x.as_ptr());
        }
        module
    }
}

/// A backchannel filled in (class, ops, connection, timeout, peer) and not
/// yet bound to its connection or seen by sunrpc. Dropped, it is freed.
///
/// # Invariants
///
/// `ptr` comes from `RpcXprt::alloc` with the size of a [`BcAlloc`], whose
/// `module` is written (`None`); it holds one reference and nobody else
/// knows it. A `setup` of one of this module's classes runs for `'a`, with
/// `server` its connection.
pub(crate) struct NewBackchannel<'a> {
    ptr: NonNull<BcAlloc>,
    server: &'a SvcXprt,
    owner: *mut bindings::module,
}

impl<'a> NewBackchannel<'a> {
    /// A new backchannel of the class at `class`, owned by `owner`, whose
    /// transports have the identifier `ident` and `O`'s operations, for
    /// the connection and peer of `args`, set up as `p` says
    /// ([`super::ClientClass::new_backchannel`]).
    ///
    /// Fails with `ENOMEM`, `EBADF` if the peer's address is longer than
    /// sunrpc keeps, or `EAFNOSUPPORT` if it is not an IPv4 or IPv6 one.
    ///
    /// # Safety
    ///
    /// `class` is a `'static` class registered with `O`'s `setup`, and
    /// `owner` is its owner, this module.
    pub(super) unsafe fn new<O: BcOps>(
        class: *mut bindings::xprt_class,
        owner: *mut bindings::module,
        ident: i32,
        args: &SetupArgs<'a>,
        p: &BcParams,
    ) -> Result<Self> {
        // SAFETY: the namespace of a running `setup` is live (`args`'
        // invariant).
        let raw = unsafe { RpcXprt::alloc(args.raw.net, size_of::<BcAlloc>(), p.slots) }?;
        let a = NonNull::new(raw.cast::<BcAlloc>()).ok_or(ENOMEM)?;
        // SAFETY: fresh, big enough for a `BcAlloc` and ours alone.
        unsafe { core::ptr::addr_of_mut!((*a.as_ptr()).module).write(None) };
        // INVARIANT: allocated with a `BcAlloc`'s size, `module` written,
        // unknown to anyone; `args` is a running `setup`'s.
        let bc = NewBackchannel {
            ptr: a,
            server: args.server(),
            owner,
        };
        // SAFETY: the allocation lives as long as `bc`.
        let x = unsafe { BcAlloc::xprt(a) };
        // SAFETY: in the allocation, which the transport is the start of.
        let timeout = unsafe { core::ptr::addr_of_mut!((*a.as_ptr()).timeout) };
        // The class (the function's safety requirement) and the ops are
        // `'static`, the timeout is part of the transport's allocation, and
        // the setup's caller keeps the connection while it may call the ops
        // (`args`' invariant).
        // SAFETY: so; and the transport is new and ours alone.
        unsafe {
            x.init_connected(
                class,
                Adapter::<O>::ops(),
                ident,
                p.max_payload,
                args.raw.bc_xprt,
                timeout,
                p.timeout_ms,
            )
        };
        // SAFETY: new and ours alone; `addrlen` readable bytes at
        // `dstaddr` (`args`' invariant).
        unsafe { x.set_peer(args.raw.dstaddr, args.raw.addrlen, p.proto, p.netid) }?;
        Ok(bc)
    }
}

impl NewBackchannel<'_> {
    /// Binds the backchannel to its connection (`xpt_bc_xprt`) if the
    /// connection has none yet. The link gets a reference of its own,
    /// which sunrpc drops when it frees the connection; the backchannel
    /// holds a reference on the class's module until sunrpc destroys it.
    ///
    /// Fails with `EAGAIN` if another `setup` bound one first; this one is
    /// then freed, never having been seen.
    pub(crate) fn bind(self) -> Result<BoundBackchannel> {
        let a = self.ptr;
        // A class's owner is the `ThisModule` its `register` got, which only
        // this module's init has: this module. sunrpc holds a reference on
        // it for the `setup` that runs while `self` lives (invariant).
        // SAFETY: so the module cannot start unloading meanwhile.
        let module = unsafe { ModuleRef::get(self.owner) };
        // SAFETY: `module` is written and nobody else knows the transport
        // yet (invariant); the old `None` needs no drop.
        unsafe { core::ptr::addr_of_mut!((*a.as_ptr()).module).write(Some(module)) };
        // SAFETY: live as long as `self`.
        let x = unsafe { BcAlloc::xprt(a) };
        // The link's reference.
        x.get();
        if !self.server.bind_backchannel(x) {
            // Dropping `self` frees the transport and puts the module.
            return Err(EAGAIN);
        }
        core::mem::forget(self);
        // INVARIANT: a transport of one of our classes, bound to its
        // connection, holding a module reference; the first reference from
        // `RpcXprt::alloc` goes with the value.
        Ok(BoundBackchannel { ptr: a })
    }
}

impl Drop for NewBackchannel<'_> {
    fn drop(&mut self) {
        // SAFETY: from `new_backchannel` and known to nobody (invariant),
        // so only this value refers to it.
        let module = unsafe { BcAlloc::free(self.ptr) };
        drop(module);
    }
}

/// A backchannel bound to its connection, with the reference a `setup`
/// returns to its caller. Dropped, that reference is put.
///
/// # Invariants
///
/// `ptr` is a transport built by [`super::ClientClass::new_backchannel`] and
/// bound by [`NewBackchannel::bind`]; this value owns one reference on it.
pub(crate) struct BoundBackchannel {
    ptr: NonNull<BcAlloc>,
}

impl BoundBackchannel {
    /// Hands the reference to sunrpc.
    fn into_raw(self) -> *mut bindings::rpc_xprt {
        let x = self.ptr.as_ptr().cast();
        core::mem::forget(self);
        x
    }
}

impl Drop for BoundBackchannel {
    fn drop(&mut self) {
        // SAFETY: a live transport on which this value owns a reference
        // (invariant), put once; the last put ends in `Adapter::destroy`.
        unsafe { bindings::xprt_put(self.ptr.as_ptr().cast()) };
    }
}

/// Builds the `rpc_xprt_ops` of a [`BcOps`] implementation, and its
/// class's `setup`.
pub(super) struct Adapter<O: BcOps>(PhantomData<O>);

impl<O: BcOps> Adapter<O> {
    /// The operations table sunrpc calls.
    const OPS: bindings::rpc_xprt_ops = bindings::rpc_xprt_ops {
        set_buffer_size: None,
        reserve_xprt: Some(bindings::xprt_reserve_xprt_cong),
        release_xprt: Some(bindings::xprt_release_xprt_cong),
        alloc_slot: Some(bindings::xprt_alloc_slot),
        free_slot: Some(bindings::xprt_free_slot),
        rpcbind: None,
        set_port: None,
        connect: None,
        get_srcaddr: None,
        get_srcport: None,
        buf_alloc: Some(Self::buf_alloc),
        buf_free: Some(Self::buf_free),
        prepare_request: None,
        send_request: Some(Self::send_request),
        abort_send_request: None,
        wait_for_reply_request: Some(bindings::xprt_wait_for_reply_request_def),
        timer: None,
        release_request: Some(bindings::xprt_release_rqst_cong),
        close: Some(Self::close),
        destroy: Some(Self::destroy),
        set_connect_timeout: None,
        print_stats: Some(Self::print_stats),
        enable_swap: None,
        disable_swap: None,
        inject_disconnect: None,
        bc_setup: None,
        bc_maxpayload: None,
        bc_num_slots: None,
        bc_free_rqst: None,
        bc_destroy: None,
    };

    /// [`Adapter::OPS`], for the transports to point at.
    const fn ops() -> &'static bindings::rpc_xprt_ops {
        &Self::OPS
    }

    /// The class's `setup`.
    ///
    /// # Safety
    ///
    /// Called by sunrpc only, per its `xprt_class` contract: valid
    /// creation arguments for the call, and a reference held on the
    /// class's module.
    pub(super) unsafe extern "C" fn setup(
        args: *mut bindings::xprt_create,
    ) -> *mut bindings::rpc_xprt {
        // SAFETY: sunrpc passes valid creation arguments for the call.
        let raw = unsafe { &*args };
        if raw.bc_xprt.is_null() || raw.dstaddr.is_null() {
            return EINVAL.to_ptr();
        }
        // INVARIANT: sunrpc's contract (a class of ours is set up, its
        // module held); the connection and address, checked non-null, are
        // nfsd's, which keeps the connection while its callback client
        // exists.
        let args = SetupArgs { raw };
        match O::setup(&args) {
            Ok(bc) => bc.into_raw(),
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with a live request on a transport of this
    /// class.
    unsafe extern "C" fn send_request(rqst: *mut bindings::rpc_rqst) -> c_int {
        // SAFETY: sunrpc passes a live request for the op's duration.
        let mut rq = unsafe { RpcRqst::from_raw(rqst) };
        // Only `new_backchannel` gives a transport these ops, with a
        // connection its setup's caller keeps while it calls them.
        // SAFETY: so the connection is live during the op.
        let server = unsafe { SvcXprt::from_raw(rq.xprt().server()) };
        match O::send_request(server, &mut rq) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with a live task that has a request.
    unsafe extern "C" fn buf_alloc(task: *mut bindings::rpc_task) -> c_int {
        // SAFETY: sunrpc passes a live task with its request.
        let mut rq = unsafe { RpcRqst::from_raw((*task).tk_rqstp) };
        match O::buf_alloc(&mut rq) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with a live task that has a request.
    unsafe extern "C" fn buf_free(task: *mut bindings::rpc_task) {
        // SAFETY: sunrpc passes a live task with its request.
        let mut rq = unsafe { RpcRqst::from_raw((*task).tk_rqstp) };
        O::buf_free(&mut rq);
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with a live transport of this class.
    unsafe extern "C" fn close(xprt: *mut bindings::rpc_xprt) {
        // SAFETY: sunrpc passes a live transport for the op's duration.
        O::close(unsafe { RpcXprt::from_raw(xprt) });
    }

    /// The last reference is gone (`xprt_destroy_cb()`, a workqueue):
    /// frees the transport, then puts its module reference.
    ///
    /// # Safety
    ///
    /// Called by sunrpc only, once, after the last reference to a transport
    /// of this class.
    unsafe extern "C" fn destroy(xprt: *mut bindings::rpc_xprt) {
        let Some(a) = NonNull::new(xprt.cast::<BcAlloc>()) else {
            return;
        };
        // Only `new_backchannel` gives a transport these ops; sunrpc calls
        // this once, when nothing refers to the transport any more.
        // SAFETY: so `free`'s requirements hold.
        let module = unsafe { BcAlloc::free(a) };
        drop(module);
    }

    /// Transport statistics (shown for NFS client mounts only): a
    /// backchannel has none of its own.
    ///
    /// # Safety
    ///
    /// Called by sunrpc only.
    unsafe extern "C" fn print_stats(
        _xprt: *mut bindings::rpc_xprt,
        _seq: *mut bindings::seq_file,
    ) {
    }
}
