// SPDX-License-Identifier: GPL-2.0

//! DMA mappings made for one RPC's work requests, undone together.

use kernel::prelude::*;

use super::Device;
use crate::bindings;

/// One mapping: a page range or a kernel virtual range.
#[derive(Clone, Copy)]
struct Map {
    addr: u64,
    len: usize,
    dir: bindings::dma_data_direction,
    page: bool,
}

/// The mappings of one RPC on one device.
///
/// # Invariants
///
/// Every entry is a live mapping on `dev`, made by this value.
pub(crate) struct DmaMaps {
    dev: *mut bindings::ib_device,
    maps: KVec<Map>,
}

// SAFETY: the mappings are plain data; the device pointer is only used for
// (un)mapping calls, which are allowed from any thread.
unsafe impl Send for DmaMaps {}
// SAFETY: as above; `&self` offers no mutation.
unsafe impl Sync for DmaMaps {}

impl DmaMaps {
    /// An empty set for `dev`.
    ///
    /// # Safety
    ///
    /// The device must outlive the value.
    pub(crate) unsafe fn new(dev: &Device<'_>) -> Self {
        Self {
            dev: dev.as_ptr(),
            maps: KVec::new(),
        }
    }

    /// Maps `len` bytes at `offset` of `page` for `dir`; returns the bus
    /// address.
    ///
    /// # Safety
    ///
    /// The page range must stay allocated until [`DmaMaps::unmap_all`].
    pub(crate) unsafe fn map_page(
        &mut self,
        page: *mut bindings::page,
        offset: usize,
        len: usize,
        dir: bindings::dma_data_direction,
    ) -> Result<u64> {
        self.maps.reserve(1, GFP_KERNEL)?;
        // SAFETY: a live device and page range (invariant, caller).
        let addr = unsafe { bindings::svcrdma_rs_dma_map_page(self.dev, page, offset, len, dir) };
        self.record(addr, len, dir, true)
    }

    /// Maps `len` bytes of kernel memory at `ptr` for `dir`.
    ///
    /// # Safety
    ///
    /// The memory must be directly mapped (kmalloc or lowmem page) and stay
    /// allocated until [`DmaMaps::unmap_all`].
    pub(crate) unsafe fn map_virt(
        &mut self,
        ptr: *mut u8,
        len: usize,
        dir: bindings::dma_data_direction,
    ) -> Result<u64> {
        self.maps.reserve(1, GFP_KERNEL)?;
        // SAFETY: as the function's requirements say.
        let addr = unsafe { bindings::svcrdma_rs_dma_map_single(self.dev, ptr.cast(), len, dir) };
        self.record(addr, len, dir, false)
    }

    fn record(
        &mut self,
        addr: u64,
        len: usize,
        dir: bindings::dma_data_direction,
        page: bool,
    ) -> Result<u64> {
        // SAFETY: `addr` came from a mapping call on this device.
        if unsafe { bindings::svcrdma_rs_dma_mapping_error(self.dev, addr) } != 0 {
            return Err(EIO);
        }
        // INVARIANT: a live mapping on `dev`. Room was reserved above.
        self.maps
            .push_within_capacity(Map {
                addr,
                len,
                dir,
                page,
            })
            .map_err(|_| ENOMEM)?;
        Ok(addr)
    }

    /// Whether nothing is mapped.
    pub(crate) fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// Undoes every mapping (the device must be done with them).
    pub(crate) fn unmap_all(&mut self) {
        while let Some(m) = self.maps.pop() {
            // SAFETY: a live mapping on `dev` (invariant), no longer used by
            // the device (the caller waited for its work requests).
            unsafe {
                if m.page {
                    bindings::svcrdma_rs_dma_unmap_page(self.dev, m.addr, m.len, m.dir);
                } else {
                    bindings::svcrdma_rs_dma_unmap_single(self.dev, m.addr, m.len, m.dir);
                }
            }
        }
    }
}

impl Drop for DmaMaps {
    fn drop(&mut self) {
        self.unmap_all();
    }
}
