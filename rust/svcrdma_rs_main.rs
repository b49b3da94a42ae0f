// SPDX-License-Identifier: GPL-2.0

//! svcrdma_rs: the NFS server's RPC-over-RDMA transport, in Rust.
//!
//! A drop-in equivalent of the kernel's C `svcrdma`: it registers a server
//! transport class with sunrpc, so nfsd can listen on RDMA exactly as
//! today (`echo rdma 20049 > /proc/fs/nfsd/portlist`).
//!
//! The crate is laid out as the data flows:
//!
//! - [`proto`]: pure protocol logic with no kernel dependency (also built and
//!   tested on the host with `cargo test`).
//! - [`bindings`], [`rdma`], [`sunrpc`]: the generated C bindings and thin,
//!   safe wrappers over the RDMA and sunrpc APIs; [`net`]: the namespaces
//!   and socket addresses both of them take; [`pages`]: a request's pages
//!   held together with the DMA mappings of them.
//! - [`transport`]: the transport itself: listeners, connection events and,
//!   stage by stage, the RPC-over-RDMA data path.
//! - [`params`]: the module parameters, validated.
//! - [`anchor`], [`kwork`]: what lets C callbacks reach Rust objects
//!   safely: counted references to the objects they are called with, and
//!   delayed work through such references. (A callback that comes with no
//!   object, `xpo_create`, gets its class's data from the class:
//!   [`sunrpc::XprtOps::class_data`].)
//! - [`fifo`]: the fixed-size queues the transport and the send order use.
//! - [`sysfs`], [`trace`], [`log`]: the sysfs directories, the tracepoints
//!   and rate-limited logging.

#![crate_name = "svcrdma_rs"]

use kernel::prelude::*;

mod anchor;
mod bindings;
mod fifo;
mod kwork;
mod log;
mod net;
mod pages;
mod params;
pub mod proto;
mod rdma;
mod sunrpc;
mod sysfs;
mod trace;
mod transport;

module! {
    type: SvcRdmaRs,
    name: "svcrdma_rs",
    authors: ["svcrdma_rs developers"],
    description: "NFS/RDMA server transport (RPC-over-RDMA version 1) in Rust",
    license: "GPL",
}

/// The module: while it is loaded, its transport class is registered.
///
/// Fields drop in order. Built with the backchannel, its client transport
/// class goes first (each backchannel holds a module reference). Then the
/// class is unregistered (no new listener can appear; every transport is
/// gone, since each holds a module reference), and with it goes its data,
/// the registry and its sysfs tree.
struct SvcRdmaRs {
    #[cfg(svcrdma_rs_backchannel)]
    _bc_class: sunrpc::ClientRegistration<transport::RdmaBc>,
    _class: sunrpc::Registration<transport::Rdma>,
}

impl kernel::Module for SvcRdmaRs {
    fn init(module: &'static ThisModule) -> Result<Self> {
        params::validate_defaults()?;
        let registry = transport::new_registry()?;
        Ok(Self {
            _class: transport::register_class(module, registry)?,
            #[cfg(svcrdma_rs_backchannel)]
            _bc_class: transport::register_bc_class(module)?,
        })
    }
}
