// SPDX-License-Identifier: GPL-2.0

//! Thin, safe wrappers over the sunrpc server-transport API
//! (`linux/sunrpc/svc_xprt.h`).

mod xprt;
mod xprt_class;

pub(crate) use xprt::{Flag, SvcXprt};
pub(crate) use xprt_class::{Registration, XprtClass};
