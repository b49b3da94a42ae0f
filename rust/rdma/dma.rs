// SPDX-License-Identifier: GPL-2.0

//! DMA mappings: the device they are made on ([`DmaDev`]), one buffer
//! mapped for its whole life ([`MappedBuf`]), and the mappings made for one
//! RPC's work requests, undone together ([`DmaMaps`]).

use core::{mem::MaybeUninit, ptr::NonNull};

use kernel::prelude::*;

use super::Device;
use crate::bindings;

/// The size of the pages runs are made of.
const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

/// Which way the device moves the data of a mapping.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// The device reads the memory (Sends, RDMA Writes).
    ToDevice,
    /// The device writes the memory (receives, RDMA Read sinks).
    FromDevice,
}

impl Dir {
    pub(super) fn raw(self) -> bindings::dma_data_direction {
        match self {
            Dir::ToDevice => bindings::DMA_TO_DEVICE,
            Dir::FromDevice => bindings::DMA_FROM_DEVICE,
        }
    }
}

/// A counted reference to the device memory is mapped on
/// (`ib_device_try_get()`), kept by every object that holds mappings: while
/// one exists, the device cannot finish unregistering, so it and its
/// mappings stay valid.
///
/// # Invariants
///
/// `ptr` is a device on which this value holds one registration count
/// (so the device is live), given back when it drops.
pub(crate) struct DmaDev(NonNull<bindings::ib_device>);

// SAFETY: the pointer is only used for mapping calls, which the DMA API
// allows from any thread, and for giving the count back (from any context).
unsafe impl Send for DmaDev {}
// SAFETY: as above; `&DmaDev` offers only mapping calls.
unsafe impl Sync for DmaDev {}

impl DmaDev {
    /// Holds `dev` registered; `ENODEV` if it is being unregistered.
    pub(crate) fn new(dev: &Device<'_>) -> Result<Self> {
        Self::hold(NonNull::new(dev.as_ptr()).ok_or(ENODEV)?)
    }

    /// Another count on the same device (which cannot be refused: ours
    /// keeps the device registered).
    pub(crate) fn try_clone(&self) -> Result<Self> {
        Self::hold(self.0)
    }

    /// Takes a registration count on `dev`, a live device.
    fn hold(dev: NonNull<bindings::ib_device>) -> Result<Self> {
        // SAFETY: `dev` is live (the callers': borrowed, or counted by us).
        if !unsafe { bindings::svcrdma_rs_ib_device_try_get(dev.as_ptr()) } {
            return Err(ENODEV);
        }
        // INVARIANT: counted just above.
        Ok(Self(dev))
    }

    /// The C object.
    pub(super) fn as_ptr(&self) -> *mut bindings::ib_device {
        self.0.as_ptr()
    }

    /// Whether `addr`, returned by a mapping call, is a failure.
    fn mapping_error(&self, addr: u64) -> bool {
        // SAFETY: a live device (invariant); `addr` came from a mapping call
        // on it.
        unsafe { bindings::svcrdma_rs_ib_dma_mapping_error(self.as_ptr(), addr) != 0 }
    }
}

impl Drop for DmaDev {
    fn drop(&mut self) {
        // SAFETY: our count (invariant), given back once; the device is not
        // used through this value afterwards.
        unsafe { bindings::ib_device_put(self.as_ptr()) };
    }
}

/// A zeroed kernel buffer, DMA-mapped on creation and unmapped when
/// dropped (a send or receive buffer, mapped once and reused).
///
/// The CPU and the device take turns: the owner syncs the bytes for the
/// device before handing it the buffer ([`MappedBuf::sync_for_device`]),
/// and for the CPU when the device is done
/// ([`MappedBuf::sync_for_cpu`]). Whoever owns the value decides whose
/// turn it is; it must not be dropped while the device may still use it.
///
/// # Invariants
///
/// `buf`'s storage (never resized, so never moved) is mapped at `addr`
/// on `dev` for `dir`, for its whole length.
pub(crate) struct MappedBuf {
    dev: DmaDev,
    buf: KVec<u8>,
    addr: u64,
    dir: Dir,
}

