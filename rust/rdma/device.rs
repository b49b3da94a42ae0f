// SPDX-License-Identifier: GPL-2.0

//! An RDMA device (`struct ib_device`) as the policy sees it.

use core::fmt;

use kernel::{prelude::*, str::CString, types::Opaque};

use crate::{
    bindings,
    proto::memreg::{DeviceCaps, Transport},
};

/// A device a CM id is bound to; borrowed for as long as that id lives.
///
/// The device is C's, which may change parts of it at any time (counts,
/// locks, lists): it is borrowed as [`Opaque`], and only its name and
/// attributes, fixed once it is registered, are read as Rust values.
#[derive(Clone, Copy)]
pub(crate) struct Device<'a> {
    dev: &'a Opaque<bindings::ib_device>,
    port: u32,
}

impl<'a> Device<'a> {
    /// Borrows the device and port of a bound CM id.
    ///
    /// # Safety
    ///
    /// `dev` must be the live device of a CM id that outlives `'a`.
    pub(crate) unsafe fn from_raw(dev: *mut bindings::ib_device, port: u32) -> Option<Self> {
        // SAFETY: non-null devices are live for `'a` (caller's promise);
        // `Opaque<T>` has the layout of `T`.
        unsafe { dev.cast::<Opaque<bindings::ib_device>>().as_ref() }.map(|dev| Self { dev, port })
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::ib_device {
        self.dev.get()
    }

    /// The device's name (`rxe0`, `siw0`, `mlx5_0`, …), copied: a rename
    /// from user space (`ib_device_rename`) may rewrite it at any time, so
    /// it is read once, byte by byte up to its NUL, and never borrowed.
    pub(crate) fn name(&self) -> DevName {
        /// The length of the array `p` points to.
        fn array_len<T, const N: usize>(_: *const [T; N]) -> usize {
            N
        }
        // SAFETY: a field of the live device; no reference is made.
        let name = unsafe { core::ptr::addr_of!((*self.as_ptr()).name) };
        let cap = array_len(name).min(NAME_MAX - 1);
        let p = name.cast::<u8>();
        let mut out = DevName {
            len: 0,
            buf: [0; NAME_MAX],
        };
        while out.len < cap {
            // SAFETY: below the array's length, in the live device; read
            // volatile, as a rename may be writing it.
            let b = unsafe { p.add(out.len).read_volatile() };
            if b == 0 {
                break;
            }
            out.buf[out.len] = b;
            out.len += 1;
        }
        out
    }

    /// The transport of the port the id is bound to.
    pub(crate) fn transport(&self) -> Transport {
        let (dev, port) = (self.as_ptr(), self.port);
        // SAFETY: `dev` is live and `port` is the id's port number; these
        // read immutable port data.
        unsafe {
            if bindings::svcrdma_rs_rdma_protocol_iwarp(dev, port) {
                Transport::Iwarp
            } else if bindings::svcrdma_rs_rdma_protocol_roce(dev, port) {
                Transport::Roce
            } else if bindings::svcrdma_rs_rdma_protocol_ib(dev, port) {
                Transport::Ib
            } else {
                Transport::Other
            }
        }
    }

    /// What the device can do for registration, as reported (before any
    /// test override).
    pub(crate) fn caps(&self) -> DeviceCaps {
        let a = self.attrs();
        DeviceCaps {
            fast_reg: a.device_cap_flags & bindings::IB_DEVICE_MEM_MGT_EXTENSIONS as u64 != 0,
            max_fast_reg_page_list_len: a.max_fast_reg_page_list_len,
            local_dma_lkey: a.kernel_cap_flags & u64::from(bindings::IBK_LOCAL_DMA_LKEY) != 0,
            // SAFETY: as in `transport`.
            read_with_inv: unsafe {
                bindings::svcrdma_rs_rdma_cap_read_inv(self.as_ptr(), self.port)
            },
        }
    }

    /// The device's limits.
    pub(crate) fn attrs(&self) -> &'a bindings::ib_device_attr {
        // SAFETY: the device is live for `'a`; the driver fills `attrs`
        // before it registers the device and nothing writes them after.
        unsafe { &*core::ptr::addr_of!((*self.as_ptr()).attrs) }
    }
}

/// The most bytes of a device name we keep (`IB_DEVICE_NAME_MAX`).
const NAME_MAX: usize = 64;

/// A device name, copied.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct DevName {
    len: usize,
    buf: [u8; NAME_MAX],
}

impl DevName {
    /// The name's bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The name as a C string (for directory names).
    pub(crate) fn to_cstring(self) -> Result<CString> {
        CString::try_from_fmt(fmt!("{}", self))
    }
}

impl fmt::Display for DevName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Device names are ASCII; show anything else escaped.
        for &b in self.as_bytes() {
            if b.is_ascii_graphic() {
                fmt::Write::write_char(f, char::from(b))?;
            } else {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

impl kernel::fmt::Display for DevName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
