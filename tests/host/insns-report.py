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


def report_on(d, *args):
    """insns-report's output on run directory d with args (its exit status
    checked)."""
    out = subprocess.run([sys.executable, report, d, *args], capture_output=True, text=True)
    check(out.returncode == 0, f"insns-report {' '.join(args)} runs ({out.stderr.strip()[:200]})")
    return out.stdout


def write_counts(d, tag, insns, syms, ios=10):
    """One server's and job's counts in run directory d, as the bench
    leaves them: insns.<tag>, kallsyms.<tag>, ios.<tag>."""
    for kind, body in (("insns", insns), ("kallsyms", syms), ("ios", f"{ios}\n")):
        with open(os.path.join(d, f"{kind}.{tag}"), "w") as f:
            f.write(body)

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
        write_counts(d, tag, body, kallsyms)
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
            write_counts(d, tag, body, gsyms)
    text = report_on(d, "--goals")
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
                    write_counts(d, f"{srv}.{tag}", body, gsyms)
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

# Events per I/O (10 I/Os). Device entries (rxe_post_send etc.) count the
# client's too: C's posts are ours plus the C run's device calls less
# ours. The fourth column is locked instructions executed.
esyms = """ffffffff81000000 T __schedule
ffffffffa0000000 t svc_rdma_wc_send\t[rpcrdma]
ffffffffa0000100 t svc_rdma_wc_receive\t[rpcrdma]
ffffffffa0000200 t rpcrdma_wc_send\t[rpcrdma]
ffffffffa0000300 t svc_rdma_wc_read_done\t[rpcrdma]
ffffffffa0100000 t svcrdma_rs_ib_post_send\t[svcrdma_rs]
ffffffffa0100100 t svcrdma_rs_ib_post_recv\t[svcrdma_rs]
ffffffffa0100200 t _RINvNtNtCsgDxedjgdAaq_10svcrdma_rs4rdma5owned4doneNtNtNtB6_9transport4ctxt8CallCtxtKy0_EB6_\t[svcrdma_rs]
ffffffffa0100280 t _RINvNtNtCsgDxedjgdAaq_10svcrdma_rs4rdma5owned4doneNtNtNtB6_9transport4ctxt8CallCtxtKy1_EB6_\t[svcrdma_rs]
ffffffffa0100300 t _RINvNtNtCsgDxedjgdAaq_10svcrdma_rs4rdma4recv9recv_doneXEB6_\t[svcrdma_rs]
ffffffffa0200000 t rxe_post_send\t[rdma_rxe]
ffffffffa0200100 t rxe_post_recv\t[rdma_rxe]
ffffffffa0200200 t rxe_req_notify_cq\t[rdma_rxe]
"""
# C run: client sends 10 (rpcrdma_wc_send), posts 20 sends (10 client, 10
# server) and 4 receives (2 and 2), 10 send and 10 receive completions at
# its handlers and 4 Read-chain ones, 9 arms, 30 switches; 60 locked in
# all, 25 in rpcrdma.
e_c = """user 100 0 0
ffffffff81000000 300 30 35
ffffffffa0000000 100 10 20
ffffffffa0000100 100 10 0
ffffffffa0000200 100 10 5
ffffffffa0000300 40 4 0
ffffffffa0200000 200 20 0
ffffffffa0200100 40 4 0
ffffffffa0200200 90 9 0
"""
# Ours: the same client (10 posts, 2 receives, rpcrdma 5 locked), our
# server posts 10 sends through the shim, 1 receive post, 3 Reply chain
# and 6 Read chain completions, 10 receive completions; 7 arms, 20
# switches, 30 locked in all, 2 in svcrdma_rs.
e_rs = """user 100 0 0
ffffffff81000000 200 20 23
ffffffffa0000200 100 10 5
ffffffffa0100000 100 10 2
ffffffffa0100100 10 1 0
ffffffffa0100200 30 3 0
ffffffffa0100280 60 6 0
ffffffffa0100300 100 10 0
ffffffffa0200000 200 20 0
ffffffffa0200100 30 3 0
ffffffffa0200200 70 7 0
"""
with tempfile.TemporaryDirectory() as top:
    d = os.path.join(top, "run-rxe")
    os.mkdir(d)
    for tag, body in (("c.rand_read", e_c), ("rs_auto.rand_read", e_rs)):
        write_counts(d, tag, body, esyms)
    text = report_on(d, "--goals")
    check("| ib_post_send calls | 1.00 | 1.00 | the server |" in text,
          "post_send: ours at the shim, C's as ours plus the device's calls of its run less ours")
    check("| ib_post_recv calls | 0.10 | 0.20 | the server |" in text, "post_recv the same way")
    check("| Reply (Send) completions | 0.30 | 1.00 | the server |" in text,
          "Send completions at each server's handlers, not the client's, nor Read chains'")
    check("| Read-chain completions | 0.60 | 0.40 | the server |" in text,
          "Read-chain completions apart")
    check("| receive completions | 1.00 | 1.00 | the server |" in text, "receive completions")
    check("| locked instructions in the transport's module | 0.20 | 2.00 | the server |" in text,
          "locked in the module: ours, and C's rpcrdma less the client's (rpcrdma of our run)")
    check("| CQ arms (whole guest) | 0.70 | 0.90 | each run |" in text, "CQ arms of each whole guest")
    check("| context switches (whole guest, __schedule) | 2.00 | 3.00 | each run |" in text,
          "context switches: __schedule entered")
    check("| locked instructions (whole guest) | 3.00 | 6.00 | each run |" in text,
          "locked instructions: the fourth column, summed over the guest")
    # Three columns (a plugin that did not count them): no locked figures.
    for tag, body in (("c.rand_read", e_c), ("rs_auto.rand_read", e_rs)):
        open(os.path.join(d, "insns." + tag), "w").write(
            "\n".join(" ".join(l.split()[:3]) for l in body.splitlines()) + "\n")
    text = subprocess.run([sys.executable, report, d, "--goals"], capture_output=True, text=True).stdout
    check("| locked instructions (whole guest) | - | - | each run |" in text,
          "no fourth column: locked instructions not measured, not zero")

