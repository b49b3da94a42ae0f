// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 transport headers (RFC 8166).
//!
//! Every RPC message on the connection starts with a transport header, in
//! XDR:
//!
//! ```text
//! xid | vers (1) | credits | proc | [ read list | write list | reply chunk ]
//!
//! read list:   { 1 | position | handle | length | offset(64) }* 0
//! write list:  { 1 | count | { handle | length | offset(64) } x count }* 0
//! reply chunk: 0  or  1 | count | { handle | length | offset(64) } x count
//! ```
//!
//! The lists are present for `RDMA_MSG` and `RDMA_NOMSG`; `RDMA_ERROR`
//! carries an error code instead (and, for `ERR_VERS`, the supported
//! version range). With `RDMA_MSG`, the RPC message follows the header in
//! the same Send.
//!
//! - [`xdr`]: the bounds-checked XDR reader and writer.
//! - [`header`]: constants, and [`decode`], which validates a received call
//!   header against the RFC and our [`Limits`].
//! - [`chunk`]: the views of a validated header's segments and chunk lists.
//! - [`encode`]: reply headers and error reports.
//! - `backward`: the backward direction (RFC 8167), for the NFSv4.1
//!   backchannel; in the module unless it is built with
//!   `SVCRDMA_RS_BACKCHANNEL=n` (the host crate always has it).

#[cfg(svcrdma_rs_backchannel)]
pub mod backward;
pub mod chunk;
pub mod encode;
pub mod header;
pub mod xdr;

pub use chunk::{Chunk, ReadChunk, ReadList, ReadSegment, Segment, WriteList};
pub use encode::{
    encode_error_chunk, encode_error_for, encode_error_vers, encode_reply, reply_len, EncodeError,
};
pub use header::{decode, ChunkError, DecodeError, Header, Limits, Proc, Shape};
