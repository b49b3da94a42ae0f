// SPDX-License-Identifier: GPL-2.0

//! Receive buffers: posted ahead, completed by the device, handed to nfsd.
//!
//! Each connection has one buffer per credit (plus backchannel), each of our
//! inline receive size, DMA-mapped once at accept and reposted after use
//! (`rdma::recv`). A completion queues the buffer's slot on the connection
//! and wakes an nfsd thread (`XPT_DATA`); `xpo_recvfrom` takes it from
//! there, and reposts the buffer once it has copied what it needs.

use super::connection::Connection;
use crate::{
    proto::inline::RECV_SIZE,
    rdma::recv::{RecvHandler, RecvSlot},
};

impl RecvHandler for Connection {
    const BUF_SIZE: u32 = RECV_SIZE;

    fn received(&self, slot: RecvSlot) {
        Connection::received(self, slot);
    }

    fn receive_failed(&self, status: u32) {
        Connection::receive_failed(self, status);
    }
}
