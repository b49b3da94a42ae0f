// SPDX-License-Identifier: GPL-2.0

//! One nfsd request slot (`struct svc_rqst`) as a transport sees it: the
//! argument pages a Call is assembled into, the Reply's `xdr_buf`, and the
//! transport's per-request context pointer.

use core::{marker::PhantomData, ptr::NonNull};

use kernel::{page::BorrowedPage, prelude::*};

use super::SvcXprt;
use crate::{bindings, proto::layout::ArgShape};

/// The page size the argument and reply buffers are made of.
pub(crate) const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

/// Borrows `page` as the kernel crate's page type (`None` if null), to
/// copy into or out of it through a temporary mapping.
///
/// # Safety
///
/// `page` is null or a live page that stays allocated for `'a`.
pub(super) unsafe fn borrow_page<'a>(page: *mut bindings::page) -> Option<BorrowedPage<'a>> {
    // The kernel crate's `struct page` and ours are the one C type.
    let page = NonNull::new(page.cast::<kernel::bindings::page>())?;
    // SAFETY: live for `'a` (the caller's promise).
    Some(unsafe { BorrowedPage::from_raw(page) })
}

/// Writes `n` bytes at `off` of `page`: `src`'s first `n`, or zeros.
///
/// # Safety
///
/// Nothing else reads or writes those bytes of the page meanwhile.
unsafe fn fill_page(page: &BorrowedPage<'_>, off: usize, n: usize, src: Option<&[u8]>) -> Result {
    match src {
        Some(s) => {
            let s = s.get(..n).ok_or(EINVAL)?;
            // SAFETY: `s` has `n` readable bytes; nothing else uses the
            // page's bytes (the caller's promise); the bounds are checked.
            unsafe { page.write_raw(s.as_ptr(), off, n) }
        }
        // SAFETY: as above.
        None => unsafe { page.fill_zero_raw(off, n) },
    }
}

/// Moves the page references in `slots`, each of which holds a page (the
/// callers check), to the end of `pages`, leaving the slots empty: all of
/// them, or (failing) none.
fn move_slots(slots: &mut [*mut bindings::page], pages: &mut KVec<*mut bindings::page>) -> Result {
    let n = slots.len();
    pages.reserve(n, GFP_KERNEL)?;
    let Some(room) = pages.spare_capacity_mut().get_mut(..n) else {
        // Cannot happen: reserved above.
        kernel::warn_on!(true);
        return Err(ENOMEM);
    };
    for (dst, slot) in room.iter_mut().zip(slots.iter_mut()) {
        dst.write(*slot);
        *slot = core::ptr::null_mut();
    }
    // SAFETY: the room held `n` entries past the length, and the loop
    // above wrote each of them.
    unsafe { pages.inc_len(n) };
    Ok(())
}

/// Pages moved out of a request ([`Rqst::take_arg_pages`],
/// [`Rqst::take_reply_pages`]), each with its reference, which is put when
/// the value is cleared or dropped (or moved on by
/// [`Rqst::install_arg_pages`] and the `give_back_*` methods).
///
/// Pages taken from a Reply come with where the Reply's bytes lie in them
/// ([`HeldPages::reply_pieces`]).
///
/// # Invariants
///
/// The value holds one reference on each page in `pages`. `reply` is set
/// only by [`Rqst::take_reply_pages`], together with the pages it fills,
/// and cleared whenever they go: its page list is `pages[first..]`, and its
/// head and tail each lie within one of those pages (checked by
/// `take_reply_pages`).
pub(crate) struct HeldPages {
    pages: KVec<*mut bindings::page>,
    reply: Option<ReplyLayout>,
}

// SAFETY: page references are not tied to a thread; the pointers are only
// read through `&HeldPages`.
unsafe impl Send for HeldPages {}
// SAFETY: as above.
unsafe impl Sync for HeldPages {}

impl HeldPages {
    /// No pages.
    pub(crate) const fn new() -> Self {
        Self {
            pages: KVec::new(),
            reply: None,
        }
    }

    /// Room for `n` pages in all, so that moves into the value never
    /// allocate.
    pub(crate) fn reserve_room(&mut self, n: usize) -> Result {
        let more = n.saturating_sub(self.pages.len());
        self.pages.reserve(more, GFP_KERNEL)?;
        Ok(())
    }

    /// How many pages are held.
    pub(crate) fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether no page is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// The `i`th page: one the value holds a reference on, so it stays
    /// allocated until the value is cleared, dropped or emptied.
    pub(crate) fn page(&self, i: usize) -> Option<*mut bindings::page> {
        self.pages.get(i).copied()
    }

