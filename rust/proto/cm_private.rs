// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA version 1 CM private data (RFC 8797).
//!
//! The 8-octet message a peer puts in the RDMA-CM private data of a
//! connection request or accept:
//!
//! ```text
//!  0               1               2               3
//! +---------------+---------------+---------------+---------------+
//! |                 Format Identifier 0xf6ab0e18                  |
//! +---------------+-------------+-+---------------+---------------+
//! |    Version    |   Reserved  |R|   Send Size   |  Receive Size |
//! +---------------+-------------+-+---------------+---------------+
//! ```
//!
//! Receiving: the identifier is searched at *any* byte offset (other
//! protocols, such as MPAv2, may put data in front of it); an occurrence
//! counts only if its Version is 1 and all 8 octets lie inside the buffer
//! (RFC 8797 section 5.2). The first occurrence that qualifies wins. The
//! Reserved bits are ignored. When nothing qualifies, the peer is taken to
//! have sent R clear and both sizes at the 1024-octet default: an absent or
//! malformed message is never an error.
//!
//! Sizes travel as `bytes / 1024 - 1` in one octet: 1024 to 262144 bytes.

/// The format identifier, network byte order on the wire.
pub const FORMAT_ID: u32 = 0xf6ab_0e18;
/// The only version defined.
pub const VERSION: u8 = 1;
/// Length of the message.
pub const LEN: usize = 8;
/// The inline threshold every RPC-over-RDMA v1 peer supports (RFC 8166).
pub const DEFAULT_INLINE: u32 = 1024;
/// The largest size the message can express.
pub const MAX_INLINE: u32 = 256 * 1024;
/// The R (remote invalidation) bit in octet 5.
const R_BIT: u8 = 0x01;

/// What a peer's CM private data says (or the RFC defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmPrivate {
    /// R: the peer can take Send With Invalidate for every STag it exposes.
    pub remote_invalidate: bool,
    /// The largest message the peer sends inline, bytes.
    pub send_size: u32,
    /// The largest message the peer can receive inline, bytes.
    pub recv_size: u32,
}

impl CmPrivate {
    /// What a peer that sent no (conforming) message is taken to have said.
    pub const DEFAULT: Self = Self {
        remote_invalidate: false,
        send_size: DEFAULT_INLINE,
        recv_size: DEFAULT_INLINE,
    };

    /// Encodes our own message (Reserved bits zero).
    ///
    /// A size is rounded down to a multiple of 1024 and clamped to
    /// [`DEFAULT_INLINE`]..=[`MAX_INLINE`]: we never advertise more than we
    /// have, except that 1024 is every peer's floor.
    pub fn encode(&self) -> [u8; LEN] {
        let id = FORMAT_ID.to_be_bytes();
        [
            id[0],
            id[1],
            id[2],
            id[3],
            VERSION,
            if self.remote_invalidate { R_BIT } else { 0 },
            encode_size(self.send_size),
            encode_size(self.recv_size),
        ]
    }
}

impl Default for CmPrivate {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Decodes an encoded size octet: `(value + 1) * 1024`.
pub fn decode_size(v: u8) -> u32 {
    (u32::from(v) + 1) * 1024
}

/// Encodes a size in bytes, rounding down, clamped to the expressible range.
pub fn encode_size(bytes: u32) -> u8 {
    let k = bytes.clamp(DEFAULT_INLINE, MAX_INLINE) / 1024;
    // 1..=256, so k - 1 fits.
    (k - 1) as u8
}

/// Finds the first qualifying message in `buf`: its offset and contents.
pub fn find(buf: &[u8]) -> Option<(usize, CmPrivate)> {
    let id = FORMAT_ID.to_be_bytes();
    buf.windows(4)
        .enumerate()
        .filter(|(_, w)| *w == id)
        .find_map(|(off, _)| {
            let m = buf.get(off..off.checked_add(LEN)?)?;
            (m[4] == VERSION).then(|| {
                (
                    off,
                    CmPrivate {
                        remote_invalidate: m[5] & R_BIT != 0,
                        send_size: decode_size(m[6]),
                        recv_size: decode_size(m[7]),
                    },
                )
            })
        })
}

/// What the peer's private data says, or [`CmPrivate::DEFAULT`] when it
/// holds no qualifying message (including no private data at all).
pub fn decode(buf: &[u8]) -> CmPrivate {
    find(buf).map_or(CmPrivate::DEFAULT, |(_, m)| m)
}
