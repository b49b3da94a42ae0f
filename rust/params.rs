// SPDX-License-Identifier: GPL-2.0

//! Module parameters.
//!
//! They are declared in `include/params.c`, because `module_param()` is a C
//! macro; every value is read and validated here, with the rules living in
//! [`crate::proto`].

use kernel::prelude::*;

use crate::{bindings, log::Show, proto::xprt_name};

/// The transport class name to register (`xprt_name=`), validated.
///
/// Fails with `EINVAL` and one log line naming the rule that was broken.
pub(crate) fn xprt_name() -> Result<&'static CStr> {
    // SAFETY: `params.c` returns the parameter's storage: a NUL-terminated
    // string that the module loader keeps until the module is freed, and
    // that cannot change after load (permission 0444).
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
