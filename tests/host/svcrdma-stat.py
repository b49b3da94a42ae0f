#!/usr/bin/env python3
"""Host test of scripts/svcrdma-stat against a fake sysfs tree (no VM).

- not loaded: the message and exit status 1;
- -1 --json: the connections, their models and counters;
- two refreshes while the counters move: the rates of the interval;
- the table: one row per connection, the rates, the errors column;
- a connection that goes between refreshes is simply left out.
"""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
tool = os.path.join(here, "..", "..", "scripts", "svcrdma-stat")
sys.path.insert(0, here)
from hostcheck import check, finish  # noqa: E402


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def conn(root, cid, peer, stats, memreg="frmr"):
    d = os.path.join(root, "connections", str(cid))
    for k, v in (("peer", peer), ("device", "rxe0"), ("transport", "roce"),
                 ("memreg", memreg), ("credits", "64"), ("backchannel", "0")):
        write(os.path.join(d, k), v + "\n")
    for k, v in stats.items():
        write(os.path.join(d, "stats", k), f"{v}\n")


def run(*args):
    return subprocess.run([sys.executable, tool, *args], capture_output=True, text=True, timeout=60)


with tempfile.TemporaryDirectory() as t:
    r = run("-1", "--sysfs", os.path.join(t, "nothing"))
    check(r.returncode == 1 and "not loaded" in r.stderr and "modprobe svcrdma_rs" in r.stderr,
          f"not loaded: exit {r.returncode}, '{r.stderr.strip()}'")

    root = os.path.join(t, "svcrdma_rs")
    base = {"calls": 100, "bytes_recv_inline": 1_000_000, "bytes_read": 7_000_000,
            "bytes_sent_inline": 500_000, "bytes_written": 8_000_000,
            "rdma_errors_chunk": 1, "completion_errors": 0}
    conn(root, 3, "192.168.1.5:0", base)
    conn(root, 12, "[fe80::1]:0", {"calls": 5}, memreg="dma_mr")
    write(os.path.join(root, "stats", "calls"), "105\n")
    write(os.path.join(root, "stats", "rdma_errors_chunk"), "1\n")

    r = run("-1", "--json", "--sysfs", root)
    check(r.returncode == 0, f"-1 --json exits 0 ({r.returncode}, {r.stderr.strip()})")
    j = json.loads(r.stdout.splitlines()[0])
    ids = [c["id"] for c in j["connections"]]
    check(ids == [3, 12], f"both connections, in order: {ids}")
    c3 = j["connections"][0]
    check(c3["memreg"] == "frmr" and c3["credits"] == "64" and c3["peer"] == "192.168.1.5:0",
          "model, credits, peer from sysfs")
    check(abs(c3["mb_in"] - 8.0) < 1e-9 and abs(c3["mb_out"] - 8.5) < 1e-9 and c3["errors"] == 1,
          f"totals since the start: in {c3['mb_in']} MB, out {c3['mb_out']} MB, errors {c3['errors']}")
    check(j["totals"].get("calls") == 105, "module totals read")

    # Rates over an interval: two snapshots around the counters moving by
    # 50 calls, 10 MB read and 2 failed completions, connection 12 gone
    # (the tool's functions, with the snapshot times set: no race).
    import importlib.machinery
    import importlib.util
    import shutil
    loader = importlib.machinery.SourceFileLoader("svcrdma_stat", tool)
    spec = importlib.util.spec_from_loader("svcrdma_stat", loader)
    st = importlib.util.module_from_spec(spec)
    loader.exec_module(st)
    first = st.snapshot(root)
    conn(root, 3, "192.168.1.5:0", dict(base, calls=150, bytes_read=17_000_000,
                                        completion_errors=2))
    shutil.rmtree(os.path.join(root, "connections", "12"))
    second = st.snapshot(root)
    second["time"] = first["time"] + 2.0
    rows, dt = st.rows_of(second, first)
    check([r["id"] for r in rows] == [3], "the connection that went is left out")
    c = rows[0]
    check(dt == 2.0 and abs(c["rpc_per_s"] - 25.0) < 1e-9, f"RPC/s over 2 s: {c['rpc_per_s']}")
    check(abs(c["mb_in_per_s"] - 5.0) < 1e-9 and c["mb_out_per_s"] == 0,
          f"MB/s over 2 s: in {c['mb_in_per_s']}, out {c['mb_out_per_s']}")
    check(c["errors"] == 2, f"errors in the interval: {c['errors']}")
    # End to end: two refreshes, each a JSON line.
    r = run("--json", "-i", "0.2", "-c", "2", "--sysfs", root)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    check(r.returncode == 0 and len(lines) == 2 and lines[1]["interval_s"] > 0,
          f"-c 2: two refreshes, the second over an interval ({len(lines)})")

    r = run("-1", "--sysfs", root)
    out = r.stdout.splitlines()
    check(r.returncode == 0 and out[0].startswith("svcrdma_rs: 1 connection(s)"), f"table header: {out[:1]}")
    check(any(line.split()[0] == "3" and "rxe0/roce" in line and "frmr" in line for line in out[2:3]),
          f"table row: {out[2:3]}")
finish()
