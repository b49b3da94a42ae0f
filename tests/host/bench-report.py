#!/usr/bin/env python3
"""Host test of scripts/bench-report's statistics (no VM).

- Student's t quantiles against table values;
- a synthetic run where svcrdma_rs is 10% faster than C with 2% noise:
  the interval holds 1.10, the A/A arms pass, the IOPS goal is met;
- the same run with the C A/A arm 20% off: declared too noisy, no goal
  judged met;
- a run without A/A arms: unchecked;
- a busy host: too noisy.
"""
import importlib.machinery
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "scripts", "bench-report")
loader = importlib.machinery.SourceFileLoader("bench_report", script)
spec = importlib.util.spec_from_loader("bench_report", loader)
br = importlib.util.module_from_spec(spec)
loader.exec_module(br)

sys.path.insert(0, here)
from hostcheck import check, finish  # noqa: E402


for p, df, want in ((0.975, 1, 12.7062), (0.975, 4, 2.7764), (0.975, 9, 2.2622),
                    (0.995, 29, 2.7564), (0.975, 1000, 1.9623)):
    got = br.t_quantile(p, df)
    check(abs(got - want) < 1e-3, f"t_quantile({p}, {df}) = {got:.4f} (table {want})")


def fio_rec(rnd, server, vers, job, thr, p99, ticks):
    unit, side = br.JOBS[job][1], br.JOBS[job][2]
    secs = 8
    if unit == "MB/s":
        bw, iops = thr * 1e6, thr
    else:
        bw, iops = thr * 4096, thr
    moved = bw * secs
    s = {"io_bytes": moved, "bw_bytes": bw, "iops": iops,
         "clat_ns": {"percentile": {"50.000000": p99 * 400, "99.000000": p99 * 1000}}}
    z = {"io_bytes": 0, "bw_bytes": 0, "iops": 0, "clat_ns": {"percentile": {}}}
    j = {"read": s if side == "read" else z, "write": s if side == "write" else z}
    return {"kind": "fio", "round": rnd, "server": server, "vers": vers, "job": job,
            "memreg": "frmr" if server.startswith("rs") else "-",
            "cpu_busy_ticks": ticks, "nfsd_ticks": ticks // 4, "worker_ticks": ticks // 2,
            "fio": {"jobs": [j]}}


def synth(path, speed, aa_c=1.0, servers=("c", "c_aa", "rs_auto", "rs_aa"), seed=1, aa_rs=1.0):
    rng = random.Random(seed)
    lines = ["BENCH " + json.dumps({"kind": "meta", "device": "rxe", "rounds": 10, "hz": 100,
                                    "runtime_s": 8, "cpus": 2, "mem_kb": 3 << 20,
                                    "nfsd_threads": 8})]
    for rnd in range(1, 11):
        drift = rng.uniform(0.8, 1.2)  # round-to-round drift: paired ratios cancel it
        for job in br.JOBS:
            for vers in ("3", "4.2"):
                for s in servers:
                    f = {"c": 1.0, "c_aa": aa_c, "rs_auto": speed, "rs_aa": speed * aa_rs}[s]
                    noise = rng.uniform(0.98, 1.02)
                    thr = 1000 * drift * f * noise
                    lines.append("BENCH " + json.dumps(fio_rec(
                        rnd, s, vers, job, thr, 100 / (f * noise), int(800 / (f * noise)))))
    for s, kb in (("c", 400), ("rs_auto", 300)):
        for r in (1, 2, 3):
            lines.append("BENCH " + json.dumps({"kind": "mem", "round": r, "server": s,
                                                "conns": 7, "slab_kb": kb * 7, "used_kb": kb * 7}))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run(logs, host=None):
    """host: one value for ten samples, or a list, one sample each."""
    d = tempfile.mkdtemp()
    args = [sys.executable, script, "--md", f"{d}/r.md", "--json", f"{d}/r.json"]
    if host is not None:
        samples = host if isinstance(host, list) else [host] * 10
        with open(f"{d}/host.log", "w") as f:
            f.write("".join(f"00:00:{i:02d} {v}\n" for i, v in enumerate(samples)))
        args += ["--host", f"{d}/host.log"]
    out = subprocess.run(args + logs, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr)
        return None
    res = json.load(open(f"{d}/r.json"))
    res["_md"] = open(f"{d}/r.md").read()
    return res


