// SPDX-License-Identifier: GPL-2.0
/*
 * Module parameters of svcrdma_rs. module_param() and MODULE_PARM_DESC()
 * are macros that place data in special sections, so they are declared
 * here; the Rust side reads them through the accessors below and does all
 * validation (rust/params.rs).
 */
#include "svcrdma_rs.h"

static char *xprt_name = "rdma";
module_param(xprt_name, charp, 0444);
MODULE_PARM_DESC(xprt_name,
		 "Name of the RPC transport class to register, as written to /proc/fs/nfsd/portlist (default: rdma; use another name when rpcrdma.ko, which registers \"rdma\", is loaded)");

const char *svcrdma_rs_param_xprt_name(void)
{
	return xprt_name;
}
