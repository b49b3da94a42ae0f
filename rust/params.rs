// SPDX-License-Identifier: GPL-2.0

//! Module parameters.
//!
//! They are declared in `include/params.c`, because `module_param()` is a C
//! macro; every value is parsed, validated and kept here, with the rules
//! living in [`crate::proto`]. `memreg`, `dma_mr` (and, in debug builds,
//! `debug_caps`, `debug_frmr_pool`, `debug_sq_slots` and `debug_fail_post`)
//! are writable at run time through `/sys/module/svcrdma_rs/parameters/`:
//! a bad value gets `-EINVAL` and one log line, and nothing changes. New
//! connections use the new value.

use core::fmt::Write;

use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    sync::atomic::{ordering::Relaxed, Atomic},
};

use crate::{
    bindings,
    log::Show,
    proto::{
        memreg::{CapsOverride, DmaMrAllowed, Memreg},
        xprt_name,
    },
};

/// The transport class name to register (`xprt_name=`), validated.
///
/// Fails with `EINVAL` and one log line naming the rule that was broken.
pub(crate) fn xprt_name() -> Result<&'static CStr> {
    // `params.c` returns the parameter's storage, which cannot change
    // after load (permission 0444).
    // SAFETY: a NUL-terminated string the module loader keeps until the module is freed.
    let raw = unsafe { bindings::svcrdma_rs_param_xprt_name() };
    if raw.is_null() {
        pr_err!("xprt_name is not set\n");
        return Err(EINVAL);
    }
    // SAFETY: `raw` is non-null and NUL-terminated (see above), and lives as
    // long as the module, which outlives every use of the returned reference.
    let name = unsafe { CStr::from_char_ptr(raw) };
    if let Err(e) = xprt_name::validate(name.to_bytes()) {
        pr_err!("xprt_name=\"{}\" refused: {}\n", name, Show(e));
        return Err(EINVAL);
    }
    Ok(name)
}

/// Sentinel for "not set at load": use the build-time default.
const UNSET: i32 = -1;

/// `memreg`, as an index into [`Memreg::ALL`].
static MEMREG: Atomic<i32> = Atomic::new(0);
/// `dma_mr`, as an index into [`DmaMrAllowed::ALL`], or [`UNSET`].
static DMA_MR: Atomic<i32> = Atomic::new(UNSET);
/// `debug_caps`: bit 0 no_fast_reg, bits 1-2 local_dma_lkey (0 none,
/// 1 false, 2 true), bit 3 short_page_list.
static DEBUG_CAPS: Atomic<i32> = Atomic::new(0);
/// `debug_frmr_pool`: the most MRs a new connection's FRMR pool gets (0: no
/// cap).
static DEBUG_FRMR_POOL: Atomic<u32> = Atomic::new(0);
/// `debug_sq_slots`: the most send-queue slots a new connection gets (0: no
/// cap).
static DEBUG_SQ_SLOTS: Atomic<u32> = Atomic::new(0);
/// `debug_fail_post`: how many of the next send-queue posts fail.
static DEBUG_FAIL_POST: Atomic<u32> = Atomic::new(0);

/// The current `memreg`.
pub(crate) fn memreg() -> Memreg {
    Memreg::ALL
        .get(usize::try_from(MEMREG.load(Relaxed)).unwrap_or(usize::MAX))
        .copied()
        .unwrap_or(Memreg::Auto)
}

/// The build-time default of `dma_mr` (`CONFIG_SVCRDMA_RS_DMA_MR_DEFAULT`).
fn dma_mr_default() -> Option<DmaMrAllowed> {
    // SAFETY: returns a string literal compiled into `params.c`.
    let s = unsafe { CStr::from_char_ptr(bindings::svcrdma_rs_param_dma_mr_default()) };
    DmaMrAllowed::parse(s.to_bytes())
}

/// The current `dma_mr`.
pub(crate) fn dma_mr() -> DmaMrAllowed {
    match DmaMrAllowed::ALL.get(usize::try_from(DMA_MR.load(Relaxed)).unwrap_or(usize::MAX)) {
        Some(&v) => v,
        // The default was validated at load; `Never` is the safe fallback.
        None => dma_mr_default().unwrap_or(DmaMrAllowed::Never),
    }
}

/// The current capability overrides (always none unless the module was
/// built with `CONFIG_SVCRDMA_RS_DEBUG`).
pub(crate) fn caps_override() -> CapsOverride {
    let v = DEBUG_CAPS.load(Relaxed);
    CapsOverride {
        no_fast_reg: v & 1 != 0,
        local_dma_lkey: match (v >> 1) & 3 {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        },
        short_page_list: v & 8 != 0,
    }
}

/// The most MRs a new connection's FRMR pool may hold: `u32::MAX` unless
/// a debug build's `debug_frmr_pool` caps it.
pub(crate) fn frmr_pool_cap() -> u32 {
    match DEBUG_FRMR_POOL.load(Relaxed) {
        0 => u32::MAX,
        n => n,
    }
}

/// The most send-queue slots a new connection may use: `u32::MAX` unless a
/// debug build's `debug_sq_slots` caps it.
pub(crate) fn sq_slots_cap() -> u32 {
    match DEBUG_SQ_SLOTS.load(Relaxed) {
        0 => u32::MAX,
        n => n,
    }
}

/// Whether this post is to fail as if the device refused it: true while a
/// debug build's `debug_fail_post` counts down (never otherwise).
pub(crate) fn take_post_failure() -> bool {
    let mut n = DEBUG_FAIL_POST.load(Relaxed);
    while n > 0 {
        match DEBUG_FAIL_POST.cmpxchg(n, n - 1, Relaxed) {
            Ok(_) => return true,
            Err(now) => n = now,
        }
    }
    false
}

