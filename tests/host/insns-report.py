#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""scripts/insns-report on a made-up run directory: instructions per I/O
in all, by module and by function, attributed to the symbol each block
starts in, and entries per I/O from the blocks that start a function."""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from hostcheck import check, finish  # noqa: E402

report = os.path.join(here, "..", "..", "scripts", "insns-report")

kallsyms = """ffffffff81000000 T schedule
ffffffff81000100 t helper
ffffffffa0000000 t svc_rdma_sendto\t[rpcrdma]
ffffffffa0100000 t _RNvNtNtCsgDxedjgdAaq_10svcrdma_rs9transport6sendto\t[svcrdma_rs]
ffffffffa0100400 t other\t[svcrdma_rs]
"""
# Blocks: schedule entered 20 times (its first block), 10 more blocks
# inside it; helper; the C transport's function; ours.
c_insns = """user 5000
ffffffff81000000 100 20
ffffffff81000040 50 10
ffffffff81000100 30 3
ffffffffa0000010 800 8
"""
rs_insns = """user 5000
ffffffff81000000 80 16
ffffffff81000100 30 3
ffffffffa0100000 600 12
ffffffffa0100410 200 4
"""
with tempfile.TemporaryDirectory() as d:
    for tag, body in (("c.rand_read", c_insns), ("rs_auto.rand_read", rs_insns)):
        open(os.path.join(d, "insns." + tag), "w").write(body)
        open(os.path.join(d, "kallsyms." + tag), "w").write(kallsyms)
        open(os.path.join(d, "ios." + tag), "w").write("10\n")
    out = subprocess.run([sys.executable, report, d, "--calls", "schedule,other"],
                         capture_output=True, text=True)
    check(out.returncode == 0, f"insns-report runs ({out.stderr.strip()[:200]})")
    text = out.stdout
    # C: 5000 + 100 + 50 + 30 + 800 = 5980 over 10 I/Os; ours 5910.
    check("| total | 598 | 591 (-7) |" in text, "totals per I/O, ours against C's")
    check("| vmlinux | 18 | 11 (-7) |" in text, "vmlinux: schedule's blocks and helper's")
    check("| svcrdma_rs | 0 | 80 (+80) |" in text, "a module's blocks, by the module its symbol is in")
    check("| rpcrdma | 80 | 0 (-80) |" in text, "the C transport's module")
    check("| user | 500 | 500 (+0) |" in text, "user space summed as one")
    check("| schedule | 2.00 | 1.60 |" in text,
          "entries: the runs of the block at a function's first byte, not its inner blocks")
    check("| other | 0.00 | 0.00 |" in text, "a block inside a function is not an entry")
    check("| rs:svcrdma_rs::transport::sendto | 0 | 60 (+60) |" in text, "Rust symbols shortened to their path")

# --goals: the transports' own work. C's run: its server (svc_rdma_sendto),
# its client (rpcrdma_send) and rdma_rw in ib_core; ours: the same client,
# and svcrdma_rs. Per I/O (10 I/Os), 4 KiB jobs: C's share (1000 - 200 +
# 100) / 10 = 90 (svc_rdma_* 80 + rdma_rw 10), ours 80; seq_read: (10000 -
# 2000 + 5000) / 10 = 1300, ours 2000; slope (2000 - 80) / 255 = 7.53
# against (1300 - 90) / 255 = 4.75.
gsyms = """ffffffff81000000 T schedule
ffffffffa0000000 t svc_rdma_sendto\t[rpcrdma]
ffffffffa0000400 t rpcrdma_send\t[rpcrdma]
ffffffffa0100000 t _RNvNtNtCsgDxedjgdAaq_10svcrdma_rs9transport6sendto\t[svcrdma_rs]
ffffffffa0200000 t rdma_rw_ctx_init\t[ib_core]
"""
def g_c(k):
    return f"user 50\nffffffffa0000000 {800 * k} 1\nffffffffa0000400 {200 * k} 1\nffffffffa0200000 {100 * k if k == 1 else 5000} 1\n"
def g_rs(k):
    return f"user 50\nffffffffa0000400 {200 * k} 1\nffffffffa0100000 {800 if k == 1 else 20000} 1\n"
with tempfile.TemporaryDirectory() as top:
    d = os.path.join(top, "run-siw")
    os.mkdir(d)
    for job, k in (("rand_read", 1), ("rand_write", 1), ("seq_read", 10)):
        for tag, body in (("c." + job, g_c(k)), ("rs_auto." + job, g_rs(k))):
            open(os.path.join(d, "insns." + tag), "w").write(body)
            open(os.path.join(d, "kallsyms." + tag), "w").write(gsyms)
            open(os.path.join(d, "ios." + tag), "w").write("10\n")
    out = subprocess.run([sys.executable, report, d, "--goals"], capture_output=True, text=True)
    check(out.returncode == 0, f"insns-report --goals runs ({out.stderr.strip()[:200]})")
    text = out.stdout
    check("svcrdma_rs 80, C's server share 90 (svc_rdma_* and rdma_rw rows: 90), ratio 0.89" in text,
          "C's server share: its rpcrdma less ours (the client) plus rdma_rw; the cross-check")
    check("goal rpc4k_read siw ours=80 c=90 ratio=0.89" in text, "a 4 KiB goal line, the device from the run's name")
    check("goal rpc4k_write siw ours=80 c=90 ratio=0.89" in text, "the write goal line")
    check("goal page_slope siw ours=8 c=5 ratio=1.59" in text, "the per-page slope: (1 MiB - 4 KiB) / 255")
    plain = subprocess.run([sys.executable, report, d], capture_output=True, text=True).stdout
    check("goal " not in plain, "no goal lines without --goals")

# --summary: counts named <server>.<job>@v<vers>#<run>, two versions, three
# runs. C's server share per I/O is 80 + run on rand_read (svc_rdma_sendto
# 800 + 10 * run over 10 I/Os) and 10x that on seq_read; ours 70, 75 on
# rand_read_qd1 under v4.2 (the worst 4 KiB read), 700 on seq_read.
with tempfile.TemporaryDirectory() as top:
    d = os.path.join(top, "run-rxe")
    os.mkdir(d)
    for v in ("3", "4.2"):
        for r in (1, 2, 3):
            for job, k in (("rand_read", 1), ("rand_write", 1), ("seq_read", 10), ("rand_read_qd1", 1)):
                tag = f"{job}@v{v}#{r}"
                ours = 700 * k + (50 if (job, v) == ("rand_read_qd1", "4.2") else 0)
                bodies = (("c", f"user 5\nffffffffa0000000 {(800 + 10 * r) * k} 1\nffffffffa0000400 {200 * k} 1\n"),
                          ("rs_auto", f"user 5\nffffffffa0000400 {200 * k} 1\nffffffffa0100000 {ours} 1\n"))
                for srv, body in bodies:
                    open(os.path.join(d, f"insns.{srv}.{tag}"), "w").write(body)
                    open(os.path.join(d, f"kallsyms.{srv}.{tag}"), "w").write(gsyms)
                    open(os.path.join(d, f"ios.{srv}.{tag}"), "w").write("10\n")
    out = subprocess.run([sys.executable, report, d, "--summary"], capture_output=True, text=True)
    check(out.returncode == 0, f"insns-report --summary runs ({out.stderr.strip()[:200]})")
    text = out.stdout
    check("| rxe | 3 | rand_read | 3 | 70 (70-70) | 82 (81-83) | 0.85 (0.84-0.86) |" in text,
          "per job and version: the median over the runs and the min-max spread")
    check("goal rpc4k_read rxe ours=75 c=82 ratio=0.91 at=4.2/rand_read_qd1 spread=0.90-0.93 runs=3" in text,
          "a goal line is the worst job and version, with its spread and run count")
    check("goal rpc4k_write rxe ours=70 c=82 ratio=0.85 at=3/rand_write" in text, "the write goal")
    check("goal page_slope rxe ours=2 c=3 ratio=0.85 at=3/seq_read-rand_read" in text,
          "the slope from the 1 MiB and 4 KiB jobs of one version and run")
    check("goal twovm_4k rxe not-measured" in text, "an unmeasured goal says so")
    check("## " not in text, "no per-job tables in the summary")
    one = subprocess.run([sys.executable, report, d, "--run", "2"], capture_output=True, text=True).stdout
    check("## rand_read@v3#2" in one and "#1:" not in one and "#3:" not in one,
          "--run keeps one run's tables")
finish()