with tempfile.TemporaryDirectory() as d:
    synth(f"{d}/good.log", 1.10)
    r = run([f"{d}/good.log"], host=2)
    check(r is not None and not r["verdicts"], f"a clean run has no verdict against it: {r and r['verdicts']}")
    g = {x["what"]: x for x in r["goals"]}
    rr = g["rand_read v3 IOPS"]
    check(rr["lo"] < 1.10 < rr["hi"] and rr["met"] is True,
          f"rand_read v3: ratio {rr['ratio']:.3f} [{rr['lo']:.3f}, {rr['hi']:.3f}] holds 1.10, met")
    check(g["seq_read v3 MB/s"]["met"] is True, "seq_read v3 >= 1.05 met")
    check(g["rand_read v3 guest CPU/MB"]["met"] is True, "CPU/MB 1/1.1 <= 0.9 met")
    check(g["memory per idle connection (kB, both ends)"]["met"] is True, "memory 300 <= 400 met")

    synth(f"{d}/slow.log", 0.97)
    r = run([f"{d}/slow.log"])
    g = {x["what"]: x for x in r["goals"]}
    check(g["rand_read v3 IOPS"]["met"] is False, "a 3% slower module misses the IOPS goal")

    synth(f"{d}/noisy.log", 1.10, aa_c=0.8)
    r = run([f"{d}/noisy.log"])
    check(any("TOO NOISY" in v for v in r["verdicts"]), f"C A/A off by 20%: too noisy ({r['verdicts']})")
    check(all(x["met"] is not True for x in r["goals"]), "too noisy: no goal judged met")

    synth(f"{d}/noaa.log", 1.10, servers=("c", "rs_auto"))
    r = run([f"{d}/noaa.log"])
    check(any("UNCHECKED" in v for v in r["verdicts"]), "no A/A arms: unchecked")

    r = run([f"{d}/good.log"], host=40)
    check(any("busy" in v for v in r["verdicts"]), "a busy host: too noisy")
    check(all(x["met"] is not True for x in r["goals"]), "busy host: no goal judged met")

    # A sample below zero (the tick-sampled total under the qemu share) is
    # no load, and must not hide another sample's load: 40% in half the
    # samples is 20% on average, busy, whatever the other half says.
    r = run([f"{d}/good.log"], host=["40 40", "0 -40"] * 5)
    check(r is not None and any("busy" in v for v in r["verdicts"]),
          f"40% in half the samples, the rest below 0: too noisy ({r and r['verdicts']})")
    r = run([f"{d}/good.log"], host=["0 -3"] * 10)
    check(r is not None and not r["verdicts"], f"an idle host's -3% raw samples: no verdict ({r and r['verdicts']})")
    # A sample in which a VM started or stopped measures nothing: skipped,
    # not read as load; the others still count.
    r = run([f"{d}/good.log"], host=["0 -1"] * 9 + ["- vm-changed"])
    check(r is not None and not r["verdicts"], f"an idle host with a VM's exit sample: no verdict ({r and r['verdicts']})")
    check(r is not None and r["host"]["n"] == 9 and r["host"]["skipped"] == 1,
          f"the VM's exit sample is counted as skipped ({r and r['host']})")
    r = run([f"{d}/good.log"], host=["40 40"] * 9 + ["- vm-changed"])
    check(r is not None and any("busy" in v for v in r["verdicts"]),
          f"a busy host with a VM's exit sample: still too noisy ({r and r['verdicts']})")

    # Twenty clean runs: the family-wise A/A check calls none noisy, and
    # none has every A/A row of a metric on one side of 1.
    calls = biased = 0
    for seed in range(20):
        synth(f"{d}/s.log", 1.0, seed=seed + 100)
        r = run([f"{d}/s.log"])
        calls += any("TOO NOISY" in v for v in r["verdicts"])
        biased += any("BIASED" in v for v in r["verdicts"])
    check(calls <= 2, f"clean runs called noisy: {calls} of 20")
    check(biased == 0, f"clean runs called biased: {biased} of 20")

    # The minimum detectable effect: the A/A spread, printed; a ratio nearer
    # to a goal's line than that is not judged, either way.
    r = run([f"{d}/good.log"], host=2)
    check("Minimum detectable effect" in r["_md"] and "throughput ±" in r["_md"],
          "the A/A spread is printed as the minimum detectable effect")
    check(all(x.get("within_mde") is None for x in r["goals"] if x["ratio"] is not None),
          "a 10% faster module: every goal clears the A/A spread and is judged")
    synth(f"{d}/edge.log", 0.995)
    r = run([f"{d}/edge.log"])
    g = {x["what"]: x for x in r["goals"]}
    rr = g["rand_read v3 IOPS"]
    check(rr["met"] is None and rr.get("within_mde") is not None and abs(rr["ratio"] - 1.0) < rr["within_mde"],
          f"a ratio 0.5% from its line, inside the A/A spread: not judged ({rr})")
    check(g["seq_read v3 MB/s"]["met"] is False, "the same module is judged against a line it is far from (>= 1.05)")

    # Every A/A row a little above 1 (1%: inside each family-wise
    # interval, so not too noisy): the run is biased, and judges nothing.
    synth(f"{d}/bias.log", 1.10, aa_c=1.01, aa_rs=1.01)
    r = run([f"{d}/bias.log"])
    check(any("BIASED" in v for v in r["verdicts"]) and not any("TOO NOISY" in v for v in r["verdicts"]),
          f"every A/A row above 1, each interval holding 1: biased, not noisy ({r['verdicts']})")
    check(all(x["met"] is not True for x in r["goals"]), "biased: no goal judged met")
finish()