    /// Allocates `n` pages into the value, which must hold none (the sink
    /// of a Call assembled away from any request), with `flags`, taking
    /// `spare`'s first (pages a request gave up,
    /// [`Rqst::install_arg_pages`]); all or none.
    pub(crate) fn alloc(
        &mut self,
        n: usize,
        spare: &mut HeldPages,
        flags: kernel::alloc::Flags,
    ) -> Result {
        if !self.is_empty() {
            return Err(EBUSY);
        }
        self.reply = None;
        self.pages.reserve(n, flags)?;
        spare.reply = None;
        while self.pages.len() < n {
            let Some(page) = spare.pages.pop() else {
                break;
            };
            // INVARIANT: the reference moves with the page.
            self.push_reserved(page);
        }
        for _ in self.pages.len()..n {
            let Ok(page) = kernel::page::Page::alloc_page(flags) else {
                self.clear();
                return Err(ENOMEM);
            };
            // INVARIANT: the new page's one reference moves into the value
            // (put by `clear`, or moved on with the page). The kernel
            // crate's `struct page` and ours are the one C type.
            let page = core::mem::ManuallyDrop::new(page);
            self.push_reserved(page.as_ptr().cast());
        }
        Ok(())
    }

    /// Adds `page` with its reference, into room reserved before. Were
    /// there none (a bug: every caller reserves first), it warns and puts
    /// the page.
    fn push_reserved(&mut self, page: *mut bindings::page) {
        if let Err(e) = self.pages.push_within_capacity(page) {
            kernel::warn_on!(true);
            // SAFETY: the reference came with the page, and leaves with it.
            unsafe { bindings::svcrdma_rs_put_page(e.0) };
        }
    }

    /// Copies `src` into the held pages, taken as one buffer, at `offset`.
    pub(crate) fn write(&mut self, offset: usize, src: &[u8]) -> Result {
        self.fill(offset, src.len(), Some(src))
    }

    /// Zeroes `len` bytes of the held pages, taken as one buffer, at
    /// `offset`.
    pub(crate) fn zero(&mut self, offset: usize, len: usize) -> Result {
        self.fill(offset, len, None)
    }

    /// Writes `len` bytes at `offset` of the held pages: `src`'s, or zeros.
    fn fill(&mut self, offset: usize, len: usize, src: Option<&[u8]>) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.pages.len().saturating_mul(PAGE_SIZE) {
            return Err(EMSGSIZE);
        }
        let (mut at, mut done) = (offset, 0);
        while at < end {
            // SAFETY: a page the value holds a reference on, so live while
            // `self` is borrowed.
            let page = unsafe { borrow_page(self.page(at / PAGE_SIZE).ok_or(EINVAL)?) };
            let page = page.ok_or(EINVAL)?;
            let off = at % PAGE_SIZE;
            let n = (PAGE_SIZE - off).min(end - at);
            let src = src.map(|s| s.get(done..).unwrap_or(&[]));
            // The holder alone uses its pages (`&mut self`); it lends them to
            // the device only through `MappedPages`, which writes them only
            // while nothing maps them.
            // SAFETY: so nothing else reads or writes them meanwhile.
            unsafe { fill_page(&page, off, n, src) }?;
            done += n;
            at += n;
        }
        Ok(())
    }

    /// The pages from the `i`th, `n` of them: ones the value holds a
    /// reference on (see [`HeldPages::page`]).
    pub(crate) fn run(&self, i: usize, n: usize) -> Option<&[*mut bindings::page]> {
        self.pages.get(i..i.checked_add(n)?)
    }

    /// Puts every page (storage kept), in one call.
    pub(crate) fn clear(&mut self) {
        self.reply = None;
        let Ok(n) = i32::try_from(self.pages.len()) else {
            // Cannot happen (a request has a few hundred pages at most):
            // they go one at a time then.
            while let Some(page) = self.pages.pop() {
                // SAFETY: the entry carried one of our references
                // (invariant), which leaves with it.
                unsafe { bindings::svcrdma_rs_put_page(page) };
            }
            return;
        };
        if n > 0 {
            // Every entry carries one of our references (invariant), which
            // `release_pages` puts; the entries go right after.
            // SAFETY: so each reference is put once, and `n` entries exist.
            unsafe { bindings::svcrdma_rs_release_pages(self.pages.as_mut_ptr(), n) };
        }
        self.pages.clear();
    }

    /// Forgets every page without putting it: the pages stay allocated for
    /// good (for memory a device may still reach).
    pub(crate) fn leak(&mut self) {
        self.reply = None;
        // INVARIANT: the references are given up, not put.
        self.pages.clear();
    }

    /// Calls `f` on each span of bytes `[start, end)` of the Reply whose
    /// pages these are, in order: the head, a run of the page list, the
    /// tail. Every span lies in memory of pages this value holds. Fails if
    /// the pages are not a Reply's, or the range is outside it.
    pub(crate) fn reply_spans(
        &self,
        start: usize,
        end: usize,
        f: impl FnMut(Span<'_>) -> Result,
    ) -> Result {
        let r = self.reply.as_ref().ok_or(EINVAL)?;
        // Page-list runs are pages we hold; the head and tail lie in them
        // too (invariant).
        let list = self.pages.get(r.first..).unwrap_or(&[]);
        walk_reply(
            r.head,
            r.page_base,
            r.page_len,
            r.tail,
            r.len,
            list,
            start,
            end,
            f,
        )
    }

    /// Calls `f` on the bytes of each contiguous piece of `[start, end)` of
    /// the Reply whose pages these are, in order.
    pub(crate) fn reply_bytes(
        &self,
        start: usize,
        end: usize,
        mut f: impl FnMut(&[u8]) -> Result,
    ) -> Result {
        self.reply_spans(start, end, |span| {
            span.pieces(|p| {
                // The piece lies in pages we hold (`reply_spans`), which
                // stay while `self` is borrowed; nfsd no longer writes a
                // Reply it handed to `xpo_sendto`, and the slice dies with
                // `f`.
                // SAFETY: so the memory stays valid and unchanged meanwhile.
                f(unsafe { p.bytes() })
            })
        })
    }
}

