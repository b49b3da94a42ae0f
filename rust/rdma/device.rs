// SPDX-License-Identifier: GPL-2.0

//! An RDMA device (`struct ib_device`) as the policy sees it.

use kernel::prelude::*;

use crate::{
    bindings,
    proto::memreg::{DeviceCaps, Transport},
};

/// A device a CM id is bound to; borrowed for as long as that id lives.
#[derive(Clone, Copy)]
pub(crate) struct Device<'a> {
    dev: &'a bindings::ib_device,
    port: u32,
}

impl<'a> Device<'a> {
    /// Borrows the device and port of a bound CM id.
    ///
    /// # Safety
    ///
    /// `dev` must be the live device of a CM id that outlives `'a`.
    pub(crate) unsafe fn from_raw(dev: *mut bindings::ib_device, port: u32) -> Option<Self> {
        // SAFETY: non-null devices are live for `'a` (caller's promise).
        unsafe { dev.as_ref() }.map(|dev| Self { dev, port })
    }

    /// The C object, borrowed.
    pub(super) fn raw(&self) -> &'a bindings::ib_device {
        self.dev
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::ib_device {
        core::ptr::from_ref(self.dev).cast_mut()
    }

    /// The device's name (`rxe0`, `siw0`, `mlx5_0`, …).
    pub(crate) fn name(&self) -> &'a CStr {
        // SAFETY: `name` is a NUL-terminated array inside the live device.
        unsafe { CStr::from_char_ptr(self.dev.name.as_ptr()) }
    }

    /// The transport of the port the id is bound to.
    pub(crate) fn transport(&self) -> Transport {
        let (dev, port) = (self.as_ptr(), self.port);
        // SAFETY: `dev` is live and `port` is the id's port number; these
        // read immutable port data.
        unsafe {
            if bindings::svcrdma_rs_protocol_iwarp(dev, port) {
                Transport::Iwarp
            } else if bindings::svcrdma_rs_protocol_roce(dev, port) {
                Transport::Roce
            } else if bindings::svcrdma_rs_protocol_ib(dev, port) {
                Transport::Ib
            } else {
                Transport::Other
            }
        }
    }

    /// What the device can do for registration, as reported (before any
    /// test override).
    pub(crate) fn caps(&self) -> DeviceCaps {
        let a = &self.dev.attrs;
        DeviceCaps {
            fast_reg: a.device_cap_flags & bindings::IB_DEVICE_MEM_MGT_EXTENSIONS as u64 != 0,
            max_fast_reg_page_list_len: a.max_fast_reg_page_list_len,
            local_dma_lkey: a.kernel_cap_flags & u64::from(bindings::IBK_LOCAL_DMA_LKEY) != 0,
            // SAFETY: as in `transport`.
            read_with_inv: unsafe { bindings::svcrdma_rs_cap_read_inv(self.as_ptr(), self.port) },
        }
    }

    /// The device's limits.
    pub(crate) fn attrs(&self) -> &'a bindings::ib_device_attr {
        &self.dev.attrs
    }
}
