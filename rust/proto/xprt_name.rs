// SPDX-License-Identifier: GPL-2.0

//! The transport class name (`xprt_name` module parameter).
//!
//! nfsd reads a listener request from `/proc/fs/nfsd/portlist` as
//! `"%15s %5u"`: a name longer than 15 bytes, or one containing white space,
//! could be registered but never asked for. We accept exactly the names that
//! can be written there and that read well in logs: 1 to 15 bytes of ASCII
//! letters, digits, `_` and `-`.

use core::fmt;

/// The longest name nfsd's portlist parser can pass through.
pub const MAX_LEN: usize = 15;

/// Why a transport class name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// The name is empty.
    Empty,
    /// The name is longer than [`MAX_LEN`] bytes.
    TooLong,
    /// The name contains a byte other than ASCII letters, digits, `_`, `-`.
    BadByte(u8),
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => f.write_str("the name is empty"),
            NameError::TooLong => write!(f, "the name is longer than {MAX_LEN} bytes"),
            NameError::BadByte(b) => write!(
                f,
                "byte 0x{b:02x} is not allowed (use letters, digits, '_' and '-')"
            ),
        }
    }
}

/// Checks that `name` can be registered as a transport class name.
pub fn validate(name: &[u8]) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_LEN {
        return Err(NameError::TooLong);
    }
    match name
        .iter()
        .find(|&&b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
    {
        Some(&b) => Err(NameError::BadByte(b)),
        None => Ok(()),
    }
}