# --summary's event goals over runs and jobs: the worst job (send
# completions at QD16: rand_read's 0.3 against rand_write's 0.5; post_send
# per Reply on read jobs only), C's there, and the limit.
with tempfile.TemporaryDirectory() as top:
    d = os.path.join(top, "run-rxe")
    os.mkdir(d)
    # rand_read_qd1: two RPCs per I/O (20 receive completions each side),
    # two posts each: still one post per Reply.
    for job, done, posts, calls in (("rand_read", 3, 10, 10), ("rand_write", 5, 20, 10),
                                    ("rand_write_qd1", 9, 20, 10), ("rand_read_qd1", 3, 20, 20)):
        for r in (1, 2, 3):
            tag = f"{job}@v3#{r}"
            rs = e_rs.replace("ffffffffa0100200 30 3 0", f"ffffffffa0100200 30 {done} 0").replace(
                "ffffffffa0100000 100 10 2", f"ffffffffa0100000 100 {posts} 2").replace(
                "ffffffffa0200000 200 20 0", f"ffffffffa0200000 200 {posts + 10} 0").replace(
                "ffffffffa0100300 100 10 0", f"ffffffffa0100300 100 {calls} 0")
            c = e_c.replace("ffffffffa0000100 100 10 0", f"ffffffffa0000100 100 {calls} 0").replace(
                "ffffffffa0200000 200 20 0", f"ffffffffa0200000 200 {posts + 10} 0")
            for srv, body in (("c", c), ("rs_auto", rs)):
                write_counts(d, f"{srv}.{tag}", body, esyms)
    text = subprocess.run([sys.executable, report, d, "--summary"], capture_output=True, text=True).stdout
    check("goal send_completions rxe ours=0.500 c=1.000 limit=0.25 at=3/rand_write runs=3" in text,
          "send completions: the worst QD16 job, not the QD1 one")
    check("goal post_send_per_reply rxe ours=1.000 c=1.000 limit=1 at=3/rand_read runs=3" in text,
          "post_send per Reply: on read jobs (a write's Reads are posted apart), per RPC "
          "(two posts for two RPCs an I/O are one per Reply)")
    check("goal recv_posts_per_call rxe ours=0.100 c=0.200 limit=0.0625" in text, "receive posts per Call")
    check("goal locked_insns rxe ours=3.000 c=6.000 ratio=0.500" in text,
          "locked instructions: each whole guest, ours against C's")
    check("| rxe | 3 | rand_write | 2.00/2.00 | 0.10/0.20 | 0.50/1.00 |" in text,
          "event rows: ours/C's median per job")
# --twovm: the server VM's whole count per I/O (10 I/Os), ours against
# C's; C's transport is all of rpcrdma.ko there (no client in that VM).
# rand_read: C 1000 + 100 (user) + 900 (rpcrdma) = 2000, ours 1000 + 100
# + 700 + run: 1801-1803 (0.901 median); rand_write: ours 2100 + 10 * run
# (the worst 4 KiB job, 1.06); seq_read 10x, ours 0.9x C's.
tsyms = """ffffffff81000000 T schedule
ffffffffa0000000 t svc_rdma_sendto\t[rpcrdma]
ffffffffa0100000 t _RNvNtNtCsgDxedjgdAaq_10svcrdma_rs9transport6sendto\t[svcrdma_rs]
"""
with tempfile.TemporaryDirectory() as top:
    d = os.path.join(top, "twovm-siw")
    os.mkdir(d)
    for r in (1, 2, 3):
        for job, k, extra in (("rand_read", 1, 0), ("rand_write", 1, 300), ("seq_read", 10, 0)):
            tag = f"{job}@v3#{r}"
            c = f"user {1000 * k}\nffffffff81000000 {10000 * k} 1\nffffffffa0000000 {9000 * k} 1\n"
            rs = (f"user {1000 * k}\nffffffff81000000 {10000 * k + extra * 10} 1\n"
                  f"ffffffffa0100000 {7000 * k + (10 * r if k == 1 else 10000)} 1\n")
            for srv, body in (("c", c), ("rs_auto", rs)):
                write_counts(d, f"{srv}.{tag}", body, tsyms)
    out = subprocess.run([sys.executable, report, "--summary", "--twovm", d], capture_output=True, text=True)
    check(out.returncode == 0, f"insns-report --summary --twovm runs ({out.stderr.strip()[:200]})")
    text = out.stdout
    check("| siw | 3 | rand_read | 3 | 1,802 (1,801-1,803) | 2,000 (2,000-2,000) | 0.901 (0.900-0.901) "
          "| 702 | 900 | 0.78 |" in text,
          "two VMs: the server VM's whole count per I/O, and the transports' part (C's: all of rpcrdma)")
    check("goal twovm_4k siw ours=2102 c=2000 ratio=1.051 at=3/rand_write spread=1.050-1.052 runs=3" in text,
          "twovm_4k: the worst 4 KiB job")
    check("goal twovm_1m siw ours=19000 c=20000 ratio=0.950 at=3/seq_read" in text, "twovm_1m: the 1 MiB jobs")
    bad = subprocess.run([sys.executable, report, d, "--twovm", d], capture_output=True, text=True)
    check(bad.returncode != 0, "--twovm without --summary is refused")
finish()