impl Drop for HeldPages {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Where a Reply's bytes lie once its pages were taken: the head and tail
/// kvecs, and the page list as indices into the taken pages.
#[derive(Clone, Copy)]
struct ReplyLayout {
    head: (*mut u8, usize),
    /// Index, among the taken pages, of the page list's first page.
    first: usize,
    page_base: usize,
    page_len: usize,
    tail: (*mut u8, usize),
    /// The Reply's length (`rq_res.len`).
    len: usize,
}

/// Calls `f` on each span of `[start, end)` of a Reply made of `head`,
/// `page_len` bytes of the page list `pages` from `page_base`, and `tail`,
/// `len` bytes in all: the page list's part is one run.
#[allow(clippy::too_many_arguments)]
fn walk_reply<'p>(
    head: (*mut u8, usize),
    page_base: usize,
    page_len: usize,
    tail: (*mut u8, usize),
    len: usize,
    pages: &'p [*mut bindings::page],
    start: usize,
    end: usize,
    mut f: impl FnMut(Span<'p>) -> Result,
) -> Result {
    if start > end || end > len {
        return Err(EINVAL);
    }
    // Head.
    let he = head.1;
    if start < he && end > 0 {
        let e = end.min(he);
        f(Span::Virt(head.0.wrapping_add(start), e - start))?;
    }
    // Pages.
    let (ps, pe) = (he, he + page_len);
    let (pos, stop) = (start.max(ps) - ps, end.min(pe).max(ps) - ps);
    if start < pe && pos < stop {
        let (from, to) = (page_base + pos, page_base + stop);
        let run = pages
            .get(from / PAGE_SIZE..to.div_ceil(PAGE_SIZE))
            .ok_or(EINVAL)?;
        f(Span::Pages(run, from % PAGE_SIZE, stop - pos))?;
    }
    // Tail.
    let (ts, te) = (pe, pe + tail.1);
    if start < te && end > ts {
        let s = start.max(ts) - ts;
        let e = end.min(te) - ts;
        f(Span::Virt(tail.0.wrapping_add(s), e - s))?;
    }
    Ok(())
}

/// A request slot borrowed for one `xpo_*` call, whose transport context
/// (`rq_xprt_ctxt`) is a `C` when it has one.
///
/// # Invariants
///
/// `ptr` is a live `svc_rqst` owned by the calling nfsd thread for `'a`.
/// Its `rq_xprt_ctxt` is null or comes from `KBox::<C>::into_raw`, owned by
/// the request (sunrpc gives it back through `xpo_release_ctxt`).
pub(crate) struct Rqst<'a, C> {
    ptr: *mut bindings::svc_rqst,
    _p: PhantomData<(&'a mut bindings::svc_rqst, KBox<C>)>,
}

/// A span of a Reply: virtual memory (head or tail), or a run of its page
/// list.
#[derive(Clone, Copy)]
pub(crate) enum Span<'p> {
    /// `len` bytes at kernel virtual address `ptr`.
    Virt(*mut u8, usize),
    /// `len` bytes from `offset` (below the page size) in the first of
    /// `pages`, on through the pages after it; `pages` are exactly the ones
    /// the bytes touch.
    Pages(&'p [*mut bindings::page], usize, usize),
}

impl Span<'_> {
    /// Calls `f` on each contiguous piece of the span: itself, or each
    /// page's part of a run. Fails on an empty page slot.
    pub(crate) fn pieces(&self, mut f: impl FnMut(Piece) -> Result) -> Result {
        match *self {
            Span::Virt(p, l) => f(Piece::Virt(p, l)),
            Span::Pages(pages, mut off, mut left) => {
                for &page in pages {
                    if page.is_null() {
                        return Err(EINVAL);
                    }
                    let n = (PAGE_SIZE - off).min(left);
                    f(Piece::Page(page, off, n))?;
                    left -= n;
                    off = 0;
                }
                Ok(())
            }
        }
    }
}

