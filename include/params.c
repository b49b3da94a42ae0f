// SPDX-License-Identifier: GPL-2.0
/*
 * Module parameters of svcrdma_rs. module_param() and MODULE_PARM_DESC()
 * are macros that place data in special sections, so they are declared
 * here; the values are parsed, validated and kept by the Rust side
 * (rust/params.rs), which these callbacks call.
 */
#include "svcrdma_rs.h"
#include "callbacks.h"

/* From Kbuild: git describe of the source tree, or its VERSION file. */
#ifndef SVCRDMA_RS_VERSION
#define SVCRDMA_RS_VERSION "unknown"
#endif
MODULE_VERSION(SVCRDMA_RS_VERSION);

#ifndef CONFIG_SVCRDMA_RS_DMA_MR_DEFAULT
#define CONFIG_SVCRDMA_RS_DMA_MR_DEFAULT "ib_only"
#endif

static char *xprt_name = "rdma";
module_param(xprt_name, charp, 0444);
MODULE_PARM_DESC(xprt_name,
		 "Name of the RPC transport class to register, as written to /proc/fs/nfsd/portlist (default: rdma, the name nfs-utils and nfsd ask for; rpcrdma.ko registers it too: load svcrdma_rs first, as the svcrdma_rs.conf softdep in /etc/modprobe.d (make install) or /usr/lib/modprobe.d (the Debian package) does, or choose another name)");

const char *svcrdma_rs_param_xprt_name(void)
{
	return xprt_name;
}

const char *svcrdma_rs_param_dma_mr_default(void)
{
	return CONFIG_SVCRDMA_RS_DMA_MR_DEFAULT;
}

bool svcrdma_rs_param_debug_enabled(void)
{
	return IS_ENABLED(CONFIG_SVCRDMA_RS_DEBUG);
}

#define SVCRDMA_RS_PARAM_OPS(name, which)					\
static int name##_set(const char *val, const struct kernel_param *kp)	\
{									\
	return svcrdma_rs_param_set(which, val);			\
}									\
static int name##_get(char *buf, const struct kernel_param *kp)	\
{									\
	return svcrdma_rs_param_get(which, buf);			\
}									\
static const struct kernel_param_ops name##_ops = {			\
	.set = name##_set,						\
	.get = name##_get,						\
}

SVCRDMA_RS_PARAM_OPS(memreg, SVCRDMA_RS_PARAM_MEMREG);
module_param_cb(memreg, &memreg_ops, NULL, 0644);
MODULE_PARM_DESC(memreg,
		 "Memory registration for RDMA Read sinks: auto (default: none where no key goes on the wire, i.e. the local DMA MR on InfiniBand/RoCE unless dma_mr=never; FRMR on iWARP; a global DMA MR on devices without FRMR), frmr (FRMR everywhere; refuse devices without it), dma_mr (a global DMA MR even where FRMR works). New connections use a new value.");

SVCRDMA_RS_PARAM_OPS(dma_mr, SVCRDMA_RS_PARAM_DMA_MR);
module_param_cb(dma_mr, &dma_mr_ops, NULL, 0644);
MODULE_PARM_DESC(dma_mr,
		 "Where a global DMA MR may be used: never, ib_only (InfiniBand/RoCE only, where its key never goes on the wire), always (also iWARP: exposes all server memory). Default set at build time (CONFIG_SVCRDMA_RS_DMA_MR_DEFAULT, " CONFIG_SVCRDMA_RS_DMA_MR_DEFAULT "). Connections that would need a forbidden DMA MR are refused.");

#ifdef CONFIG_SVCRDMA_RS_DEBUG
SVCRDMA_RS_PARAM_OPS(debug_caps, SVCRDMA_RS_PARAM_DEBUG_CAPS);
module_param_cb(debug_caps, &debug_caps_ops, NULL, 0644);
MODULE_PARM_DESC(debug_caps,
		 "Testing only (CONFIG_SVCRDMA_RS_DEBUG): override device capabilities for the memory-model choice, comma-separated: no_fast_reg, no_local_dma_lkey, local_dma_lkey, short_page_list; empty for none.");

SVCRDMA_RS_PARAM_OPS(debug_frmr_pool, SVCRDMA_RS_PARAM_DEBUG_FRMR_POOL);
module_param_cb(debug_frmr_pool, &debug_frmr_pool_ops, NULL, 0644);
MODULE_PARM_DESC(debug_frmr_pool,
		 "Testing only (CONFIG_SVCRDMA_RS_DEBUG): at most this many MRs in a new FRMR connection's pool, so that nfsd threads wait in line for them (0, the default: no cap).");

SVCRDMA_RS_PARAM_OPS(debug_sq_slots, SVCRDMA_RS_PARAM_DEBUG_SQ_SLOTS);
module_param_cb(debug_sq_slots, &debug_sq_slots_ops, NULL, 0644);
MODULE_PARM_DESC(debug_sq_slots,
		 "Testing only (CONFIG_SVCRDMA_RS_DEBUG): at most this many send-queue slots for a new connection, so that nfsd threads wait in line for them (0, the default: no cap; a Call whose RDMA Reads need more is answered with ERR_CHUNK, a Reply that needs more fails and closes its connection).");

SVCRDMA_RS_PARAM_OPS(debug_fail_post, SVCRDMA_RS_PARAM_DEBUG_FAIL_POST);
module_param_cb(debug_fail_post, &debug_fail_post_ops, NULL, 0644);
MODULE_PARM_DESC(debug_fail_post,
		 "Testing only (CONFIG_SVCRDMA_RS_DEBUG): this many of the next chains posted to a send queue fail with -ENOMEM as if the device refused them, which closes their connections (counts down to 0, the default).");
#endif
