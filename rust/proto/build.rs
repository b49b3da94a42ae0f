// SPDX-License-Identifier: GPL-2.0

//! Host build of the protocol crate: every optional part is built and
//! tested here. In the kernel module, `--cfg svcrdma_rs_backchannel` comes
//! from Kbuild unless `SVCRDMA_RS_BACKCHANNEL=n`.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(svcrdma_rs_backchannel)");
    println!("cargo::rustc-cfg=svcrdma_rs_backchannel");
}