/// A contiguous piece of a Reply: virtual memory (head or tail) or part of
/// a page.
#[derive(Clone, Copy)]
pub(crate) enum Piece {
    /// `len` bytes at kernel virtual address `ptr`.
    Virt(*mut u8, usize),
    /// `len` bytes at `offset` in `page`.
    Page(*mut bindings::page, usize, usize),
}

impl Piece {
    /// Its bytes.
    ///
    /// # Safety
    ///
    /// The memory must stay valid and unchanged while the slice is used
    /// (true for a Reply during `xpo_sendto`).
    pub(crate) unsafe fn bytes<'b>(&self) -> &'b [u8] {
        match *self {
            // SAFETY: the caller's promise; a Reply's kvecs are valid.
            Piece::Virt(p, l) => unsafe { core::slice::from_raw_parts(p, l) },
            Piece::Page(page, off, l) => {
                // SAFETY: reply pages are lowmem pages nfsd owns; `off + l`
                // stays within the page (built that way by `Rqst`).
                unsafe {
                    let base = bindings::svcrdma_rs_page_address(page).cast::<u8>();
                    core::slice::from_raw_parts(base.add(off), l)
                }
            }
        }
    }
}

/// Slots of a request's Reply page array from `rq_respages` on: up to
/// `rq_page_end`, which sunrpc keeps in the same array (7.x kernels give the
/// Reply an array of its own, apart from `rq_pages`). 0 if they are unset.
fn reply_slots(r: &bindings::svc_rqst) -> usize {
    if r.rq_respages.is_null() || r.rq_page_end.is_null() {
        return 0;
    }
    // SAFETY: both point into the Reply's page array (`svc_alloc_arg`
    // sets `rq_page_end` to `&rq_respages[rq_maxpages]`).
    let n = unsafe { r.rq_page_end.offset_from(r.rq_respages) };
    usize::try_from(n).unwrap_or(0).min(r.rq_maxpages)
}

/// The Reply's pages of `r`: how many slots from `rq_respages` they fill
/// (up to `rq_next_page`, or further if the page list spans more), and
/// where the page list starts among them (`usize::MAX`: elsewhere); `None`
/// before sunrpc set up the Reply. Fails if they overrun the array or one
/// of those slots is empty: when it succeeds, each of the first `n` slots
/// is in the array and holds a page.
fn reply_pages(r: &bindings::svc_rqst) -> Result<Option<(usize, usize)>> {
    if r.rq_respages.is_null() || r.rq_next_page.is_null() {
        return Ok(None);
    }
    // SAFETY: both point into the `rq_respages` array (sunrpc keeps
    // `rq_next_page` within it).
    let n = unsafe { r.rq_next_page.offset_from(r.rq_respages) };
    let n = usize::try_from(n).map_err(|_| EINVAL)?;
    let cap = reply_slots(r);
    let res = &r.rq_res;
    // Where the page list starts among the Reply's pages, if it lies in
    // them (it is `rq_respages + 1` as `svc_process` sets it up).
    let base = r.rq_respages as usize;
    let size = core::mem::size_of::<*mut bindings::page>();
    let first = (res.pages as usize)
        .checked_sub(base)
        .filter(|d| d % size == 0 && d / size <= cap)
        .map_or(usize::MAX, |d| d / size);
    // An encoder may fill the page list without moving `rq_next_page`
    // (NFSv3 GETACL spilling out of the head): the pages it spans are
    // the Reply's too.
    let spanned = if first == usize::MAX || res.page_len == 0 {
        0
    } else {
        first + (res.page_base as usize + res.page_len as usize).div_ceil(PAGE_SIZE)
    };
    let n = n.max(spanned);
    if n > cap {
        return Err(EINVAL);
    }
    // SAFETY: `0..n` is within the array (`cap`).
    if (0..n).any(|i| unsafe { *r.rq_respages.add(i) }.is_null()) {
        return Err(EINVAL);
    }
    Ok(Some((n, first)))
}

