// SPDX-License-Identifier: GPL-2.0

//! Pure protocol logic: no kernel dependency, no allocation, no `unsafe`.
//!
//! These files build both into the kernel module (as `crate::proto`) and into
//! the host crate `svcrdma-proto` (`rust/proto/Cargo.toml`), where `cargo
//! test` checks them. Everything that decides something from untrusted input
//! (the network, module parameters, sysfs) lives here, so it can be tested
//! exhaustively without a kernel.

#![forbid(unsafe_code)]

pub mod addr;
pub mod budget;
pub mod cm_private;
pub mod inline;
pub mod layout;
pub mod memreg;
pub mod ratelimit;
pub mod rpcrdma;
pub mod xprt_name;
