// SPDX-License-Identifier: GPL-2.0

//! The RPC-over-RDMA server transport, one stage per file as in the C
//! svcrdma:
//!
//! - [`class`]: the transport class, its name and identifiers;
//! - [`ops`]: the `svc_xprt_ops` sunrpc calls, each handed to its stage;
//! - [`registry`]: module-wide state and the sysfs tree;
//! - [`listener`]: listening endpoints (`xpo_create`);
//! - [`accept`]: connection requests (RFC 8797 private data, the memory
//!   model) and `xpo_accept`;
//! - [`connection`]: a connection's RDMA resources, pools and teardown;
//! - [`live`]: a connection with its resources, as the data path sees it;
//! - [`events`]: a connection's CM and QP events;
//! - [`recvfrom`]: `xpo_recvfrom` and receive completions (transport
//!   header, Call assembly);
//! - [`recv`]: the receive queue between the receive CQ and nfsd;
//! - [`call`]: a received Call's plan (its header checked, its layout and
//!   the cost of its Reads);
//! - [`rw`]: RDMA Read and Write chains;
//! - [`sink`]: where RDMA Reads land, under the connection's memory model;
//! - [`frmr`]: the per-connection FRMR pool;
//! - [`sendto`]: `xpo_sendto` and `xpo_result_payload` (the Reply);
//! - [`ctxt`]: the per-RPC context between them;
//! - [`sq`]: posting work-request chains and handling their completions;
//! - [`sq_slots`]: the send queue's slots, reserved by each chain;
//! - [`stats`]: the per-connection counters;
//! - [`fair`]: the pools nfsd threads wait on in turn (send-queue slots,
//!   FRMR entries);
//! - `backchannel`: the NFSv4.1 backchannel (nfsd's callbacks on the
//!   client's connection), unless built with `SVCRDMA_RS_BACKCHANNEL=n`.
//!
//! One Call's receive path goes one way through the files: [`recvfrom`]
//! takes the received buffer from [`recv`], has [`call`] plan the Call,
//! assembles it, and has [`rw`] build its RDMA Reads (into the sink of
//! [`sink`], with MRs of [`frmr`]), which [`sq`] posts. Their completion
//! goes back up the same files: [`sq`] hands the context to [`rw`], which
//! queues the Call in [`recv`]; the next nfsd thread in [`recvfrom`]
//! picks it up.

mod accept;
#[cfg(svcrdma_rs_backchannel)]
mod backchannel;
mod call;
mod class;
mod connection;
mod ctxt;
mod events;
mod fair;
mod frmr;
mod listener;
mod live;
mod ops;
mod recv;
mod recvfrom;
mod registry;
mod rw;
mod sendto;
mod sink;
mod sq;
mod sq_slots;
mod stats;

#[cfg(svcrdma_rs_backchannel)]
pub(crate) use backchannel::{register_class as register_bc_class, RdmaBc};
pub(crate) use class::{register_class, Rdma};
pub(crate) use registry::new as new_registry;