impl MappedBuf {
    /// Allocates `len` zeroed bytes and maps them on `dev` for `dir`.
    pub(crate) fn new(dev: &DmaDev, len: usize, dir: Dir) -> Result<Self> {
        let dev = dev.try_clone()?;
        let mut buf = KVec::with_capacity(len, GFP_KERNEL)?;
        buf.resize(len, 0, GFP_KERNEL)?;
        // SAFETY: a live device (`DmaDev` invariant) and a kmalloc'ed buffer
        // of `len` bytes, which stays put until the unmapping in `drop`.
        let addr = unsafe {
            bindings::svcrdma_rs_ib_dma_map_single(
                dev.as_ptr(),
                buf.as_mut_ptr().cast(),
                len,
                dir.raw(),
            )
        };
        if dev.mapping_error(addr) {
            return Err(ENOMEM);
        }
        // INVARIANT: mapped just above, whole.
        Ok(Self {
            dev,
            buf,
            addr,
            dir,
        })
    }

    /// The bus address of the first byte.
    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    /// Hands the first `len` bytes to the device.
    pub(crate) fn sync_for_device(&self, len: usize) {
        // SAFETY: a live mapping (invariant), `len` clamped to it.
        unsafe {
            bindings::svcrdma_rs_ib_dma_sync_single_for_device(
                self.dev.as_ptr(),
                self.addr,
                len.min(self.buf.len()),
                self.dir.raw(),
            )
        };
    }

    /// Takes the first `len` bytes back from the device.
    pub(crate) fn sync_for_cpu(&self, len: usize) {
        // SAFETY: a live mapping (invariant), `len` clamped to it.
        unsafe {
            bindings::svcrdma_rs_ib_dma_sync_single_for_cpu(
                self.dev.as_ptr(),
                self.addr,
                len.min(self.buf.len()),
                self.dir.raw(),
            )
        };
    }
}

impl core::ops::Deref for MappedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl core::ops::DerefMut for MappedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for MappedBuf {
    fn drop(&mut self) {
        // The owner drops the buffer only once the device is done with it
        // (type documentation).
        // SAFETY: a live mapping of the whole buffer (invariant).
        unsafe {
            bindings::svcrdma_rs_ib_dma_unmap_single(
                self.dev.as_ptr(),
                self.addr,
                self.buf.len(),
                self.dir.raw(),
            )
        };
    }
}

/// One mapping: a kernel virtual range, or a run of pages whose bus
/// addresses are `DmaMaps::addrs[at..at + count]`.
#[derive(Clone, Copy)]
enum Map {
    Virt {
        addr: u64,
        len: usize,
        dir: bindings::dma_data_direction,
    },
    Pages {
        at: usize,
        count: usize,
        offset: usize,
        len: usize,
        dir: bindings::dma_data_direction,
    },
}

/// Bytes mapped as a run: `len` bytes whose first `first` lie at
/// `addrs[0]`, each following whole page at the next address, the rest at
/// the last. No piece is longer than a page.
#[derive(Clone, Copy)]
pub(crate) struct Run<'a> {
    addrs: &'a [u64],
    first: usize,
    len: usize,
}

impl<'a> Run<'a> {
    /// `len` bytes mapped at `addr`, in one piece; `EINVAL` if longer than
    /// a page.
    pub(crate) fn one(addr: &'a u64, len: usize) -> Result<Self> {
        if len > PAGE_SIZE {
            return Err(EINVAL);
        }
        Ok(Self {
            addrs: core::slice::from_ref(addr),
            first: len,
            len,
        })
    }

    /// Its pieces, in order.
    pub(crate) fn pieces(&self) -> Pieces<'a> {
        Pieces {
            addrs: self.addrs,
            at: 0,
            left: self.len,
            next: self.first,
        }
    }
}

/// The pieces `(bus address, bytes)` of a [`Run`], which can be looked at
/// before they are taken.
pub(crate) struct Pieces<'a> {
    addrs: &'a [u64],
    at: usize,
    /// Bytes of the run not yet taken.
    left: usize,
    /// Bytes of the next piece, unless fewer are left.
    next: usize,
}

