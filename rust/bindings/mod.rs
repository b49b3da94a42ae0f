// SPDX-License-Identifier: GPL-2.0

//! Rust bindings for the kernel APIs svcrdma_rs uses.
//!
//! Generated at build time by `scripts/gen-bindings` from
//! `include/svcrdma_rs.h`, with the kernel's own bindgen flags; what is
//! generated is listed in `include/bindings.list`. Nothing outside
//! [`crate::rdma`], [`crate::sunrpc`], [`crate::params`] and
//! [`crate::transport`]'s FFI entry points should need these directly.

#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    missing_docs,
    unsafe_op_in_unsafe_fn,
    unreachable_pub,
    improper_ctypes,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    clippy::cast_lossless,
    clippy::as_underscore,
    clippy::ptr_cast_constness
)]
#![cfg_attr(CONFIG_RUSTC_HAS_UNNECESSARY_TRANSMUTES, allow(unnecessary_transmutes))]

include!(env!("SVCRDMA_RS_BINDINGS"));
