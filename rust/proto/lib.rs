// SPDX-License-Identifier: GPL-2.0

//! Host build of svcrdma_rs's pure protocol logic.
//!
//! The kernel module compiles `mod.rs` as its `proto` module; this file only
//! makes the same code a `no_std` library crate so `cargo test` can run it.

#![no_std]

#[path = "mod.rs"]
mod proto;

pub use proto::*;
