// SPDX-License-Identifier: GPL-2.0

//! What sunrpc calls on a server transport class's transports
//! (`struct svc_xprt_ops`), as a trait.
//!
//! A transport implements [`XprtOps`] with safe types: its listener and
//! connection borrowed, the request as a [`Rqst`], its per-request context
//! owned (`KBox`). [`Adapter`] holds every `extern "C"` entry point and the
//! raw pointers they carry; [`NewXprt`] is a transport on its way to
//! sunrpc, freed through sunrpc if it never gets there.

use core::{marker::PhantomData, ops::Deref, ptr::NonNull};

use kernel::{prelude::*, sync::Arc};

use super::{ClassData, Rqst, SvcXprt};
use crate::{
    bindings,
    net::{IpSockAddr, NetRef},
};

/// A transport type embedding its `svc_xprt`: a listener or a connection.
///
/// # Safety
///
/// Implementers have a [`SvcXprt`] at offset 0 (a `#[repr(C)]` first field),
/// so that a pointer to the `svc_xprt` is a pointer to the object.
///
/// Implement it with [`impl_has_svc_xprt!`], which checks the layout.
pub(crate) unsafe trait HasSvcXprt: Sized + Send + Sync {
    /// The embedded generic transport.
    fn svc_xprt(&self) -> &SvcXprt {
        // SAFETY: at offset 0 of `Self` (the trait's safety requirement),
        // borrowed for as long as `self`.
        unsafe { &*core::ptr::from_ref(self).cast::<SvcXprt>() }
    }
}

/// Implements [`HasSvcXprt`] for `$t`, whose `SvcXprt` is `$field`; fails
/// to compile unless that field is a `SvcXprt` at offset 0.
macro_rules! impl_has_svc_xprt {
    ($($t:ty { $field:ident }),* $(,)?) => {$(
        const _: fn(&$t) -> &$crate::sunrpc::SvcXprt = |t| &t.$field;
        const _: () = assert!(core::mem::offset_of!($t, $field) == 0);
        // SAFETY: `$field`, a `SvcXprt`, is at offset 0 (both checked above).
        unsafe impl $crate::sunrpc::HasSvcXprt for $t {}
    )*};
}
pub(crate) use impl_has_svc_xprt;

