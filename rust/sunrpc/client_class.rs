// SPDX-License-Identifier: GPL-2.0

//! A client transport class (`struct xprt_class`) and its registration.
//!
//! sunrpc's RPC clients find their transport by identifier among the
//! registered classes (`xprt_create_transport()`); nfsd's NFSv4.1 callback
//! client asks for the identifier of the connection's server class plus
//! `XPRT_TRANSPORT_BC`. A class also lists the network identifiers it
//! answers to (`netid`, looked up by `xprt_find_transport_ident()` and
//! friends): the list ends with an empty string, which is part of our
//! storage, so a lookup by netid never reads past the class. A class's
//! `setup` and the operations of the transports it builds come from a
//! [`BcOps`] implementation.

use core::marker::PhantomData;

use kernel::{
    error::to_result,
    prelude::*,
    sync::atomic::{
        ordering::{Acquire, Relaxed, Release},
        Atomic,
    },
    types::Opaque,
};

use super::{
    bc_ops::{Adapter, NewBackchannel},
    BcOps, BcParams, SetupArgs,
};
use crate::bindings;

/// A class and the terminator of its (empty) `netid` list, laid out as C
/// sees a class with a one-entry flexible array.
#[repr(C)]
struct Storage {
    class: bindings::xprt_class,
    /// `netid[0]`: the empty string that ends the list.
    netid: [*const c_char; 1],
}

// The terminator sits exactly where C's flexible array member begins.
const _: () = assert!(
    core::mem::offset_of!(Storage, netid) == core::mem::offset_of!(bindings::xprt_class, netid)
);

/// Storage for one `xprt_class` whose transports are `O`'s backchannels,
/// meant to be a `static`.
///
/// sunrpc links a registered class into its global list and reads it from
/// any context, so it must never move: only `&'static` instances can be
/// registered.
pub(crate) struct ClientClass<O: BcOps> {
    storage: Opaque<Storage>,
    /// Claimed by a `register` (which alone may write `storage`), until
    /// the registration ends.
    registered: Atomic<bool>,
    /// `storage` is written (published with release ordering after the
    /// write), and stays unchanged until the registration ends.
    ready: Atomic<bool>,
    _ops: PhantomData<O>,
}

// The class is written only by `register`, before sunrpc can see it and
// while `registered` guarantees no other `register` runs; afterwards only
// sunrpc touches it (under its `xprt_list_lock`) and its owner and
// identifier are read.
// SAFETY: so shared access never races with a write.
unsafe impl<O: BcOps> Sync for ClientClass<O> {}

impl<O: BcOps> ClientClass<O> {
    /// An unregistered class.
    pub(crate) const fn new() -> Self {
        Self {
            storage: Opaque::uninit(),
            registered: Atomic::new(false),
            ready: Atomic::new(false),
            _ops: PhantomData,
        }
    }

    /// The C object (for `rpc_xprt::xprt_class`).
    pub(super) fn as_ptr(&self) -> *mut bindings::xprt_class {
        // `class` is the first field of a `#[repr(C)]` struct.
        self.storage.get().cast()
    }

    /// The module the class belongs to and the identifier of its
    /// transports, once [`ClientClass::register`] has set them.
    pub(super) fn owner_and_ident(&self) -> Option<(*mut bindings::module, i32)> {
        if !self.ready.load(Acquire) {
            return None;
        }
        // The fields were written before `ready` was set (seen above, with
        // acquire ordering) and do not change until the registration ends.
        // SAFETY: so both are initialized and no write races the reads.
        Some(unsafe {
            let c = self.as_ptr();
            ((*c).owner, (*c).ident)
        })
    }

    /// Registers the class with sunrpc: `name` (at most 31 bytes, shown in
    /// the kernel log), transports with identifier `ident` built by `O`'s
    /// `setup`.
    ///
    /// Fails with `EEXIST` if sunrpc already has a class with that
    /// identifier, `EBUSY` if this class is registered already, `EINVAL`
    /// if the name is too long. The class stays registered until the
    /// returned [`ClientRegistration`] is dropped.
    pub(crate) fn register(
        &'static self,
        name: &'static CStr,
        owner: &'static ThisModule,
        ident: i32,
    ) -> Result<ClientRegistration<O>> {
        let mut class = bindings::xprt_class {
            ident,
            setup: Some(Adapter::<O>::setup),
            owner: owner.as_ptr().cast(),
            ..Default::default()
        };
        let bytes = name.to_bytes();
        // Room for the terminating NUL, which `Default` left in place.
        if bytes.len() >= class.name.len() {
            return Err(EINVAL);
        }
        for (dst, &b) in class.name.iter_mut().zip(bytes) {
            *dst = b as c_char;
        }
        if self.registered.cmpxchg(false, true, Relaxed).is_err() {
            return Err(EBUSY);
        }
        let storage = Storage {
            class,
            netid: [c"".as_char_ptr()],
        };
        // SAFETY: `registered` was false, so sunrpc does not know this class
        // and nobody else writes it: we have exclusive access.
        unsafe { self.storage.get().write(storage) };
        self.ready.store(true, Release);
        // SAFETY: the class is initialized, `'static` and never moves, so it
        // outlives its registration; its netid list is terminated.
        let ret = to_result(unsafe { bindings::xprt_register_transport(self.as_ptr()) });
        if let Err(e) = ret {
            self.ready.store(false, Relaxed);
            self.registered.store(false, Relaxed);
            return Err(e);
        }
        Ok(ClientRegistration { class: self })
    }

    /// A new backchannel of this class, for the connection and peer of
    /// `args`, set up as `p` says.
    ///
    /// Fails with `EINVAL` if the class is not registered, `ENOMEM`,
    /// `EBADF` if the peer's address is longer than sunrpc keeps, or
    /// `EAFNOSUPPORT` if it is not an IPv4 or IPv6 one.
    pub(crate) fn new_backchannel<'a>(
        &'static self,
        args: &SetupArgs<'a>,
        p: &BcParams,
    ) -> Result<NewBackchannel<'a>> {
        let (owner, ident) = self.owner_and_ident().ok_or(EINVAL)?;
        // `'static`, registered (its owner and identifier are set) with
        // `O`'s `setup`; its owner is the `ThisModule` `register` got.
        // SAFETY: so the class and owner are as `new` needs.
        unsafe { NewBackchannel::new::<O>(self.as_ptr(), owner, ident, args, p) }
    }
}

/// A registered client transport class; dropping it unregisters the class.
pub(crate) struct ClientRegistration<O: BcOps> {
    class: &'static ClientClass<O>,
}

impl<O: BcOps> Drop for ClientRegistration<O> {
    fn drop(&mut self) {
        // Every transport the class built holds a reference on the owner
        // module: while one exists, the module and this registration stay.
        // SAFETY: registered by `ClientClass::register`; unregistered once.
        unsafe { bindings::xprt_unregister_transport(self.class.as_ptr()) };
        self.class.ready.store(false, Relaxed);
        self.class.registered.store(false, Relaxed);
    }
}
