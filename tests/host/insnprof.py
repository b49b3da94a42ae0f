#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""scripts/insnprof: which x86 instructions the plugin counts as locked
(a LOCK prefix among the legacy prefixes, or XCHG on memory), checked on
known encodings with the plugin's own decoder compiled into a driver."""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from hostcheck import check, finish  # noqa: E402

plugin = os.path.abspath(os.path.join(here, "..", "..", "scripts", "insnprof", "insnprof.c"))

# (bytes, locked?, what)
CASES = (
    ("f0 0f b1 17", 1, "lock cmpxchg [rdi], edx"),
    ("f0 48 0f c1 07", 1, "lock xadd with REX.W"),
    ("66 f0 0f c1 07", 1, "an operand-size prefix before LOCK"),
    ("3e f0 ff 07", 1, "a segment prefix before LOCK"),
    ("87 07", 1, "xchg [rdi], eax: locks implicitly"),
    ("48 87 17", 1, "xchg with REX.W on memory"),
    ("86 44 24 08", 1, "xchg byte on memory with a displacement"),
    ("87 c2", 0, "xchg edx, eax: registers, no lock"),
    ("48 87 d0", 0, "xchg rax, rdx with REX.W: registers"),
    ("3e 8b 07", 0, "a DS prefix alone (a LOCK the kernel patched out) is no lock"),
    ("f3 48 a5", 0, "rep movsq"),
    ("90", 0, "nop"),
    ("87", 0, "xchg cut short (no ModRM byte): not read past the end"),
    ("0f b1 17", 0, "cmpxchg without LOCK"),
)

driver = f"""
#include "{plugin}"
#include <stdio.h>
/* The QEMU functions the plugin calls, never called here. */
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb) {{ }}
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
					      void *ptr, uint64_t imm) {{ }}
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb) {{ return 0; }}
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb) {{ return 0; }}
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx) {{ return 0; }}
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn) {{ return 0; }}
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn) {{ return 0; }}
int main(int argc, char **argv)
{{
	for (int i = 1; i < argc; i++) {{
		unsigned char b[16];
		size_t n = 0;
		for (char *p = argv[i]; *p && n < sizeof(b); p += 2)
			sscanf(p, "%2hhx", &b[n++]);
		printf("%d\\n", locks(b, n));
	}}
	return 0;
}}
"""
with tempfile.TemporaryDirectory() as d:
    src, exe = os.path.join(d, "t.c"), os.path.join(d, "t")
    open(src, "w").write(driver)
    cc = subprocess.run(["gcc", "-O2", "-o", exe, src, "-lpthread"], capture_output=True, text=True)
    check(cc.returncode == 0, f"the decoder compiles into a driver ({cc.stderr.strip()[:300]})")
    if cc.returncode == 0:
        args = [c[0].replace(" ", "") for c in CASES]
        out = subprocess.run([exe] + args, capture_output=True, text=True).stdout.split()
        for (code, want, what), got in zip(CASES, out + ["?"] * len(CASES)):
            check(got == str(want), f"{code}: {what} ({'locked' if want else 'not locked'}; got {got})")
finish()