/// A transport class's operations, called by sunrpc (`svc_xprt_ops`).
///
/// sunrpc holds a reference on the transport for each call; the request
/// belongs to the calling nfsd thread.
#[vtable]
pub(crate) trait XprtOps: Sized + 'static {
    /// A listening endpoint (`XPT_LISTENER`).
    type Listener: HasSvcXprt;
    /// An accepted connection.
    type Conn: HasSvcXprt;
    /// What a received Call carries to its Reply (`rq_xprt_ctxt`).
    type Ctxt: Send;
    /// What the class hands to every `xpo_create`, set when it is
    /// registered ([`super::XprtClass::register`]).
    type Data: Send + Sync;

    /// Where the class keeps its data while it is registered (sunrpc calls
    /// `xpo_create` with nothing of the class): its
    /// [`super::XprtClass::data`].
    fn class_data() -> &'static ClassData<Self::Data>;

    /// `xpo_create`: a listener on `args`' address, with the class's data.
    fn create(data: &Arc<Self::Data>, args: &CreateArgs<'_>) -> Result<NewXprt<Self::Listener>>;

    /// `xpo_accept`: the next connection of a listener, if one is ready.
    fn accept(l: &Self::Listener) -> Option<NewXprt<Self::Conn>>;

    /// `xpo_has_wspace`: whether the connection can take another thread
    /// without parking it.
    fn has_wspace(c: &Self::Conn) -> bool;

    /// `xpo_recvfrom`: receives the next Call into `rq`; its length, or 0
    /// when there is none for nfsd.
    fn recvfrom(c: &Self::Conn, rq: &mut Rqst<'_, Self::Ctxt>) -> usize;

    /// `xpo_sendto`: sends `rq`'s Reply; its length. An error closes the
    /// connection.
    fn sendto(c: &Self::Conn, rq: &mut Rqst<'_, Self::Ctxt>) -> Result<usize>;

    /// `xpo_result_payload`: nfsd placed `length` bytes of result data at
    /// `offset` of `rq`'s Reply.
    fn result_payload(rq: &mut Rqst<'_, Self::Ctxt>, offset: u32, length: u32) -> Result;

    /// `xpo_release_ctxt`: sunrpc is done with a request's context.
    fn release_ctxt(c: &Self::Conn, ctxt: KBox<Self::Ctxt>);

    /// `xpo_detach`: the connection is closing.
    fn detach(c: &Self::Conn);

    /// `xpo_free` of a listener: sunrpc's last reference is gone.
    fn free_listener(l: Pin<KBox<Self::Listener>>);

    /// `xpo_free` of a connection: sunrpc's last reference is gone.
    fn free_conn(c: Pin<KBox<Self::Conn>>);
}

/// The arguments of `xpo_create`.
///
/// # Invariants
///
/// `serv` and `net` are live for `'a`; `addr` points to a whole
/// `sockaddr_in` or `sockaddr_in6` (its family says which), valid for `'a`.
pub(crate) struct CreateArgs<'a> {
    pub(super) serv: *mut bindings::svc_serv,
    pub(super) net: *mut bindings::net,
    addr: *mut bindings::sockaddr,
    _p: PhantomData<&'a ()>,
}

impl<'a> CreateArgs<'a> {
    /// The network namespace to listen in, borrowed.
    pub(crate) fn net_ref(&self) -> Option<NetRef<'a>> {
        // SAFETY: `net` is live for `'a` (invariant).
        unsafe { NetRef::from_raw(self.net) }
    }

    /// A copy of the address to listen on.
    pub(crate) fn ip_addr(&self) -> Option<IpSockAddr> {
        // SAFETY: a whole `sockaddr_in` or `sockaddr_in6` (invariant).
        unsafe { IpSockAddr::copy_from(self.addr) }
    }
}

/// A transport initialized for sunrpc (`svc_xprt_init`) and not yet handed
/// to it, as `xpo_create` and `xpo_accept` return them. Dropped instead,
/// it puts its only reference, and sunrpc frees it through `xpo_free`.
///
/// # Invariants
///
/// `ptr` comes from leaking a pinned `KBox<T>`; its `svc_xprt` is
/// initialized for a class whose operations free a `T` (with
/// `XPT_LISTENER` set if and only if `T` is the class's listener), holds
/// one reference, and sunrpc does not know it.
pub(crate) struct NewXprt<T: HasSvcXprt> {
    ptr: NonNull<T>,
}

impl<T: HasSvcXprt> NewXprt<T> {
    /// Leaks `obj` and initializes its transport.
    ///
    /// # Safety
    ///
    /// `class` frees a `T` in `xpo_free`: `T` is its listener type and
    /// `listener` is true, or its connection type and `listener` false.
    pub(super) unsafe fn init(
        obj: Pin<KBox<T>>,
        class: *mut bindings::svc_xprt_class,
        net: *mut bindings::net,
        serv: *mut bindings::svc_serv,
        listener: bool,
    ) -> Self {
        // SAFETY: the object is never moved out of its allocation: it is
        // freed in place, as a pinned box, by `Adapter::free`.
        let ptr = KBox::into_raw(unsafe { Pin::into_inner_unchecked(obj) });
        // SAFETY: `into_raw` never returns null.
        let ptr = unsafe { NonNull::new_unchecked(ptr) };
        // SAFETY: `ptr` is live and nothing else refers to it yet.
        let x = unsafe { ptr.as_ref() }.svc_xprt();
        // SAFETY: the first and only init, before anyone else sees the
        // object; `net` and `serv` are live (callers'), `class` registered.
        unsafe { bindings::svc_xprt_init(net, class, x.as_ptr(), serv) };
        if listener {
            x.set_listener();
        }
        // INVARIANT: leaked from a pinned box, initialized for `class`,
        // one reference, not yet known to sunrpc.
        Self { ptr }
    }

    /// The transport, pinned (it never moves: invariant).
    pub(crate) fn as_pin(&self) -> Pin<&T> {
        // SAFETY: leaked from a pinned box and freed in place (invariant).
        unsafe { Pin::new_unchecked(&**self) }
    }

    /// Records the local address (shown by sunrpc, used to find listeners).
    pub(crate) fn set_local(&self, addr: &IpSockAddr) {
        // SAFETY: a whole `sockaddr_in`/`sockaddr_in6` (`IpSockAddr`);
        // sunrpc does not know the transport yet (invariant).
        unsafe { self.svc_xprt().set_local(addr.as_ptr()) };
    }

    /// Records the peer's address (port cleared: see
    /// [`SvcXprt::set_remote`]).
    pub(crate) fn set_remote(&self, addr: &IpSockAddr) {
        // SAFETY: as for `set_local`.
        unsafe { self.svc_xprt().set_remote(addr.as_ptr()) };
    }

    /// Hands the transport to sunrpc, which frees it through `xpo_free`.
    fn into_raw(self) -> *mut bindings::svc_xprt {
        let x = self.svc_xprt().as_ptr();
        core::mem::forget(self);
        x
    }
}

impl<T: HasSvcXprt> Deref for NewXprt<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: live until dropped or handed to sunrpc (invariant).
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: HasSvcXprt> Drop for NewXprt<T> {
    fn drop(&mut self) {
        let x = self.svc_xprt().as_ptr();
        // `svc_xprt_free()` puts a module reference when the transport goes;
        // one handed to sunrpc brought sunrpc's own (taken for the
        // `xpo_create` or `xpo_accept` call), one dropped here did not
        // (sunrpc puts that for the failed call): take one for it.
        // SAFETY: `xpt_class` was set at init to a registered class, whose
        // owner is this module, live: we are running.
        unsafe { bindings::__module_get((*(*x).xpt_class).xcl_owner) };
        // SAFETY: the only reference (invariant); `xpo_free` frees the
        // object as a `T`.
        unsafe { bindings::svc_xprt_put(x) };
    }
}

/// Builds the `svc_xprt_ops` of an [`XprtOps`] implementation.
pub(crate) struct Adapter<O: XprtOps>(PhantomData<O>);

/// Which of a class's types a transport pointer from sunrpc is.
enum Ours<'a, O: XprtOps> {
    Listener(&'a O::Listener),
    Conn(&'a O::Conn),
}

impl<O: XprtOps> Adapter<O> {
    /// The operations table sunrpc calls.
    const OPS: bindings::svc_xprt_ops = bindings::svc_xprt_ops {
        xpo_create: Some(Self::create),
        xpo_accept: Some(Self::accept),
        xpo_has_wspace: Some(Self::has_wspace),
        xpo_recvfrom: Some(Self::recvfrom),
        xpo_sendto: Some(Self::sendto),
        xpo_result_payload: Some(Self::result_payload),
        xpo_release_ctxt: Some(Self::release_ctxt),
        xpo_detach: Some(Self::detach),
        xpo_free: Some(Self::free),
        xpo_kill_temp_xprt: Some(Self::kill_temp_xprt),
        xpo_handshake: None,
    };

    /// [`Adapter::OPS`], for the class to point at.
    pub(crate) const fn build() -> &'static bindings::svc_xprt_ops {
        &Self::OPS
    }

    /// Recovers the transport behind sunrpc's pointer.
    ///
    /// # Safety
    ///
    /// `xprt` must be a live transport of this class (made by
    /// [`NewXprt`]), alive for `'a`.
    unsafe fn ours<'a>(xprt: *mut bindings::svc_xprt) -> Ours<'a, O> {
        // SAFETY: a live, initialized `svc_xprt` (caller's promise).
        let x = unsafe { SvcXprt::from_raw(xprt) };
        if x.is_listener() {
            // SAFETY: with `XPT_LISTENER` it is an `O::Listener` (the
            // invariant of `NewXprt`), whose first field it is.
            Ours::Listener(unsafe { &*xprt.cast::<O::Listener>() })
        } else {
            // SAFETY: without it, an `O::Conn`, likewise.
            Ours::Conn(unsafe { &*xprt.cast::<O::Conn>() })
        }
    }

    /// The transport of a request sunrpc passed (`rq_xprt`).
    ///
    /// # Safety
    ///
    /// `rqstp` must be a live request of the calling thread, on a live
    /// transport of this class.
    unsafe fn ours_of<'a>(rqstp: *mut bindings::svc_rqst) -> Ours<'a, O> {
        // SAFETY: the caller's promise; sunrpc holds the transport.
        unsafe { Self::ours((*rqstp).rq_xprt) }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, per its `xpo_create` contract: a live service
    /// and namespace, `salen` readable bytes at `sa`.
    unsafe extern "C" fn create(
        serv: *mut bindings::svc_serv,
        net: *mut bindings::net,
        sa: *mut bindings::sockaddr,
        salen: c_int,
        _flags: c_int,
    ) -> *mut bindings::svc_xprt {
        let Ok(salen) = usize::try_from(salen) else {
            return EINVAL.to_ptr();
        };
        if sa.is_null() || salen < size_of::<bindings::sa_family_t>() {
            return EINVAL.to_ptr();
        }
        // SAFETY: at least the family field is readable (`salen` says so).
        let need = match u32::from(unsafe { (*sa).sa_family }) {
            bindings::AF_INET => size_of::<bindings::sockaddr_in>(),
            bindings::AF_INET6 => size_of::<bindings::sockaddr_in6>(),
            _ => return EAFNOSUPPORT.to_ptr(),
        };
        if salen < need {
            return EINVAL.to_ptr();
        }
        // INVARIANT: sunrpc's contract, and the length checked above.
        let args = CreateArgs {
            serv,
            net,
            addr: sa,
            _p: PhantomData,
        };
        // A class's data is kept while it is registered, so while sunrpc can
        // find the class.
        let Some(data) = O::class_data().get() else {
            return ENODEV.to_ptr();
        };
        match O::create(&data, &args) {
            Ok(l) => l.into_raw(),
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with a transport of this class it holds.
    unsafe extern "C" fn accept(xprt: *mut bindings::svc_xprt) -> *mut bindings::svc_xprt {
        // SAFETY: sunrpc holds a reference on the transport during the call.
        match unsafe { Self::ours(xprt) } {
            Ours::Listener(l) => O::accept(l).map_or(core::ptr::null_mut(), NewXprt::into_raw),
            Ours::Conn(_) => core::ptr::null_mut(),
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with a transport of this class it holds.
    unsafe extern "C" fn has_wspace(xprt: *mut bindings::svc_xprt) -> c_int {
        // SAFETY: sunrpc holds a reference on the transport during the call.
        match unsafe { Self::ours(xprt) } {
            Ours::Conn(c) => c_int::from(O::has_wspace(c)),
            Ours::Listener(_) => 1,
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with the calling thread's request on a
    /// transport of this class.
    unsafe extern "C" fn recvfrom(rqstp: *mut bindings::svc_rqst) -> c_int {
        // SAFETY: sunrpc passes a live request whose transport it holds.
        let Ours::Conn(c) = (unsafe { Self::ours_of(rqstp) }) else {
            return 0;
        };
        // SAFETY: the thread's request; its context is null or ours, a
        // `KBox<O::Ctxt>` (only `Rqst` sets it).
        let mut rq = unsafe { Rqst::from_raw(rqstp) };
        c_int::try_from(O::recvfrom(c, &mut rq)).unwrap_or(0)
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with the calling thread's request on a
    /// transport of this class.
    unsafe extern "C" fn sendto(rqstp: *mut bindings::svc_rqst) -> c_int {
        // SAFETY: sunrpc passes a live request whose transport it holds.
        let Ours::Conn(c) = (unsafe { Self::ours_of(rqstp) }) else {
            return ENOTCONN.to_errno();
        };
        // SAFETY: as in `recvfrom`.
        let mut rq = unsafe { Rqst::from_raw(rqstp) };
        match O::sendto(c, &mut rq) {
            Ok(len) => c_int::try_from(len).unwrap_or(c_int::MAX),
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with the calling thread's request on a
    /// transport of this class.
    unsafe extern "C" fn result_payload(
        rqstp: *mut bindings::svc_rqst,
        offset: c_uint,
        length: c_uint,
    ) -> c_int {
        // SAFETY: as in `recvfrom`.
        let mut rq = unsafe { Rqst::<O::Ctxt>::from_raw(rqstp) };
        match O::result_payload(&mut rq, offset, length) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with a transport of this class it holds and
    /// a context taken from one of its requests (or null).
    unsafe extern "C" fn release_ctxt(xprt: *mut bindings::svc_xprt, ctxt: *mut c_void) {
        if ctxt.is_null() {
            return;
        }
        // SAFETY: a non-null request context of this class is a leaked
        // `KBox<O::Ctxt>` (only `Rqst` sets one), released once.
        let ctxt = unsafe { KBox::from_raw(ctxt.cast::<O::Ctxt>()) };
        // SAFETY: sunrpc holds a reference on the transport during the call.
        if let Ours::Conn(c) = unsafe { Self::ours(xprt) } {
            O::release_ctxt(c, ctxt);
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, with a transport of this class it holds.
    unsafe extern "C" fn detach(xprt: *mut bindings::svc_xprt) {
        // SAFETY: sunrpc holds a reference on the transport during the call.
        if let Ours::Conn(c) = unsafe { Self::ours(xprt) } {
            O::detach(c);
        }
    }

    /// # Safety
    ///
    /// Called by sunrpc only, once, on the last reference to a transport of
    /// this class.
    unsafe extern "C" fn free(xprt: *mut bindings::svc_xprt) {
        // SAFETY: live until freed below.
        let listener = unsafe { SvcXprt::from_raw(xprt) }.is_listener();
        if listener {
            // `NewXprt` leaked it from a pinned box; sunrpc's last reference
            // is gone, so this is the only owner.
            // SAFETY: a listener is the first field of an `O::Listener`.
            O::free_listener(unsafe { Pin::new_unchecked(KBox::from_raw(xprt.cast())) });
        } else {
            // SAFETY: as for a listener, an `O::Conn`.
            O::free_conn(unsafe { Pin::new_unchecked(KBox::from_raw(xprt.cast())) });
        }
    }

    /// Nothing to do: RDMA connections are not temporary sockets.
    ///
    /// # Safety
    ///
    /// Called by sunrpc only.
    unsafe extern "C" fn kill_temp_xprt(_xprt: *mut bindings::svc_xprt) {}
}
