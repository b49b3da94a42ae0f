// SPDX-License-Identifier: GPL-2.0

//! The RPC-over-RDMA server transport, one stage per file as in the C
//! svcrdma:
//!
//! - [`ops`]: the `svc_xprt_ops` table sunrpc calls, and the class itself;
//! - [`xprt`]: our transport object (`RdmaXprt`), embedding sunrpc's;
//! - [`listener`]: listening endpoints (`xpo_create`) and the CM events on
//!   them (connection requests).

mod listener;
mod ops;
mod xprt;

pub(crate) use ops::register_class;