/// Whether the head and tail of `r`'s Reply each lie within one of its
/// first `n` reply pages.
///
/// `svc_process` points the head at the start of `rq_respages[0]`
/// (`svc.c`), and the XDR encoder (`xdr.c`, `xdr_write_pages`,
/// `xdr_get_next_encode_buffer`) places the tail at its current position,
/// in the head's page or in an encode page of the page list. That is
/// nfsd's convention, not a rule this code can lean on: a kvec found
/// elsewhere fails the Reply, before anything maps it, instead of letting
/// the device read memory nothing holds.
///
/// # Safety
///
/// Each of the first `n` slots from `rq_respages` is in the array and
/// holds a page ([`reply_pages`]).
unsafe fn kvecs_in_pages(r: &bindings::svc_rqst, n: usize) -> bool {
    let held = |i: usize| {
        // SAFETY: `i` is below `n`: in the array, holding a page (the
        // function's safety requirement).
        let page = unsafe { *r.rq_respages.add(i) };
        // SAFETY: a page the request holds; reply pages are lowmem.
        unsafe { bindings::svcrdma_rs_page_address(page) as usize }
    };
    let lies_in_held = |base: *mut core::ffi::c_void, len: usize| {
        let b = base as usize;
        len == 0
            || (0..n).any(|i| {
                let start = held(i);
                b >= start && b.checked_add(len).is_some_and(|e| e <= start + PAGE_SIZE)
            })
    };
    let res = &r.rq_res;
    lies_in_held(res.head[0].iov_base, res.head[0].iov_len)
        && lies_in_held(res.tail[0].iov_base, res.tail[0].iov_len)
}

impl<'a, C> Rqst<'a, C> {
    /// Borrows the request sunrpc passed to an op.
    ///
    /// # Safety
    ///
    /// `ptr` must be a live request owned by the calling thread for `'a`,
    /// whose `rq_xprt_ctxt` is null or a leaked `KBox<C>` it owns.
    pub(super) unsafe fn from_raw(ptr: *mut bindings::svc_rqst) -> Self {
        // INVARIANT: the caller's promise.
        Self {
            ptr,
            _p: PhantomData,
        }
    }

    fn r(&self) -> &bindings::svc_rqst {
        // SAFETY: live and ours (invariant).
        unsafe { &*self.ptr }
    }

    fn r_mut(&mut self) -> &mut bindings::svc_rqst {
        // SAFETY: live and ours (invariant).
        unsafe { &mut *self.ptr }
    }

    /// The transport's context for this request, if it has one.
    pub(crate) fn ctxt_mut(&mut self) -> Option<&mut C> {
        let p = self.r().rq_xprt_ctxt.cast::<C>();
        // SAFETY: null or a live `KBox<C>` the request owns (invariant),
        // borrowed through `self`.
        unsafe { p.as_mut() }
    }

    /// Takes the transport's context out of the request.
    pub(crate) fn take_ctxt(&mut self) -> Option<KBox<C>> {
        let r = self.r_mut();
        let p = r.rq_xprt_ctxt.cast::<C>();
        r.rq_xprt_ctxt = core::ptr::null_mut();
        if p.is_null() {
            return None;
        }
        // SAFETY: a leaked `KBox<C>` the request owned (invariant); the
        // request no longer refers to it.
        Some(unsafe { KBox::from_raw(p) })
    }

    /// Gives the request `ctxt` as its transport context, which sunrpc
    /// hands back through `xpo_release_ctxt`.
    ///
    /// The request has none: sunrpc releases and clears the context of
    /// every request it is done with, and the ops take it before they set
    /// one. Were one left, it could belong to another connection's pool,
    /// which only it may take back: it would be leaked, not freed.
    pub(crate) fn set_ctxt(&mut self, ctxt: KBox<C>) {
        if let Some(old) = self.take_ctxt() {
            kernel::pr_warn_once!("a request still held a transport context; it is leaked\n");
            KBox::leak(old);
        }
        // INVARIANT: a leaked `KBox<C>`, owned by the request from here on.
        self.r_mut().rq_xprt_ctxt = KBox::into_raw(ctxt).cast();
    }

    /// Gives no reply pages back on an early return (as sunrpc expects
    /// before a message is received).
    pub(crate) fn reset_reply_pages(&mut self) {
        let r = self.r_mut();
        r.rq_next_page = r.rq_respages;
    }

    /// Bytes the argument buffer holds: the Call's own page array
    /// (`rq_maxpages` entries), less the page sunrpc keeps spare.
    pub(crate) fn arg_capacity(&self) -> usize {
        let r = self.r();
        if r.rq_pages.is_null() {
            return 0;
        }
        // `unsigned long`: a `usize` here.
        r.rq_maxpages.saturating_sub(1).saturating_mul(PAGE_SIZE)
    }

