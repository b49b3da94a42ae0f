// SPDX-License-Identifier: GPL-2.0

//! Thin, safe wrappers over the kernel RDMA API (`rdma/rdma_cm.h`,
//! `rdma/ib_verbs.h`).

mod addr;
pub(crate) mod cm;

pub(crate) use addr::sockaddr_to_proto;
