#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""scripts/bench-guest's arm order (williams): over its cycle of rounds
every arm runs in every slot equally often and right after every other
arm equally often, so that what one arm leaves behind lands on all alike."""
import collections
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from hostcheck import check, finish  # noqa: E402

src = open(os.path.join(here, "..", "..", "scripts", "bench-guest")).read()
fn = re.search(r"^williams\(\) \{.*?^\}$", src, re.S | re.M)
check(fn is not None, "bench-guest defines williams()")
for n in range(2, 8):
    cycle = 2 * n if n % 2 else n
    script = fn.group(0) + f"\nfor r in $(seq 1 {2 * cycle}); do williams {n} $r; done\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    rows = [list(map(int, line.split())) for line in out.splitlines()]
    check(len(rows) == 2 * cycle and all(sorted(r) == list(range(n)) for r in rows),
          f"{n} arms: every round runs each arm once")
    check(rows[:cycle] == rows[cycle:], f"{n} arms: the order repeats after {cycle} rounds")
    slot = collections.Counter((a, i) for r in rows[:cycle] for i, a in enumerate(r))
    after = collections.Counter(p for r in rows[:cycle] for p in zip(r, r[1:]))
    check(len(slot) == n * n and len(set(slot.values())) == 1,
          f"{n} arms: each arm in each slot equally often ({sorted(set(slot.values()))})")
    check(len(after) == n * (n - 1) and len(set(after.values())) == 1,
          f"{n} arms: each arm right after each other equally often ({sorted(set(after.values()))})")
finish()
