// SPDX-License-Identifier: GPL-2.0

//! A server transport class (`struct svc_xprt_class`) and its registration.

use core::marker::PhantomData;

use kernel::{
    error::to_result,
    prelude::*,
    sync::atomic::{ordering::Relaxed, Atomic},
    types::Opaque,
};

use super::{Adapter, XprtOps};
use crate::bindings;

/// Storage for one `svc_xprt_class` whose transports are `O`'s, meant to
/// be a `static`.
///
/// sunrpc links a registered class into its global list and reads it from
/// any context, so it must never move: only `&'static` instances can be
/// registered.
pub(crate) struct XprtClass<O: XprtOps> {
    class: Opaque<bindings::svc_xprt_class>,
    registered: Atomic<bool>,
    _ops: PhantomData<O>,
}

// `register` writes it before sunrpc can see it, while `registered`
// guarantees no other `register` runs; afterwards only sunrpc touches it,
// under its own `svc_xprt_class_lock`.
// SAFETY: so shared access never races with a write.
unsafe impl<O: XprtOps> Sync for XprtClass<O> {}

impl<O: XprtOps> XprtClass<O> {
    /// An unregistered class.
    pub(crate) const fn new() -> Self {
        Self {
            class: Opaque::uninit(),
            registered: Atomic::new(false),
            _ops: PhantomData,
        }
    }

    /// The C object, for `svc_xprt_init()`.
    pub(super) fn as_ptr(&self) -> *mut bindings::svc_xprt_class {
        self.class.get()
    }

    /// Whether the class is registered with sunrpc.
    pub(super) fn is_registered(&self) -> bool {
        self.registered.load(Relaxed)
    }

    /// Registers the class with sunrpc under `name`, with `O`'s operations.
    ///
    /// Fails with `EEXIST` if sunrpc already has a class of that name, and
    /// with `EBUSY` if this class is already registered. The class stays
    /// registered until the returned [`Registration`] is dropped.
    pub(crate) fn register(
        &'static self,
        name: &'static CStr,
        owner: &'static ThisModule,
        max_payload: u32,
        ident: i32,
    ) -> Result<Registration<O>> {
        if self.registered.cmpxchg(false, true, Relaxed).is_err() {
            return Err(EBUSY);
        }
        let class = bindings::svc_xprt_class {
            xcl_name: name.as_char_ptr(),
            xcl_owner: owner.as_ptr().cast(),
            xcl_ops: Adapter::<O>::build(),
            xcl_max_payload: max_payload,
            xcl_ident: ident,
            ..Default::default()
        };
        // SAFETY: `registered` was false, so sunrpc does not know this class
        // and nobody else writes it: we have exclusive access.
        unsafe { self.class.get().write(class) };
        // SAFETY: the class is initialized and `'static`, so it outlives its
        // registration; `name` and `ops` are `'static` too.
        let ret = to_result(unsafe { bindings::svc_reg_xprt_class(self.class.get()) });
        if let Err(e) = ret {
            self.registered.store(false, Relaxed);
            return Err(e);
        }
        Ok(Registration { class: self })
    }
}

/// A registered transport class; dropping it unregisters the class.
pub(crate) struct Registration<O: XprtOps> {
    class: &'static XprtClass<O>,
}

impl<O: XprtOps> Drop for Registration<O> {
    fn drop(&mut self) {
        // SAFETY: the class was registered by `XprtClass::register` and is
        // unregistered only here, once.
        unsafe { bindings::svc_unreg_xprt_class(self.class.as_ptr()) };
        self.class.registered.store(false, Relaxed);
    }
}
