// SPDX-License-Identifier: GPL-2.0
/*
 * A module that leaks allocations on load, on purpose: tests/vm/run's
 * selftest loads it in a guest and requires scripts/vm-run to fail the run
 * with kmemleak's report. Never installed, never shipped.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

static void *svcrdma_leak_ptr;

/*
 * Out of line, so that the pointer it handles lives in a frame the later
 * calls overwrite: a stale copy on a stack kmemleak scans would hide it.
 * The whole object is overwritten: a slab object's unused tail may still
 * hold the free-list pointer to its neighbour, which kmemleak also counts.
 */
static noinline int svcrdma_leak_one(size_t size)
{
	void *p = kmalloc(size, GFP_KERNEL);

	if (!p)
		return -ENOMEM;
	memset(p, 0x5a, size);
	WRITE_ONCE(svcrdma_leak_ptr, p);
	WRITE_ONCE(svcrdma_leak_ptr, NULL);
	return 0;
}

/*
 * Slab objects and one from the page allocator (16 KiB). In a short boot
 * on the test kernel only the latter was reported: some stale copy of a
 * fresh slab object's address (likely in the allocator's per-CPU caches)
 * still counts as a reference. Several, since the last one's address may
 * also survive on the loading task's stack.
 */
static int __init svcrdma_leak_init(void)
{
	static const size_t sizes[] = { 256, 256, 256, 256, 256, 256, 256, 256, 16384 };
	int i, err;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		err = svcrdma_leak_one(sizes[i]);
		if (err)
			return err;
	}
	return 0;
}

static void __exit svcrdma_leak_exit(void)
{
}

module_init(svcrdma_leak_init);
module_exit(svcrdma_leak_exit);
MODULE_DESCRIPTION("svcrdma_rs test: leaks one object for kmemleak to find");
MODULE_LICENSE("GPL");
