/*
 * insnprof: exact guest instruction counts per translation block start
 * address (kernel addresses; user space summed as one), for a window the
 * guest opens and closes through a control file on the host:
 *   "reset"      zero every count
 *   "dump PATH"  write "addr insns execs locked" lines (hex address;
 *                instructions executed in blocks starting there, how
 *                many times such a block ran, and how many of the
 *                instructions executed were locked: a LOCK prefix, or
 *                XCHG with a memory operand, which locks implicitly)
 * The plugin empties the control file once it has acted.
 * Args: ctl=PATH
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "plugin_api.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define SLOTS (1u << 21)
struct ent { uint64_t addr; uint64_t insns; uint64_t execs; uint64_t locked; };
static struct ent *tab;
static uint64_t user_insns;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *ctl;

static struct ent *slot(uint64_t a)
{
	uint64_t h = (a * 0x9E3779B97F4A7C15ull) >> 43;
	for (;;) {
		struct ent *e = &tab[h & (SLOTS - 1)];
		if (e->addr == a || e->addr == 0) {
			e->addr = a;
			return e;
		}
		h++;
	}
}

/* Whether the x86 instruction at b (n bytes) locks the bus: a LOCK (0xf0)
 * among its legacy prefixes, or XCHG (0x86, 0x87) on memory. */
static int locks(const uint8_t *b, size_t n)
{
	size_t i = 0;
	int lock = 0;
	for (; i < n; i++) {
		uint8_t p = b[i];
		if (p == 0xf0)
			lock = 1;
		else if (p != 0x26 && p != 0x2e && p != 0x36 && p != 0x3e && p != 0x64 &&
			 p != 0x65 && p != 0x66 && p != 0x67 && p != 0xf2 && p != 0xf3)
			break;
	}
	if (lock)
		return 1;
	if (i < n && (b[i] & 0xf0) == 0x40)
		i++;
	return i + 1 < n && (b[i] == 0x86 || b[i] == 0x87) && (b[i + 1] >> 6) != 3;
}

static void trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t a = qemu_plugin_tb_vaddr(tb);
	size_t n = qemu_plugin_tb_n_insns(tb);
	if (a >= 0xffff800000000000ull) {
		struct ent *e;
		uint64_t locked = 0;
		for (size_t i = 0; i < n; i++) {
			struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
			locked += locks(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn));
		}
		pthread_mutex_lock(&lock);
		e = slot(a);
		pthread_mutex_unlock(&lock);
		qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &e->insns, n);
		qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &e->execs, 1);
		if (locked)
			qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
								 &e->locked, locked);
	} else {
		qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &user_insns, n);
	}
}

static void *watch(void *arg)
{
	char buf[4096];
	for (;;) {
		usleep(100000);
		FILE *f = fopen(ctl, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = 0;
		if (!n)
			continue;
		char *nl = strchr(buf, '\n');
		if (nl)
			*nl = 0;
		if (!strcmp(buf, "reset")) {
			pthread_mutex_lock(&lock);
			for (uint32_t i = 0; i < SLOTS; i++)
				tab[i].insns = tab[i].execs = tab[i].locked = 0;
			user_insns = 0;
			pthread_mutex_unlock(&lock);
		} else if (!strncmp(buf, "dump ", 5)) {
			FILE *o = fopen(buf + 5, "w");
			if (o) {
				pthread_mutex_lock(&lock);
				fprintf(o, "user %llu\n", (unsigned long long)user_insns);
				for (uint32_t i = 0; i < SLOTS; i++)
					if (tab[i].addr && tab[i].insns)
						fprintf(o, "%llx %llu %llu %llu\n",
							(unsigned long long)tab[i].addr,
							(unsigned long long)tab[i].insns,
							(unsigned long long)tab[i].execs,
							(unsigned long long)tab[i].locked);
				pthread_mutex_unlock(&lock);
				fclose(o);
			}
		}
		f = fopen(ctl, "w");
		if (f)
			fclose(f);
	}
	return arg;
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	pthread_t t;
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "ctl=", 4))
			ctl = argv[i] + 4;
	if (!ctl)
		return -1;
	tab = calloc(SLOTS, sizeof(*tab));
	if (!tab)
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, trans);
	pthread_create(&t, NULL, watch, NULL);
	return 0;
}
