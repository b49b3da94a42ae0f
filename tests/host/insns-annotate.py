#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""scripts/insns-annotate on a made-up run directory and a small object
file: each instruction's runs per I/O from the blocks that cover it, what
a call calls, and the function's sum."""
import os
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from hostcheck import check, finish  # noqa: E402

tool = os.path.join(here, "..", "..", "scripts", "insns-annotate")

# f: a block of two instructions up to the call, one of two after it, and a
# branch never taken to a block that never ran.
asm = """\t.text
\t.globl f
f:\tpush %rbp
\tcall ext_fn
\ttest %eax, %eax
\tjne 1f
\tpop %rbp
\tret
1:\tud2
\t.globl g
g:\tret
"""
with tempfile.TemporaryDirectory() as d:
    src, obj = os.path.join(d, "t.s"), os.path.join(d, "t.o")
    open(src, "w").write(asm)
    subprocess.run(["as", "--64", "-o", obj, src], check=True)
    base = 0xffffffffa0000000
    # Offsets: push 0, call 1 (5 bytes), test 6, jne 8, pop 10, ret 11, ud2 12, g 14.
    open(os.path.join(d, "kallsyms.rs_auto.rand_read"), "w").write(
        f"{base:x} t f\t[svcrdma_rs]\n{base + 14:x} t g\t[svcrdma_rs]\n")
    open(os.path.join(d, "insns.rs_auto.rand_read"), "w").write(
        f"user 100\n{base:x} 40 20\n{base + 6:x} 20 10\n{base + 10:x} 20 10\n{base + 14:x} 5 5\n")
    open(os.path.join(d, "ios.rs_auto.rand_read"), "w").write("10\n")
    out = subprocess.run([sys.executable, tool, d, "rs_auto.rand_read", obj, "f"],
                         capture_output=True, text=True)
    check(out.returncode == 0, f"insns-annotate runs ({out.stderr.strip()[:200]})")
    text = out.stdout
    check("f (rs_auto.rand_read): 8.0 instructions per I/O" in text,
          "the function's sum: its blocks only, not g's")
    check("    2.00      0: push" in text, "a block's first instruction: its runs per I/O")
    check("    2.00      1: call" in text, "a block's later instruction: the block's runs")
    check("-> ext_fn" in text, "what a call calls, from the relocation")
    check("    1.00      a: pop" in text, "the block after a branch")
    check("ud2" not in text, "an instruction that never ran is left out")
    every = subprocess.run([sys.executable, tool, d, "rs_auto.rand_read", obj, "f", "--all"],
                           capture_output=True, text=True).stdout
    check("    0.00      c: ud2" in every, "--all shows it, with 0")
    gone = subprocess.run([sys.executable, tool, d, "rs_auto.rand_read", obj, "nosuch"],
                          capture_output=True, text=True)
    check(gone.returncode != 0 and "nosuch" in gone.stderr, "an unknown symbol is refused")

# --lines: the counts by source line, through inlined calls. f (lines 1-4
# of t.c) inlines g (5-8) at line 3; one block of f runs 10 times per I/O.
csrc = """static inline __attribute__((always_inline)) int g(int *p)
{
\treturn p[0] * 3 + p[1];
}
int f(int *p)
{
\treturn g(p) + 1;
}
"""
with tempfile.TemporaryDirectory() as d:
    src, obj, nodbg = os.path.join(d, "t.c"), os.path.join(d, "t.o"), os.path.join(d, "n.o")
    open(src, "w").write(csrc)
    subprocess.run(["gcc", "-O2", "-g", "-c", "-o", obj, src], check=True)
    subprocess.run(["gcc", "-O2", "-c", "-o", nodbg, src], check=True)
    base = 0xffffffffa0000000
    open(os.path.join(d, "kallsyms.rs_auto.rand_read"), "w").write(f"{base:x} t f\t[svcrdma_rs]\n")
    dis = subprocess.run(["objdump", "-d", obj], capture_output=True, text=True).stdout
    n = sum(1 for line in dis.splitlines() if re.match(r"^\s+[0-9a-f]+:\t", line))
    open(os.path.join(d, "insns.rs_auto.rand_read"), "w").write(f"user 1\n{base:x} {10 * n} 10\n")
    open(os.path.join(d, "ios.rs_auto.rand_read"), "w").write("1\n")
    out = subprocess.run([sys.executable, tool, d, "rs_auto.rand_read", obj, "f", "--lines", "4", "0"],
                         capture_output=True, text=True)
    check(out.returncode == 0, f"insns-annotate --lines runs ({out.stderr.strip()[:200]})")
    text = out.stdout
    check(re.search(r"\n\s+[\d.]+ \S*t\.c:7\n", text) is not None,
          "the outermost frame: f's line that the inlined call is on")
    inner = re.search(r"\n\s+([\d.]+)   \S*t\.c:3\n", text)
    check(inner is not None and float(inner.group(1)) > 0,
          "g's line, one level down, under f's line with its instructions")
    total = float(re.search(r"\): ([\d.]+) instructions", text).group(1))
    top = sum(float(m.group(1)) for m in re.finditer(r"\n\s+([\d.]+) \S*t\.c:\d+", "\n" + text))
    check(abs(top - total) < 0.01, f"the outermost lines add up to the function's count ({top} of {total})")
    bare = subprocess.run([sys.executable, tool, d, "rs_auto.rand_read", nodbg, "f", "--lines"],
                          capture_output=True, text=True)
    check(bare.returncode != 0 and "line tables" in bare.stderr,
          "a module without line tables is refused, not shown as ??")
finish()