fn encode_caps_override(o: CapsOverride) -> i32 {
    i32::from(o.no_fast_reg)
        | match o.local_dma_lkey {
            None => 0,
            Some(false) => 2,
            Some(true) => 4,
        }
        | if o.short_page_list { 8 } else { 0 }
}

/// Checks the build-time defaults once at load.
pub(crate) fn validate_defaults() -> Result {
    if dma_mr_default().is_none() {
        // SAFETY: as in `dma_mr_default`.
        let s = unsafe { CStr::from_char_ptr(bindings::svcrdma_rs_param_dma_mr_default()) };
        pr_err!(
            "CONFIG_SVCRDMA_RS_DMA_MR_DEFAULT=\"{}\" is not one of never, ib_only, always\n",
            s
        );
        return Err(EINVAL);
    }
    Ok(())
}

/// Which parameter (see `include/callbacks.h`).
const PARAM_MEMREG: c_int = 0;
const PARAM_DMA_MR: c_int = 1;
const PARAM_DEBUG_CAPS: c_int = 2;
const PARAM_DEBUG_FRMR_POOL: c_int = 3;
const PARAM_DEBUG_SQ_SLOTS: c_int = 4;
const PARAM_DEBUG_FAIL_POST: c_int = 5;

/// A count from 0 to 65535 written to a debug parameter (`echo` adds a
/// newline).
fn parse_count(bytes: &[u8]) -> Option<u32> {
    core::str::from_utf8(bytes.strip_suffix(b"\n").unwrap_or(bytes))
        .ok()
        .and_then(|s| s.parse::<u16>().ok())
        .map(u32::from)
}

/// Parses and stores a parameter value (the `set` of `params.c`).
///
/// # Safety
///
/// `val` must be a NUL-terminated string, valid for the call.
#[no_mangle]
pub(crate) unsafe extern "C" fn svcrdma_rs_param_set(which: c_int, val: *const c_char) -> c_int {
    if val.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: a NUL-terminated string valid for the call (caller's promise).
    let val = unsafe { CStr::from_char_ptr(val) };
    let bytes = val.to_bytes();
    let ok = match which {
        PARAM_MEMREG => Memreg::parse(bytes).map(|m| {
            let i = Memreg::ALL.iter().position(|&x| x == m).unwrap_or(0);
            MEMREG.store(i as i32, Relaxed);
        }),
        PARAM_DMA_MR => DmaMrAllowed::parse(bytes).map(|m| {
            let i = DmaMrAllowed::ALL.iter().position(|&x| x == m).unwrap_or(0);
            DMA_MR.store(i as i32, Relaxed);
        }),
        PARAM_DEBUG_CAPS => {
            CapsOverride::parse(bytes).map(|o| DEBUG_CAPS.store(encode_caps_override(o), Relaxed))
        }
        PARAM_DEBUG_FRMR_POOL => parse_count(bytes).map(|n| DEBUG_FRMR_POOL.store(n, Relaxed)),
        PARAM_DEBUG_SQ_SLOTS => parse_count(bytes).map(|n| DEBUG_SQ_SLOTS.store(n, Relaxed)),
        PARAM_DEBUG_FAIL_POST => parse_count(bytes).map(|n| DEBUG_FAIL_POST.store(n, Relaxed)),
        _ => return EINVAL.to_errno(),
    };
    if ok.is_some() {
        return 0;
    }
    let (name, allowed) = match which {
        PARAM_MEMREG => ("memreg", "auto, frmr, dma_mr"),
        PARAM_DMA_MR => ("dma_mr", "never, ib_only, always"),
        PARAM_DEBUG_FRMR_POOL => ("debug_frmr_pool", "a number of MRs from 0 to 65535"),
        PARAM_DEBUG_SQ_SLOTS => ("debug_sq_slots", "a number of slots from 0 to 65535"),
        PARAM_DEBUG_FAIL_POST => ("debug_fail_post", "a number of posts from 0 to 65535"),
        _ => (
            "debug_caps",
            "a comma-separated list of no_fast_reg, no_local_dma_lkey, local_dma_lkey, short_page_list, or empty",
        ),
    };
    // Show the value as written, without the newline `echo` adds.
    let shown = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    pr_err!(
        "{}=\"{}\" refused: the value must be {}; nothing changed\n",
        name,
        kernel::str::BStr::from_bytes(shown),
        allowed
    );
    EINVAL.to_errno()
}

/// Writes a parameter's value and a newline (the `get` of `params.c`).
///
/// # Safety
///
/// `buf` must be a writable `PAGE_SIZE` buffer.
#[no_mangle]
pub(crate) unsafe extern "C" fn svcrdma_rs_param_get(which: c_int, buf: *mut c_char) -> c_int {
    // SAFETY: the kernel passes a `PAGE_SIZE` buffer for parameter reads.
    let page = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), PAGE_SIZE) };
    let mut w = crate::sysfs::PageWriter::new(page);
    let r = match which {
        PARAM_MEMREG => writeln!(w, "{}", memreg().name()),
        PARAM_DMA_MR => writeln!(w, "{}", dma_mr().name()),
        PARAM_DEBUG_CAPS => writeln!(w, "{}", caps_override()),
        PARAM_DEBUG_FRMR_POOL => writeln!(w, "{}", DEBUG_FRMR_POOL.load(Relaxed)),
        PARAM_DEBUG_SQ_SLOTS => writeln!(w, "{}", DEBUG_SQ_SLOTS.load(Relaxed)),
        PARAM_DEBUG_FAIL_POST => writeln!(w, "{}", DEBUG_FAIL_POST.load(Relaxed)),
        _ => return EINVAL.to_errno(),
    };
    match r {
        Ok(()) => w.len() as c_int,
        Err(_) => EOVERFLOW.to_errno(),
    }
}
