#!/usr/bin/env python3
"""Every `unsafe` block and `unsafe impl` in the module's Rust sources has
its `// SAFETY:` line right above it: on the line before, or the one
before that when the statement opens on the previous line. Longer
reasoning goes in ordinary comments above the SAFETY line.

With file arguments, checks those (the self-test gives it bad samples);
without, every .rs file under rust/ but the generated bindings.
"""
import glob
import os
import re
import sys

UNSAFE = re.compile(r"\bunsafe\s*(\{|impl\b)")


def misplaced(path):
    """(line, text) of each unsafe whose SAFETY line is not within 2 lines."""
    out = []
    with open(path) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        code = line.strip()
        if code.startswith("//") or not UNSAFE.search(code.split("//")[0]):
            continue
        above = [lines[j].strip() for j in range(max(0, i - 2), i)]
        if not any(a.startswith("// SAFETY:") for a in above):
            out.append((i + 1, code))
    return out


def main(argv):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    files = argv or sorted(
        f for f in glob.glob(os.path.join(root, "rust", "**", "*.rs"), recursive=True)
        if not f.endswith("_generated.rs") and "/target/" not in f)
    bad = 0
    for f in files:
        for n, code in misplaced(f):
            print(f"{os.path.relpath(f, root)}:{n}: no `// SAFETY:` line right above: {code}")
            bad += 1
    print(f"{len(files)} files, {bad} unsafe without its SAFETY line right above")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
