/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Functions the Rust side implements for the C shims (params.c). Not read
 * by bindgen: Rust defines these, it does not call them.
 */
#ifndef SVCRDMA_RS_CALLBACKS_H
#define SVCRDMA_RS_CALLBACKS_H

/* Which parameter a set/get concerns. */
enum svcrdma_rs_param {
	SVCRDMA_RS_PARAM_MEMREG = 0,
	SVCRDMA_RS_PARAM_DMA_MR = 1,
	SVCRDMA_RS_PARAM_DEBUG_CAPS = 2,
	SVCRDMA_RS_PARAM_DEBUG_FRMR_POOL = 3,
	SVCRDMA_RS_PARAM_DEBUG_SQ_SLOTS = 4,
	SVCRDMA_RS_PARAM_DEBUG_FAIL_POST = 5,
};

/* Parses and stores a value; 0 or -EINVAL (with one log line). */
int svcrdma_rs_param_set(int which, const char *val);
/* Writes the current value and a newline into a PAGE_SIZE buffer. */
int svcrdma_rs_param_get(int which, char *buf);

#endif /* SVCRDMA_RS_CALLBACKS_H */
