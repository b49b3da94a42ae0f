// SPDX-License-Identifier: GPL-2.0

//! Thin, safe wrappers over the kernel RDMA API (`rdma/rdma_cm.h`,
//! `rdma/ib_verbs.h`).

mod addr;
pub(crate) mod cm;
mod cq;
mod device;
pub(crate) mod dma;
pub(crate) mod endpoint;
pub(crate) mod mapped;
pub(crate) mod mr;
pub(crate) mod owned;
mod pd;
pub(crate) mod qp;
pub(crate) mod recv;
pub(crate) mod wr;

pub(crate) use addr::{sockaddr_to_proto, IpSockAddr};
pub(crate) use cq::Cq;
pub(crate) use device::Device;
pub(crate) use pd::Pd;
