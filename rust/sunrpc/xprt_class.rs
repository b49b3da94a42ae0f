// SPDX-License-Identifier: GPL-2.0

//! A server transport class (`struct svc_xprt_class`) and its registration,
//! and the transports made in its name.

use core::marker::PhantomData;

use kernel::{
    error::to_result,
    prelude::*,
    sync::{
        atomic::{ordering::Relaxed, Atomic},
        Arc,
    },
    types::Opaque,
};

use super::{Adapter, ClassData, CreateArgs, NewXprt, SvcXprt, XprtOps};
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
    /// What `xpo_create` gets, kept while the class is registered.
    data: ClassData<O::Data>,
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
            data: ClassData::new(),
            _ops: PhantomData,
        }
    }

    /// The class's data, for [`XprtOps::class_data`].
    pub(crate) fn data(&self) -> &ClassData<O::Data> {
        &self.data
    }

    /// The C object, for `svc_xprt_init()`.
    pub(super) fn as_ptr(&self) -> *mut bindings::svc_xprt_class {
        self.class.get()
    }

    /// Whether the class is registered with sunrpc.
    pub(super) fn is_registered(&self) -> bool {
        self.registered.load(Relaxed)
    }

    /// Registers the class with sunrpc under `name`, with `O`'s operations
    /// and `data` for its `xpo_create`.
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
        data: Arc<O::Data>,
    ) -> Result<Registration<O>> {
        if self.registered.cmpxchg(false, true, Relaxed).is_err() {
            return Err(EBUSY);
        }
        // Kept before sunrpc can find the class; none is (the last
        // registration took its data back before it let go of the class).
        if self.data.set(data).is_err() {
            self.registered.store(false, Relaxed);
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
            drop(self.data.take());
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
        // Once no `xpo_create` can still read it.
        drop(self.class.data.take());
        self.class.registered.store(false, Relaxed);
    }
}

impl<O: XprtOps> XprtClass<O> {
    /// A new listener of this class, in the namespace and service of
    /// `args`. Fails if the class is not registered.
    pub(crate) fn new_listener(
        &'static self,
        obj: Pin<KBox<O::Listener>>,
        args: &CreateArgs<'_>,
    ) -> Result<NewXprt<O::Listener>> {
        if !self.is_registered() {
            return Err(EINVAL);
        }
        // SAFETY: `O`'s adapter frees an `O::Listener` when `XPT_LISTENER`
        // is set; `args`' service and namespace are live (its invariant).
        Ok(unsafe { NewXprt::init(obj, self.as_ptr(), args.net, args.serv, true) })
    }

    /// The connection `x` is, if it is one of this class's (a transport
    /// nfsd links a backchannel to, say).
    #[cfg_attr(not(svcrdma_rs_backchannel), allow(dead_code))]
    pub(crate) fn conn_of<'a>(&self, x: &'a SvcXprt) -> Option<&'a O::Conn> {
        if x.class() != self.as_ptr().cast_const() || x.is_listener() {
            return None;
        }
        // The invariant of `NewXprt`, which made it; the connection lives as
        // long as its `svc_xprt`.
        // SAFETY: this class's non-listener is the first field of an `O::Conn`.
        Some(unsafe { &*core::ptr::from_ref(x).cast::<O::Conn>() })
    }

    /// A new connection of this class, in the namespace and service of
    /// `listener`, one of this class's listeners. Fails if the class is not
    /// registered or `listener` is not one of its listeners.
    pub(crate) fn new_conn(
        &'static self,
        obj: Pin<KBox<O::Conn>>,
        lx: &SvcXprt,
    ) -> Result<NewXprt<O::Conn>> {
        // A listener this class made (storage is zeroed until then).
        if !self.is_registered() || lx.class() != self.as_ptr().cast_const() || !lx.is_listener() {
            return Err(EINVAL);
        }
        // SAFETY: `O`'s adapter frees an `O::Conn` when `XPT_LISTENER` is
        // clear; a live listener's namespace and service are live.
        Ok(unsafe { NewXprt::init(obj, self.as_ptr(), lx.net(), lx.serv(), false) })
    }
}