    /// The argument page holding byte `offset` of the Call, and the offset
    /// within it.
    pub(crate) fn arg_page(&self, offset: usize) -> Option<(*mut bindings::page, usize)> {
        if offset >= self.arg_capacity() {
            return None;
        }
        let r = self.r();
        // SAFETY: in range of the argument pages (checked above); sunrpc
        // filled every entry before calling `xpo_recvfrom`.
        let page = unsafe { *r.rq_pages.add(offset / PAGE_SIZE) };
        (!page.is_null()).then_some((page, offset % PAGE_SIZE))
    }

    /// Copies `src` into the argument buffer at `offset`.
    pub(crate) fn arg_write(&mut self, offset: usize, src: &[u8]) -> Result {
        self.arg_fill(offset, src.len(), Some(src))
    }

    /// Zeroes `len` bytes of the argument buffer at `offset`.
    pub(crate) fn arg_zero(&mut self, offset: usize, len: usize) -> Result {
        self.arg_fill(offset, len, None)
    }

    /// Writes `len` bytes at `offset` of the argument buffer: `src`'s, or
    /// zeros.
    fn arg_fill(&mut self, mut offset: usize, len: usize, src: Option<&[u8]>) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.arg_capacity() {
            return Err(EMSGSIZE);
        }
        let mut done = 0;
        while offset < end {
            let (page, off) = self.arg_page(offset).ok_or(EINVAL)?;
            let n = (PAGE_SIZE - off).min(end - offset);
            // SAFETY: an argument page of this request, which holds it while
            // `self` is borrowed.
            let page = unsafe { borrow_page(page) }.ok_or(EINVAL)?;
            let src = src.map(|s| s.get(done..).unwrap_or(&[]));
            // SAFETY: the calling thread owns the request and its argument
            // pages (`&mut self`): nothing else uses them meanwhile.
            unsafe { fill_page(&page, off, n, src) }?;
            done += n;
            offset += n;
        }
        Ok(())
    }

    /// Moves the first `n` argument pages (the Call's bytes `[0, n *
    /// PAGE_SIZE)`) into `out`, each with its reference: RDMA Reads fill
    /// them after this request has moved on. Their slots are left empty for
    /// sunrpc to refill (`rq_pages_nfree`) before the next receive.
    pub(crate) fn take_arg_pages(&mut self, n: usize, out: &mut HeldPages) -> Result {
        if n > self.arg_capacity() / PAGE_SIZE {
            return Err(EMSGSIZE);
        }
        if n == 0 {
            return Ok(());
        }
        let r = self.r_mut();
        // With `n > 0` the array exists (checked above).
        // SAFETY: `0..n` is within the argument pages (checked above), and
        // only this thread uses the request's slots (`&mut self`).
        let slots = unsafe { core::slice::from_raw_parts_mut(r.rq_pages, n) };
        // All or nothing: every slot holds a page (sunrpc filled them).
        if slots.iter().any(|p| p.is_null()) {
            return Err(EINVAL);
        }
        // INVARIANT: the slots' references move to `out`, all or none.
        move_slots(slots, &mut out.pages)?;
        // sunrpc refills the first `rq_pages_nfree` slots (its contract for
        // transports that keep request pages).
        r.rq_pages_nfree = r.rq_pages_nfree.max(n);
        Ok(())
    }

    /// Gives `pages`, taken from this request by [`Rqst::take_arg_pages`]
    /// and not used, back to the slots they came from (the first ones,
    /// left empty since), as if they had never been taken; a page finding
    /// no empty slot is put. Empties `pages`. The refill count the take
    /// raised stays: sunrpc's refill (`alloc_pages_bulk`) only fills empty
    /// slots.
    pub(crate) fn give_back_arg_pages(&mut self, pages: &mut HeldPages) {
        let cap = self.arg_capacity() / PAGE_SIZE;
        pages.reply = None;
        let r = self.r_mut();
        for (i, page) in pages.pages.drain_all().enumerate() {
            // SAFETY: `i` is within the argument pages when below `cap`.
            match (i < cap).then(|| unsafe { &mut *r.rq_pages.add(i) }) {
                // INVARIANT: the reference moves back to its slot.
                Some(slot) if slot.is_null() => *slot = page,
                // SAFETY: the entry carried one of our references.
                _ => unsafe { bindings::svcrdma_rs_put_page(page) },
            }
        }
    }

    /// Puts `pages` (taken by [`Rqst::take_arg_pages`] from another
    /// request, and filled) at the start of this request's argument
    /// buffer, moving the pages they replace into `spare` as far as its
    /// room goes (the rest are put), and points the argument `xdr_buf` at
    /// them. Empties `pages`.
    pub(crate) fn install_arg_pages(
        &mut self,
        pages: &mut HeldPages,
        spare: &mut HeldPages,
    ) -> Result {
        let n = pages.pages.len();
        if n == 0 || n > self.arg_capacity() / PAGE_SIZE {
            return Err(EMSGSIZE);
        }
        let r = self.r_mut();
        pages.reply = None;
        spare.reply = None;
        // INVARIANT: each reference moves from `pages` to its slot, and the
        // slot's own (the request holds one on each of its pages) into
        // `pages` in its place; empty slots leave nothing there.
        let mut kept = 0usize;
        for i in 0..n {
            let Some(&page) = pages.pages.get(i) else {
                break;
            };
            // SAFETY: `i` is within the argument pages (checked above).
            let slot = unsafe { &mut *r.rq_pages.add(i) };
            let old = core::mem::replace(slot, page);
            if let Some(at) = pages.pages.get_mut(kept).filter(|_| !old.is_null()) {
                *at = old;
                kept += 1;
            }
        }
        pages.pages.truncate(kept);
        // The replaced pages: into `spare` as far as its room goes, the rest
        // put together.
        while spare.pages.len() < spare.pages.capacity() {
            let Some(page) = pages.pages.pop() else {
                break;
            };
            spare.push_reserved(page);
        }
        pages.clear();
        // SAFETY: slot 0 holds a page now (n >= 1), a lowmem page.
        r.rq_arg.head[0].iov_base = unsafe { bindings::svcrdma_rs_page_address(*r.rq_pages) };
        // SAFETY: the page array has at least `n` entries.
        r.rq_arg.pages = unsafe { r.rq_pages.add(1) };
        Ok(())
    }

    /// Declares the Call assembled in the argument pages, laid out as
    /// `shape` says (`proto::layout`): one stream from the first page's
    /// first byte (head = first page, the rest in the page list, as a
    /// stream transport leaves it), or a data item alone in the page list
    /// from the second page's first byte, the inline bytes before it as the
    /// head and those after it as the tail, both in the first page. Fails
    /// (changing nothing) for a shape that does not fit the buffer, which
    /// the planner never makes.
    pub(crate) fn set_arg_shape(&mut self, shape: ArgShape) -> Result {
        let cap = self.arg_capacity();
        let arg = &mut self.r_mut().rq_arg;
        match shape {
            ArgShape::Split { head, pages, tail } => {
                let (head, tail) = (head as usize, tail as usize);
                let base = arg.head[0].iov_base.cast::<u8>();
                if base.is_null()
                    || head.saturating_add(tail) > PAGE_SIZE
                    || pages as usize > cap.saturating_sub(PAGE_SIZE)
                {
                    return Err(EMSGSIZE);
                }
                arg.head[0].iov_len = head;
                arg.page_base = 0;
                arg.page_len = pages;
                // `base` is the first argument page's address (set by
                // `svc_alloc_arg`, or `install_arg_pages`).
                // SAFETY: not null, and `head + tail` bytes fit that page.
                arg.tail[0].iov_base = unsafe { base.add(head) }.cast();
                arg.tail[0].iov_len = tail;
                arg.len = (head + pages as usize + tail) as u32;
            }
            ArgShape::Stream { len } => {
                let len = len as usize;
                if len > cap {
                    return Err(EMSGSIZE);
                }
                arg.head[0].iov_len = len.min(PAGE_SIZE);
                arg.page_base = 0;
                arg.page_len = (len - arg.head[0].iov_len) as u32;
                arg.len = len as u32;
                arg.tail[0].iov_len = 0;
            }
        }
        Ok(())
    }

    /// The first bytes of the assembled Call.
    pub(crate) fn arg_head(&self) -> &[u8] {
        let head = &self.r().rq_arg.head[0];
        if head.iov_base.is_null() {
            return &[];
        }
        // SAFETY: the head kvec describes the first argument page.
        unsafe { core::slice::from_raw_parts(head.iov_base.cast::<u8>(), head.iov_len) }
    }

    /// Finishes a received Call: peer addresses, protocol, and the secure
    /// flag (RDMA connections need privileges, as the C transport says).
    pub(crate) fn complete_receive(&mut self, xprt: &SvcXprt) {
        self.r_mut().rq_prot = bindings::IPPROTO_MAX;
        // SAFETY: both are live; sunrpc's helper copies the addresses.
        unsafe {
            bindings::svc_xprt_copy_addrs(self.ptr, xprt.as_ptr());
            bindings::svcrdma_rs_rqst_set_secure(self.ptr);
        }
    }

    /// Moves the Reply's pages (`rq_respages` up to `rq_next_page`: head,
    /// page list and tail) into `out`, which must hold none, each with the
    /// reference the request held, leaving their slots empty: sunrpc then
    /// neither releases them nor reuses them, and refills the slots for the
    /// next request. `out` also records where the Reply's bytes lie in them
    /// ([`HeldPages::reply_pieces`]): the Reply's memory stays valid until
    /// whoever holds `out` puts the pages. All or nothing: fails, taking
    /// nothing, if a slot is empty or the head or tail lies outside the
    /// pages taken.
    pub(crate) fn take_reply_pages(&mut self, out: &mut HeldPages) -> Result {
        if !out.is_empty() {
            return Err(EINVAL);
        }
        out.reply = None;
        let r = self.r_mut();
        let Some((n, first)) = reply_pages(r)? else {
            return Ok(());
        };
        // SAFETY: `reply_pages` checked the first `n` slots.
        if !unsafe { kvecs_in_pages(r, n) } {
            crate::log::pr_warn_ratelimited!(
                "a Reply's head or tail lies outside the request's reply pages; the Reply fails\n"
            );
            return Err(EINVAL);
        }
        let res = &r.rq_res;
        // With no page taken there is no layout, and no piece to map.
        let layout = (n > 0).then_some(ReplyLayout {
            head: (res.head[0].iov_base.cast::<u8>(), res.head[0].iov_len),
            first,
            page_base: res.page_base as usize,
            page_len: res.page_len as usize,
            tail: (res.tail[0].iov_base.cast::<u8>(), res.tail[0].iov_len),
            len: res.len as usize,
        });
        // The array exists (`reply_pages`).
        // SAFETY: the first `n` slots are inside it (`reply_pages`), and
        // only this thread uses the request's slots (`&mut self`).
        let slots = unsafe { core::slice::from_raw_parts_mut(r.rq_respages, n) };
        // INVARIANT: the slots' references move to `out`, all or none.
        move_slots(slots, &mut out.pages)?;
        // sunrpc refills the emptied slots of `[rq_respages, rq_next_page)`
        // only (`svc_alloc_arg`): those taken past it are brought into that
        // range, or the next request would find them empty.
        // SAFETY: `n` is within the array or one past it (`reply_pages`).
        r.rq_next_page = unsafe { r.rq_respages.add(n) };
        // INVARIANT: the layout of the Reply whose pages were just taken.
        out.reply = layout;
        Ok(())
    }

    /// Gives `pages`, taken from this request by [`Rqst::take_reply_pages`]
    /// and not used, back to the slots they came from (left empty since),
    /// as if they had never been taken; a page finding no empty slot is
    /// put. Empties `pages`.
    pub(crate) fn give_back_reply_pages(&mut self, pages: &mut HeldPages) {
        pages.reply = None;
        let r = self.r_mut();
        // The Reply's slots (`take_reply_pages` may take past the
        // `rq_next_page` it found, and moves it past them).
        let n = if r.rq_respages.is_null() {
            0
        } else {
            reply_slots(r)
        };
        for (i, page) in pages.pages.drain_all().enumerate() {
            // SAFETY: `i` is inside the array when below `n`.
            match (i < n).then(|| unsafe { &mut *r.rq_respages.add(i) }) {
                // INVARIANT: the reference moves back to its slot.
                Some(slot) if slot.is_null() => *slot = page,
                // SAFETY: the entry carried one of our references.
                _ => unsafe { bindings::svcrdma_rs_put_page(page) },
            }
        }
    }

    /// The Reply's length.
    pub(crate) fn res_len(&self) -> usize {
        self.r().rq_res.len as usize
    }

    /// Calls `f` on the bytes of each contiguous piece of `[start, end)` of
    /// the Reply, in order. Fails if the range is outside the Reply.
    pub(crate) fn res_bytes(
        &self,
        start: usize,
        end: usize,
        mut f: impl FnMut(&[u8]) -> Result,
    ) -> Result {
        let res = &self.r().rq_res;
        let head = (res.head[0].iov_base.cast::<u8>(), res.head[0].iov_len);
        let tail = (res.tail[0].iov_base.cast::<u8>(), res.tail[0].iov_len);
        let page_base = res.page_base as usize;
        let page_len = res.page_len as usize;
        let list = if res.pages.is_null() || page_len == 0 {
            &[][..]
        } else {
            let n = (page_base + page_len).div_ceil(PAGE_SIZE);
            // The page list covers `page_base + page_len` bytes, and the
            // calling thread owns the request while `self` is borrowed.
            // SAFETY: so `n` entries are readable and unchanged meanwhile.
            unsafe { core::slice::from_raw_parts(res.pages, n) }
        };
        let len = res.len as usize;
        walk_reply(
            head,
            page_base,
            page_len,
            tail,
            len,
            list,
            start,
            end,
            |span| {
                span.pieces(|p| {
                    // The calling thread owns the request while `self` is
                    // borrowed: nobody changes or frees its Reply, and the
                    // slice dies with `f`.
                    // SAFETY: the piece's memory stays valid and unchanged
                    // meanwhile.
                    f(unsafe { p.bytes() })
                })
            },
        )
    }
}
