// SPDX-License-Identifier: GPL-2.0

//! Thin, safe wrappers over the sunrpc server-transport API
//! (`linux/sunrpc/svc_xprt.h`, `svc.h`, `xdr.h`), and, for the NFSv4.1
//! backchannel (unless built with `SVCRDMA_RS_BACKCHANNEL=n`), over the client-transport
//! API (`linux/sunrpc/xprt.h`).

#[cfg(svcrdma_rs_backchannel)]
mod bc_link;
#[cfg(svcrdma_rs_backchannel)]
mod bc_ops;
mod class_data;
#[cfg(svcrdma_rs_backchannel)]
mod client_class;
#[cfg(svcrdma_rs_backchannel)]
mod client_xprt;
#[cfg(svcrdma_rs_backchannel)]
mod module_ref;
mod rqst;
mod xprt;
mod xprt_class;
mod xprt_ops;

#[cfg(svcrdma_rs_backchannel)]
pub(crate) use bc_ops::{BcOps, BcParams, BoundBackchannel, SetupArgs};
pub(crate) use class_data::ClassData;
#[cfg(svcrdma_rs_backchannel)]
pub(crate) use client_class::{ClientClass, ClientRegistration};
#[cfg(svcrdma_rs_backchannel)]
pub(crate) use client_xprt::{ReplyMiss, RpcRqst, RpcXprt};
pub(crate) use rqst::{HeldPages, Rqst, Span, PAGE_SIZE};
pub(crate) use xprt::{Flag, SvcXprt};
pub(crate) use xprt_class::{Registration, XprtClass};
pub(crate) use xprt_ops::{impl_has_svc_xprt, Adapter, CreateArgs, HasSvcXprt, NewXprt, XprtOps};

/// The largest payload (READ or WRITE data) an RPC carries
/// (`RPCSVC_MAXPAYLOAD`, `linux/sunrpc/svc.h`).
pub(crate) const MAX_PAYLOAD: u32 = crate::bindings::RPCSVC_MAXPAYLOAD;

/// The RPC client transport identifier of RDMA (`XPRT_TRANSPORT_RDMA`,
/// `linux/sunrpc/xprtrdma.h`).
pub(crate) const XPRT_TRANSPORT_RDMA: i32 = crate::bindings::XPRT_TRANSPORT_RDMA;
