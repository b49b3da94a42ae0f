#!/usr/bin/env python3
"""Lists the module's Rust functions longer than a screen (host side, stdlib only).

Walks the kernel-side Rust sources under rust/ (the module crate and
rust/proto, which is compiled into it) and measures every function with a
body: lines from the one holding `fn` to the one holding its closing brace,
both included. Left out: generated bindings (rust/bindings), the host-only
parts of rust/proto (tests/, fuzz/, examples/, build.rs, target/) and
`#[cfg(test)]` modules. Comments, string and char literals are skipped by
the tokenizer, so braces in them do not count. A function nested in another
is measured on its own, and counts in its parent's lines too.

Prints each function over the limit (`path:line name lines`), longest first,
and exits 1 if there is any. `--selftest` checks the measuring on a
synthetic tree.
"""
import argparse, os, re, sys, tempfile

EXCLUDED_DIRS = {"target", "tests", "fuzz", "examples", "bindings"}
EXCLUDED_FILES = {"build.rs"}
LIMIT = 80
RAW_STR = re.compile(r'[bc]?r(#*)"')
IDENT = re.compile(r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*")
NUM = re.compile(r"[0-9A-Za-z_]+")


def tokenize(text):
    """(kind, value, line) tokens; comments dropped, literals opaque."""
    toks, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c.isspace():
            line += c == "\n"; i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i); i = n if j < 0 else j
        elif text.startswith("/*", i):                    # nested block comment
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i): depth += 1; i += 2
                elif text.startswith("*/", i): depth -= 1; i += 2
                else: line += text[i] == "\n"; i += 1
        elif (m := RAW_STR.match(text, i)):                # r"..", br#".."#
            end = '"' + m.group(1)
            j = text.find(end, m.end()); j = n if j < 0 else j
            toks.append(("str", "", line))
            line += text.count("\n", i, j); i = j + len(end)
        elif c == '"' or (c in "bc" and text.startswith('"', i + 1)):
            j = i + (1 if c == '"' else 2)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            toks.append(("str", "", line))
            line += text.count("\n", i, j); i = j + 1
        elif c == "'" or (c == "b" and text.startswith("'", i + 1)):
            k = i + (1 if c == "'" else 2)
            if text.startswith("\\", k):                   # '\n', '\'', '\u{..}'
                i = text.find("'", k + 2) + 1
                toks.append(("char", "", line))
            elif text.startswith("'", k + 1):              # 'x', '{'
                i = k + 2
                toks.append(("char", "", line))
            else:                                          # lifetime / label
                toks.append(("punct", "'", line)); i += 1
        elif (m := IDENT.match(text, i)):
            toks.append(("ident", m.group().removeprefix("r#"), line)); i = m.end()
        elif c.isdigit():
            m = NUM.match(text, i)
            toks.append(("num", m.group(), line)); i = m.end()
        else:
            toks.append(("punct", c, line)); i += 1
    return toks


def matching(toks, i):
    """Index of the bracket closing the one at `i`."""
    depth = 0
    for j in range(i, len(toks)):
        v = toks[j][1] if toks[j][0] == "punct" else ""
        if v in ("{", "(", "["): depth += 1
        elif v in ("}", ")", "]"):
            depth -= 1
            if depth == 0: return j
    return len(toks) - 1


def functions(text):
    """(name, first line, lines) of every function with a body in `text`."""
    toks = tokenize(text)
    val = lambda k: toks[k][1] if k < len(toks) else ""
    out, i = [], 0
    while i < len(toks):
        kind, v, line = toks[i]
        # `#[cfg(test)] mod x { .. }`: not part of the module.
        if v == "#" and [val(i + k) for k in range(1, 7)] == ["[", "cfg", "(", "test", ")", "]"]:
            j = i + 7
            while val(j) in ("pub", "(", "crate", "super", ")"): j += 1
            if val(j) == "mod" and val(j + 2) == "{":
                i = matching(toks, j + 2) + 1
                continue
        if kind == "ident" and v == "fn" and i + 1 < len(toks) and toks[i + 1][0] == "ident":
            # The body is the first `{` outside the signature's brackets
            # (a `;` first: a declaration without one).
            j, depth = i + 2, 0
            while j < len(toks):
                w = val(j) if toks[j][0] == "punct" else ""
                if w in ("(", "[", "<"):
                    depth += 1
                elif w in (")", "]") or (w == ">" and val(j - 1) != "-"):
                    depth -= 1
                elif w == ";" and depth <= 0:
                    break
                elif w == "{" and depth <= 0:
                    end = matching(toks, j)
                    out.append((toks[i + 1][1], line, toks[end][2] - line + 1))
                    break
                j += 1
        i += 1
    return out


def sources(root):
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs
                         if d not in EXCLUDED_DIRS and not d.startswith("."))
        for f in sorted(files):
            if f.endswith(".rs") and f not in EXCLUDED_FILES and not f.endswith("_generated.rs"):
                yield os.path.join(dirpath, f)


def long_functions(root, limit):
    """(lines, path, line, name) of each function over `limit`, longest first."""
    found = []
    for path in sources(root):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for name, line, n in functions(text):
            if n > limit:
                found.append((n, path, line, name))
    found.sort(key=lambda x: (-x[0], x[1], x[2]))
    return found


def selftest():
    """A function one line over the limit is found, and a method nested in
    an impl; one at the limit (with braces only in comments and literals),
    a declaration, a function pointer type, a test module's function and
    the excluded directories' are not."""
    body = lambda k: "".join(f"    let x{j} = {j};\n" for j in range(k))
    tree = {
        "main.rs": "mod m;\n"
                   # 1 + 79 + 1 = 81 lines: one too many.
                   f"fn too_long() {{\n{body(79)}}}\n"
                   # 80 lines, though a `{` in a comment, a string, a raw
                   # string and a char would make it look longer.
                   "fn at_limit<'a>(s: &'a str) -> impl Fn() -> u32 + 'a {\n"
                   "    // { not a brace\n    let _s = \"{ }}\";\n"
                   "    let _r = r#\"{ \"{\"#;\n    let _c = '{';\n"
                   f"{body(73)}    || 1\n}}\n"
                   "trait T { fn decl(&self) -> u32; }\n"
                   "type F = fn(u32) -> u32;\n"
                   f"#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body(90)}    }}\n}}\n",
        "m.rs": "pub(crate) struct S;\nimpl S {\n"
                f"    pub(crate) fn nested(&self) -> [u8; 2] {{\n{body(85)}        [0; 2]\n    }}\n}}\n",
        "bindings/mod.rs": f"fn generated() {{\n{body(200)}}}\n",
        "proto/tests/t.rs": f"fn host_test() {{\n{body(200)}}}\n",
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "rust")
        for path, text in tree.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        got = [(os.path.relpath(p, root), name, n) for n, p, _, name in long_functions(root, LIMIT)]
    want = [("m.rs", "nested", 88), ("main.rs", "too_long", 81)]
    assert got == want, f"selftest: got {got}, want {want}"
    print("selftest: ok")
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(here, "..", "..", "rust"))
    ap.add_argument("--limit", type=int, default=LIMIT, help="most lines a function may have")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        return selftest()
    root = os.path.normpath(args.root)
    found = long_functions(root, args.limit)
    for n, path, line, name in found:
        print(f"{os.path.relpath(path, os.path.dirname(root))}:{line} {name} {n} lines")
    print(f"{len(found)} function(s) over {args.limit} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