impl Pieces<'_> {
    /// The next piece, not taken.
    #[inline]
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        let &addr = self.addrs.get(self.at)?;
        // At most a page (`Run`), so it fits.
        Some((addr, self.next.min(self.left) as u32))
    }

    /// Takes the next pieces, in order, into `out`, each as an SGE with
    /// `lkey`, while there is room and their bytes come to at most
    /// `budget`. Returns how many it wrote (the first entries of `out`)
    /// and their bytes.
    #[inline]
    pub(crate) fn take_into(
        &mut self,
        out: &mut [MaybeUninit<bindings::ib_sge>],
        budget: u64,
        lkey: u32,
    ) -> (usize, u64) {
        // Worked on in locals, written back once.
        let addrs = self.addrs.get(self.at..).unwrap_or(&[]);
        let (mut left, mut next, mut room) = (self.left, self.next, budget);
        let mut n = 0usize;
        for (slot, &addr) in out.iter_mut().zip(addrs) {
            let len = next.min(left);
            if len == 0 || len as u64 > room {
                break;
            }
            slot.write(bindings::ib_sge {
                addr,
                // At most a page (`Run`), so it fits.
                length: len as u32,
                lkey,
            });
            left -= len;
            room -= len as u64;
            next = PAGE_SIZE;
            n += 1;
        }
        self.at += n;
        self.left = left;
        self.next = next;
        (n, budget - room)
    }
}

impl Iterator for Pieces<'_> {
    type Item = (u64, u32);

    #[inline]
    fn next(&mut self) -> Option<(u64, u32)> {
        let piece = self.peek()?;
        self.at += 1;
        self.left -= piece.1 as usize;
        self.next = PAGE_SIZE;
        Some(piece)
    }
}

/// Makes room for `n` more entries in `v`, calling the allocator only if
/// there is less (the data path's vectors keep their storage, so it
/// seldom does).
#[inline]
pub(super) fn ensure_room<T>(v: &mut KVec<T>, n: usize) -> Result {
    if v.capacity() - v.len() < n {
        v.reserve(n, GFP_KERNEL)?;
    }
    Ok(())
}

/// Appends `x` to `v` in room made before ([`ensure_room`]); fails if there
/// is none.
#[inline]
pub(super) fn push_in_room<T>(v: &mut KVec<T>, x: T) -> Result {
    let Some(slot) = v.spare_capacity_mut().first_mut() else {
        return Err(ENOMEM);
    };
    slot.write(x);
    // SAFETY: the entry past the length was written just above.
    unsafe { v.inc_len(1) };
    Ok(())
}

/// The pages a run of `len` bytes from `offset` in its first page spans.
fn pages_spanned(offset: usize, len: usize) -> usize {
    (offset % PAGE_SIZE + len).div_ceil(PAGE_SIZE)
}

/// The mappings of one RPC on one device.
///
/// # Invariants
///
/// Every entry of `maps` is a live mapping on `dev`, made by this value; a
/// run's bus addresses are the entries of `addrs` it names.
pub(crate) struct DmaMaps {
    dev: DmaDev,
    maps: KVec<Map>,
    addrs: KVec<u64>,
    /// The device takes kernel virtual addresses (rxe, siw): unmapping
    /// does nothing there (`ib_dma_unmap_*`), so none is called.
    virt: bool,
}

impl DmaMaps {
    /// An empty set for `dev`.
    pub(crate) fn new(dev: &DmaDev) -> Result<Self> {
        let dev = dev.try_clone()?;
        // SAFETY: a live device (`DmaDev` invariant).
        let virt = unsafe { bindings::svcrdma_rs_ib_uses_virt_dma(dev.as_ptr()) };
        Ok(Self {
            dev,
            maps: KVec::new(),
            addrs: KVec::new(),
            virt,
        })
    }

