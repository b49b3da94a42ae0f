// SPDX-License-Identifier: GPL-2.0

//! Thin, safe wrappers over the sunrpc server-transport API
//! (`linux/sunrpc/svc_xprt.h`, `svc.h`, `xdr.h`).

mod rqst;
mod xprt;
mod xprt_class;

pub(crate) use rqst::{Piece, Rqst, PAGE_SIZE};
pub(crate) use xprt::{Flag, SvcXprt};
pub(crate) use xprt_class::{Registration, XprtClass};
