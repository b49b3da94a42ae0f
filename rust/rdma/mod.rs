// SPDX-License-Identifier: GPL-2.0

//! Thin, safe wrappers over the kernel RDMA API (`rdma/rdma_cm.h`,
//! `rdma/ib_verbs.h`).

pub(crate) mod cm;
mod cq;
mod device;
pub(crate) mod dma;
pub(crate) mod endpoint;
pub(crate) mod mr;
pub(crate) mod owned;
mod pd;
pub(crate) mod qp;
pub(crate) mod recv;
pub(crate) mod wr;

pub(crate) use cq::Cq;
pub(crate) use device::{DevName, Device};
pub(crate) use pd::Pd;

/// Completion statuses the data path tells apart (`enum ib_wc_status`).
pub(crate) mod wc_status {
    use crate::bindings;

    /// The request completed.
    pub(crate) const SUCCESS: u32 = bindings::IB_WC_SUCCESS;
    /// Flushed: the QP went to the error state with the request pending.
    pub(crate) const FLUSHED: u32 = bindings::IB_WC_WR_FLUSH_ERR;
    /// A general error (also what this module records for a request that
    /// was never posted).
    pub(crate) const GENERAL_ERR: u32 = bindings::IB_WC_GENERAL_ERR;
}
