// SPDX-License-Identifier: GPL-2.0

//! The transport class: its registration under the `xprt_name` parameter
//! and its transport identifiers. What sunrpc calls on its transports is
//! in [`super::ops`].

use kernel::{prelude::*, sync::Arc};

use super::registry::Registry;
use crate::{
    params,
    sunrpc::{self, Registration, XprtClass},
};

/// The transport class this module registers (its name is `xprt_name`).
pub(super) static CLASS: XprtClass<Rdma> = XprtClass::new();

/// The class's transport identifier. nfsd builds an NFSv4.1 callback client
/// on a session's connection with the client transport whose identifier is
/// this one plus `XPRT_TRANSPORT_BC`. That must not be the C transport's
/// (`XPRT_TRANSPORT_RDMA`): rpcrdma.ko's backchannel would take our
/// connection for one of its own. Our backchannel's class
/// ([`super::backchannel`]) answers to it; in a module built without it
/// (`SVCRDMA_RS_BACKCHANNEL=n`) none does, so nfsd's callback setup fails
/// cleanly and it tells the client its callback path is down.
const IDENT: i32 = sunrpc::XPRT_TRANSPORT_RDMA | 0x1_0000;

/// The backchannel's client transport identifier: [`IDENT`] plus
/// `XPRT_TRANSPORT_BC` (bit 31, the sign bit of C's `int`).
#[cfg(svcrdma_rs_backchannel)]
pub(super) const BC_IDENT: i32 = IDENT | i32::MIN;

/// Registers the class under the `xprt_name` parameter, its listeners
/// made with `registry`.
///
/// If the name is taken, loading fails with one line that says what to do.
/// The usual holder of `rdma` is the kernel's own `rpcrdma.ko` (the NFS/RDMA
/// client and the C server), loaded before us: unloading it and loading us
/// first (which the `softdep` in `modprobe/svcrdma_rs.conf`, installed
/// by `make install`, does on every later load) gives us the name and
/// leaves its client working; another name is the way out when it cannot
/// be unloaded.
pub(crate) fn register_class(
    module: &'static ThisModule,
    registry: Arc<Registry>,
) -> Result<Registration<Rdma>> {
    let name = params::xprt_name()?;
    CLASS
        .register(name, module, sunrpc::MAX_PAYLOAD, IDENT, registry)
        .inspect_err(|e| {
            if *e != EEXIST {
                return;
            }
            if name.to_bytes() == b"rdma" {
                pr_err!(
                    "transport name \"rdma\" is already registered, by rpcrdma.ko (the C transport) if it is loaded: \"rmmod rpcrdma\" (needs no NFS/RDMA mount and no rdma listener), then \"modprobe svcrdma_rs\"; the modprobe.d softdep (/etc/modprobe.d/svcrdma_rs.conf from make install or DKMS, /usr/lib/modprobe.d/svcrdma_rs.conf from the Debian package) makes every later load of rpcrdma load svcrdma_rs first; or load with xprt_name=<another name>, e.g. \"modprobe svcrdma_rs xprt_name=rdma_rs\", and write that name to /proc/fs/nfsd/portlist\n"
                );
            } else {
                pr_err!(
                    "transport name \"{}\" is already registered: load with xprt_name=<another name> and write that name to /proc/fs/nfsd/portlist\n",
                    name
                );
            }
        })
}

/// The RPC-over-RDMA transport class: what sunrpc calls on its listeners
/// and connections ([`super::ops`]).
pub(crate) struct Rdma;