    /// Maps `len` bytes of the run of `pages`, from `offset` in the first
    /// (below the page size) on through the pages after it, each page
    /// separately, for `dir`; returns the run's bus addresses. Fails, with
    /// nothing mapped, if `pages` is too short or a mapping fails.
    ///
    /// # Safety
    ///
    /// The pages must stay allocated until [`DmaMaps::unmap_all`].
    pub(crate) unsafe fn map_pages(
        &mut self,
        pages: &[*mut bindings::page],
        offset: usize,
        len: usize,
        dir: Dir,
    ) -> Result<Run<'_>> {
        let count = pages_spanned(offset, len);
        if offset >= PAGE_SIZE || count > pages.len() || len == 0 {
            return Err(EINVAL);
        }
        let npages = u32::try_from(count).map_err(|_| EINVAL)?;
        ensure_room(&mut self.maps, 1)?;
        ensure_room(&mut self.addrs, count)?;
        let at = self.addrs.len();
        let room = self.addrs.spare_capacity_mut();
        if room.len() < count {
            return Err(ENOMEM);
        }
        let (dev, dir) = (self.dev.as_ptr(), dir.raw());
        // A live device (invariant) and pages that stay allocated until
        // the unmapping (the caller's promise); `room` has `count` writable
        // entries, which the shim fills for the pages it maps (all of them
        // or, failing, none left mapped).
        // SAFETY: so the shim maps live pages and writes inside `room`.
        let mapped = unsafe {
            bindings::svcrdma_rs_ib_dma_map_pages(
                dev,
                pages.as_ptr(),
                npages,
                offset,
                len,
                dir,
                room.as_mut_ptr().cast(),
            )
        };
        if usize::try_from(mapped).ok() != Some(count) {
            // Nothing stays mapped on failure (the shim undoes its own).
            return Err(if mapped < 0 { EIO } else { EINVAL });
        }
        // SAFETY: the shim wrote the first `count` spare entries.
        unsafe { self.addrs.inc_len(count) };
        // INVARIANT: live mappings on `dev`, their addresses just recorded.
        // Room was made above.
        push_in_room(
            &mut self.maps,
            Map::Pages {
                at,
                count,
                offset,
                len,
                dir,
            },
        )?;
        let addrs = self.addrs.get(at..).ok_or(EINVAL)?;
        Ok(Run {
            addrs,
            first: (PAGE_SIZE - offset).min(len),
            len,
        })
    }

    /// Maps `len` bytes of kernel memory at `ptr` for `dir`.
    ///
    /// # Safety
    ///
    /// The memory must be directly mapped (kmalloc or lowmem page) and stay
    /// allocated until [`DmaMaps::unmap_all`].
    pub(crate) unsafe fn map_virt(&mut self, ptr: *mut u8, len: usize, dir: Dir) -> Result<u64> {
        ensure_room(&mut self.maps, 1)?;
        let (dev, dir) = (self.dev.as_ptr(), dir.raw());
        // SAFETY: as the function's requirements say.
        let addr = unsafe { bindings::svcrdma_rs_ib_dma_map_single(dev, ptr.cast(), len, dir) };
        if self.dev.mapping_error(addr) {
            return Err(EIO);
        }
        // INVARIANT: a live mapping on `dev`. Room was made above.
        push_in_room(&mut self.maps, Map::Virt { addr, len, dir })?;
        Ok(addr)
    }

    /// Whether nothing is mapped.
    pub(crate) fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// Undoes every mapping. The memory they map may go right after, so the
    /// device must be done with them: the one holder of a `DmaMaps`
    /// (`MappedPages`) lives in the owner of the chains that use its
    /// mappings, which nobody holds from a chain's post until its
    /// completion or the QP's destruction ([`super::owned`]).
    #[inline]
    pub(crate) fn unmap_all(&mut self) {
        if self.virt || self.maps.is_empty() {
            // Nothing to undo on such a device (see `virt`), or nothing
            // mapped (every run's addresses come with its entry).
            self.maps.clear();
            self.addrs.clear();
            return;
        }
        self.unmap_each();
    }

    /// [`DmaMaps::unmap_all`] on a device that needs its mappings undone.
    fn unmap_each(&mut self) {
        let dev = self.dev.as_ptr();
        while let Some(m) = self.maps.pop() {
            // Made by this value as recorded, undone once (taken out of
            // `maps` first); `dev` keeps the device registered.
            match m {
                // SAFETY: so it is a live mapping on a live device
                // (invariant).
                Map::Virt { addr, len, dir } => unsafe {
                    bindings::svcrdma_rs_ib_dma_unmap_single(dev, addr, len, dir)
                },
                Map::Pages {
                    at,
                    count,
                    offset,
                    len,
                    dir,
                } => {
                    let Some(addrs) = self.addrs.get(at..at + count) else {
                        // Cannot happen: recorded with its addresses.
                        kernel::warn_on!(true);
                        continue;
                    };
                    // `count` fits: checked when mapped.
                    // SAFETY: as above, with the run's addresses.
                    unsafe {
                        bindings::svcrdma_rs_ib_dma_unmap_pages(
                            dev,
                            addrs.as_ptr(),
                            count as u32,
                            offset,
                            len,
                            dir,
                        )
                    }
                }
            }
        }
        self.addrs.clear();
    }
}

impl Drop for DmaMaps {
    fn drop(&mut self) {
        self.unmap_all();
    }
}
