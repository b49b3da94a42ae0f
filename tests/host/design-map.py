#!/usr/bin/env python3
"""Checks Documentation/design.rst's map from the C svcrdma to the Rust code.

Two checks (host side, stdlib only):

1. Every reference in design.rst names something that exists. A reference
   is an inline literal of one of these forms:

       ``rust/transport/recvfrom.rs``                     a file
       ``rust/transport/``                                a directory
       ``rust/transport/recvfrom.rs: recvfrom``           an item in it
       ``rust/transport/connection.rs: Connection::free`` a member of one
       ``rust/rdma/qp.rs: Qp::new, Qp::destroy``          several

   (also under include/, for the C shims). An item is defined in the file
   as a fn, struct, enum, union, trait, type, const, static, mod or
   macro_rules!. ``A::b`` is a fn, const or type in an ``impl`` block of A
   (``impl A``, ``impl Trait for A``) or in ``trait A``, a variant of
   ``enum A``, a field of ``struct A``, or an item of ``mod A``. Items of a
   C file are its functions, macros and struct/enum tags.

2. Every C svcrdma entry point and structure has a row of its own in one
   of design.rst's map tables (a ``list-table`` whose first cell names it
   as ``name``), and that row points somewhere: a reference, or the words
   "no counterpart". The entry points are computed from the C source
   (net/sunrpc/xprtrdma/svc_rdma*.c):

   - the functions of the C files that are not static (the exported
     svc_rdma_* and pcl_* functions; svc_rdma_init and svc_rdma_cleanup,
     the module's init and exit);
   - the functions the C files use as values rather than call: every
     operations table (svc_xprt_ops, the backchannel's rpc_xprt_ops and
     xprt_class), the completion handlers (``.done``), the CM, QP and
     device-removal handlers, the sysctl and xdr_buf actors;
   - the non-static objects (svc_rdma_class, xprt_rdma_bc);

   and the structures: every ``struct NAME {`` in include/linux/sunrpc/
   svc_rdma.h, svc_rdma_pcl.h and the C files.

The C source is looked for in --csrc DIR (the kernel tree), else in the
newest $SVCRDMA_CACHE/src/linux-*/ (scripts/build-kernel unpacks it there).
Without it, --no-c skips check 2 (and says so); otherwise its absence is an
error.

Exits 1 listing every dangling reference (with the files that define the
item now, if any: code that moved) and every unmapped C name.
--selftest proves on small fixtures, and on a copy of the real design.rst,
that dangling references, missing rows and rows pointing nowhere are caught.
"""
import argparse, glob, os, re, shutil, sys, tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DOC = "Documentation/design.rst"
C_FILES = "net/sunrpc/xprtrdma/svc_rdma*.c"
C_HEADERS = ("include/linux/sunrpc/svc_rdma.h", "include/linux/sunrpc/svc_rdma_pcl.h")

# ``path`` or ``path: item, item`` (path under rust/ or include/).
REF = re.compile(r"``((?:rust|include)/[\w./-]*)(?::\s*([^`]+))?``")
ITEM = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)?$")
RUST_KW = {"fn", "struct", "enum", "union", "trait", "type", "const", "static", "mod", "self",
           "Self", "mut", "ref", "dyn", "crate", "super", "impl", "unsafe", "extern", "pub", "_"}
# An item's keyword and name (not a lifetime 'static, not a path's head).
RUST_DEF = re.compile(r"(?<!')\b(fn|struct|enum|union|trait|type|const|static|mod)\s+(?:r#)?([A-Za-z_]\w*)\b(?!\s*::)")
C_KW = {"if", "for", "while", "switch", "return", "sizeof", "defined"}


# --- Rust ------------------------------------------------------------------

def strip_rust(text):
    """Comments and the contents of string and char literals blanked (to
    spaces, newlines kept), so that names in them count for nothing."""
    out, i, n = [], 0, len(text)
    raw = re.compile(r'[bc]?r(#*)"')
    char = re.compile(r"b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'")
    blank = lambda s: re.sub(r"[^\n]", " ", s)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j])); i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j): depth += 1; j += 2
                elif text.startswith("*/", j): depth -= 1; j += 2
                else: j += 1
            out.append(blank(text[i:j])); i = j
        elif (m := raw.match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + blank(text[i + 2:j])); i = j
        elif c == '"' or (c in "bc" and text.startswith('"', i + 1)
                          and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i + (1 if c == '"' else 2)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append('""' + blank(text[i + 2:j])); i = j
        elif c == "'" and (m := char.match(text, i)):
            out.append("' '" + blank(text[i + 3:m.end()])); i = m.end()
        else:
            out.append(c); i += 1
    return "".join(out)


def block_end(text, open_at):
    """Index just past the brace matching the '{' at open_at."""
    depth, i = 0, open_at
    while i < len(text):
        if text[i] == "{": depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0: return i + 1
        i += 1
    return len(text)


def skip_generics(s):
    """s without a leading balanced <...>."""
    s = s.lstrip()
    if not s.startswith("<"): return s
    depth = 0
    for i, c in enumerate(s):
        if c == "<": depth += 1
        elif c == ">" and s[i - 1] != "-":
            depth -= 1
            if depth == 0: return s[i + 1:]
    return ""


def type_name(s):
    """The last path segment of a type (``kernel::Module`` -> Module,
    ``XprtClass<O>`` -> XprtClass, ``&T`` -> T)."""
    s = s.strip().lstrip("&*").strip()
    s = re.sub(r"^(?:mut|const|dyn)\s+", "", s)
    m = re.match(r"[\w:]+", s)
    return m.group(0).split("::")[-1] if m else ""


def impl_self(header):
    """The self type of an ``impl`` header (the text between impl and {)."""
    h = skip_generics(header)
    h = re.split(r"\bwhere\b", h)[0]
    depth, cut = 0, None
    for m in re.finditer(r"[<>]|\bfor\b", h):
        t = m.group(0)
        if t == "<": depth += 1
        elif t == ">": depth -= 1
        elif depth == 0: cut = m.end()
    return type_name(h[cut:] if cut is not None else h)


def members(body):
    """Names a block defines at its own level and below: fns, consts,
    types, statics and macro-free items."""
    return set(m.group(2) for m in RUST_DEF.finditer(body)) - RUST_KW


def direct_lines(body):
    """The entries of a block's body at its own brace depth (enum variants,
    struct fields), nested brackets cut down to their opening one."""
    lines, depth, cur = [], 0, []
    for c in body:
        if c in "{([":
            if depth == 0: cur.append(c)
            depth += 1
        elif c in "})]":
            depth -= 1
            if depth == 0: cur.append(c)
        elif depth == 0:
            if c in ",\n":
                lines.append("".join(cur)); cur = []
            else:
                cur.append(c)
    lines.append("".join(cur))
    return lines


def rust_index(text):
    """(names defined anywhere in the file, {owner: names under it})."""
    s = strip_rust(text)
    names = set(m.group(2) for m in RUST_DEF.finditer(s)) - RUST_KW
    names |= set(re.findall(r"\bmacro_rules!\s*([A-Za-z_]\w*)", s))
    owners = {}
    add = lambda k, v: owners.setdefault(k, set()).update(v)
    for m in re.finditer(r"\bimpl\b", s):
        brace = s.find("{", m.end())
        semi = s.find(";", m.end())
        if brace < 0 or (0 <= semi < brace): continue
        name = impl_self(s[m.end():brace])
        if name: add(name, members(s[brace + 1:block_end(s, brace) - 1]))
    for m in re.finditer(r"\b(trait|mod)\s+([A-Za-z_]\w*)[^;{]*\{", s):
        brace = m.end() - 1
        add(m.group(2), members(s[brace + 1:block_end(s, brace) - 1]))
    for m in re.finditer(r"\b(enum|struct|union)\s+([A-Za-z_]\w*)[^;{(]*\{", s):
        brace = m.end() - 1
        body = s[brace + 1:block_end(s, brace) - 1]
        got = set()
        for line in direct_lines(body):
            line = re.sub(r"#\[[^\]]*\]", "", line).strip()
            line = re.sub(r"^pub(?:\([^)]*\))?\s+", "", line)
            v = re.match(r"([A-Za-z_]\w*)\s*(?:[:({=]|$)", line)
            if v and v.group(1) not in RUST_KW: got.add(v.group(1))
        add(m.group(2), got)
    return names, owners


# --- C ---------------------------------------------------------------------

def strip_c(text):
    """Comments and string/char contents blanked, newlines kept."""
    out, i, n = [], 0, len(text)
    blank = lambda s: re.sub(r"[^\n]", " ", s)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2); j = n if j < 0 else j + 2
            out.append(blank(text[i:j])); i = j
        elif text.startswith("//", i):
            j = text.find("\n", i); j = n if j < 0 else j
            out.append(blank(text[i:j])); i = j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(q + blank(text[i + 1:j - 1]) + q); i = j
        else:
            out.append(text[i]); i += 1
    return "".join(out)


def c_toplevel(s):
    """s with the insides of top-level braces and preprocessor lines
    blanked: what is left are declarations and definition heads."""
    out, depth = [], 0
    lines = s.split("\n")
    cont = False
    for li, line in enumerate(lines):
        if depth == 0 and (line.lstrip().startswith("#") or cont):
            cont = line.rstrip().endswith("\\")
            lines[li] = ""
    s = "\n".join(lines)
    for c in s:
        if c == "{":
            if depth == 0: out.append(c)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0: out.append(c)
        elif depth == 0 or c == "\n":
            out.append(c)
    return "".join(out)


def c_functions(text):
    """{name: (is_static, line)} of the functions a C file defines."""
    s = c_toplevel(strip_c(text))
    found = {}
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", s):
        name = m.group(1)
        if name in C_KW: continue
        close = s.find(")", m.end())
        # A definition: its parameter list is followed by its body.
        depth, j = 1, m.end()
        while j < len(s) and depth:
            if s[j] == "(": depth += 1
            elif s[j] == ")": depth -= 1
            j += 1
        rest = s[j:].lstrip()
        if not rest.startswith("{") or close < 0: continue
        # The declaration's head: back to the previous ; } or { at top level.
        start = max(s.rfind(";", 0, m.start()), s.rfind("}", 0, m.start()),
                    s.rfind("{", 0, m.start())) + 1
        head = s[start:m.start()]
        if "=" in head or not head.strip(): continue
        line = s.count("\n", 0, m.start()) + 1
        found[name] = (bool(re.search(r"\bstatic\b", head)), line)
    return found


def c_objects(text):
    """Non-static top-level objects initialized with = { (class tables)."""
    s = c_toplevel(strip_c(text))
    out = {}
    for m in re.finditer(r"(?m)^(?!static\b)(?:const\s+)?struct\s+\w+\s+([A-Za-z_]\w*)\s*=\s*\{", s):
        out[m.group(1)] = s.count("\n", 0, m.start()) + 1
    return out


def c_structs(text):
    return {m.group(1): text.count("\n", 0, m.start()) + 1
            for m in re.finditer(r"(?m)^struct\s+([A-Za-z_]\w*)\s*\{", strip_c(text))}


def c_items(text):
    """Names a C source or header defines (for references into include/)."""
    s = strip_c(text)
    names = set(c_functions(text))
    names |= set(re.findall(r"(?m)^[ \t]*#\s*define\s+([A-Za-z_]\w*)", s))
    names |= set(re.findall(r"\b(?:struct|enum|union)\s+([A-Za-z_]\w*)\s*\{", s))
    names |= set(re.findall(r"(?m)^[A-Za-z_][^;(]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*;", s))
    return names


def c_entry_points(csrc):
    """(entry points {name: where}, structures {name: where}, every
    function {name: where}) of the C svcrdma under the kernel tree csrc."""
    files = sorted(glob.glob(os.path.join(csrc, C_FILES)))
    if not files:
        raise FileNotFoundError(os.path.join(csrc, C_FILES))
    texts = {f: open(f, encoding="utf-8", errors="replace").read() for f in files}
    rel = lambda f: os.path.relpath(f, csrc)
    funcs = {}
    for f, t in texts.items():
        for name, (static, line) in c_functions(t).items():
            funcs.setdefault(name, (static, "%s:%d" % (rel(f), line)))
    entry = {n: w for n, (static, w) in funcs.items() if not static}
    # Used as a value: named, not called, outside its own definition line.
    for f, t in texts.items():
        s = strip_c(t)
        for m in re.finditer(r"\b([A-Za-z_]\w*)\b(?!\s*\()", s):
            n = m.group(1)
            if n in funcs and n not in entry:
                entry[n] = funcs[n][1]
        for n, line in c_objects(t).items():
            entry[n] = "%s:%d" % (rel(f), line)
    structs = {}
    for f in list(files) + [os.path.join(csrc, h) for h in C_HEADERS]:
        if not os.path.exists(f): continue
        t = texts.get(f) or open(f, encoding="utf-8", errors="replace").read()
        for n, line in c_structs(t).items():
            structs.setdefault(n, "%s:%d" % (rel(f), line))
    return entry, structs, {n: w for n, (s, w) in funcs.items()}


def find_csrc(explicit):
    if explicit: return explicit
    cache = os.environ.get("SVCRDMA_CACHE", "/var/cache/svcrdma-rs")
    trees = [d for d in glob.glob(os.path.join(cache, "src", "linux-*"))
             if os.path.isdir(os.path.join(d, "net/sunrpc/xprtrdma"))]
    def key(d):
        return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", d)]
    return sorted(trees, key=key)[-1] if trees else None


# --- design.rst ------------------------------------------------------------

def refs_of(doc_text):
    """[(line, path, [items])] of every reference in the document."""
    out = []
    for m in REF.finditer(doc_text):
        line = doc_text.count("\n", 0, m.start()) + 1
        items = [i.strip() for i in (m.group(2) or "").split(",") if i.strip()]
        out.append((line, m.group(1), items))
    return out


def map_rows(doc_text):
    """[(line, first cell, rest of the row)] of every list-table row."""
    rows, lines = [], doc_text.split("\n")
    in_table, star_indent, cur = False, None, None
    for i, line in enumerate(lines, 1):
        if line.strip().startswith(".. list-table::"):
            in_table, star_indent = True, None
            continue
        if in_table and line.strip() and not line.startswith(" "):
            in_table = False
        if not in_table: continue
        m = re.match(r"^(\s*)\* - (.*)$", line)
        if m:
            if cur: rows.append(cur)
            star_indent = len(m.group(1))
            cur = [i, [m.group(2)], []]
            continue
        if cur is None: continue
        m = re.match(r"^(\s*)- (.*)$", line)
        if m and len(m.group(1)) == star_indent + 2:
            cur[2].append(m.group(2))
        elif cur[2]:
            cur[2][-1] += " " + line.strip()
        else:
            cur[1][0] += " " + line.strip()
    if cur: rows.append(cur)
    return [(l, first[0], " ".join(rest)) for l, first, rest in rows]


def index_of(root, cache, path):
    """The (names, owners) index of a file, cached."""
    if path not in cache:
        text = open(os.path.join(root, path), encoding="utf-8").read()
        cache[path] = rust_index(text) if path.endswith(".rs") else (c_items(text), {})
    return cache[path]


def defines(index, item):
    names, owners = index
    if "::" in item:
        owner, member = item.split("::")
        return member in owners.get(owner, ())
    return item in names


def elsewhere(root, cache, item, skip):
    """Files under rust/ and include/ that define item (a hint for moves)."""
    found = []
    for top in ("rust", "include"):
        for d, subdirs, fs in os.walk(os.path.join(root, top)):
            subdirs[:] = sorted(s for s in subdirs if s not in ("target", "fuzz", "tests", "examples"))
            for f in sorted(fs):
                if not f.endswith((".rs", ".c", ".h")): continue
                path = os.path.relpath(os.path.join(d, f), root)
                if path != skip and defines(index_of(root, cache, path), item):
                    found.append(path)
    return " (defined in %s)" % ", ".join(found[:4]) if found else ""


def check(root, doc_path, csrc, out=sys.stdout):
    """Runs both checks; returns the list of problems (empty: all good)."""
    doc_text = open(doc_path, encoding="utf-8").read()
    shown = os.path.relpath(doc_path, root) if doc_path.startswith(root) else doc_path
    problems, cache = [], {}
    nrefs, nitems, files = 0, 0, set()
    for line, path, items in refs_of(doc_text):
        nrefs += 1
        full = os.path.join(root, path)
        where = "%s:%d: ``%s%s``" % (shown, line, path, (": " + ", ".join(items)) if items else "")
        if path.endswith("/"):
            if not os.path.isdir(full): problems.append("%s: no such directory" % where)
            continue
        if not os.path.isfile(full):
            hints = "".join("; %s%s" % (i, elsewhere(root, cache, i, path)) for i in items if ITEM.match(i))
            problems.append("%s: no such file%s" % (where, hints))
            continue
        files.add(path)
        index = index_of(root, cache, path)
        for item in items:
            nitems += 1
            if not ITEM.match(item):
                problems.append("%s: '%s' is not an item name (Name or Type::member)" % (where, item))
            elif not defines(index, item):
                problems.append("%s: %s is not defined in %s%s"
                                % (where, item, path, elsewhere(root, cache, item, path)))
    print("design-map: %d references, %d items in %d files" % (nrefs, nitems, len(files)), file=out)
    if csrc is None:
        print("design-map: C svcrdma source not found: its coverage is NOT checked", file=out)
        return problems
    entry, structs, funcs = c_entry_points(csrc)
    rows = map_rows(doc_text)
    named = {}
    for line, first, rest in rows:
        for n in re.findall(r"``([A-Za-z_]\w*)``", first):
            named.setdefault(n, []).append((line, rest))
    for kind, table in (("entry point", entry), ("structure", structs)):
        for n in sorted(table):
            if n not in named:
                problems.append("C %s %s (%s) has no row in the map of %s" % (kind, n, table[n], shown))
            elif not any(REF.search(rest) or "no counterpart" in rest for _, rest in named[n]):
                problems.append("%s:%d: the row of C %s %s points nowhere (no reference, no \"no counterpart\")"
                                % (shown, named[n][0][0], kind, n))
    others = [n for n in funcs if n not in entry]
    mapped = sum(1 for n in others if n in named)
    print("design-map: C %s: %d entry points and %d structures need a row; "
          "%d of its %d other (static) functions have rows too"
          % (os.path.basename(os.path.normpath(csrc)), len(entry), len(structs), mapped, len(others)),
          file=out)
    return problems


def report(problems):
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print("design-map: %d problem(s)" % len(problems), file=sys.stderr)
        return 1
    print("design-map: every reference resolves")
    return 0


# --- self-test ---------------------------------------------------------------

FIXTURE_RS = r'''
//! fn in_a_comment() {}
pub(crate) struct Conn { pub(crate) ready: u32, id: u64 }
enum Work { ReadsDone(u32), Received { slot: u16 }, Idle }
trait Ops { fn recvfrom(&self); const N: u32; }
impl<T: Clone> kernel::Module for Conn where T: Copy {
    fn init() {}
}
impl Conn {
    pub(crate) fn free(self) { let _s = "fn not_an_item() {}"; let _c = '{'; }
}
mod pending {
    pub(crate) struct Pending;
    impl super::Ops for Pending { fn recvfrom(&self) {} const N: u32 = 1; }
}
macro_rules! impl_thing { () => {} }
fn plain<'a>(x: &'a u8) -> &'a u8 { x }
'''

FIXTURE_C = r'''
static int helper(int x);
static struct thing_ops the_ops = {
	.op_one = entry_static_cb,
	.op_two = helper,
};
struct thing_class thing_class = {
	.name = "x",
};
struct svc_rdma_thing {
	int a;
};
/* static void in_a_comment(void) { } */
static int helper(int x)
{
	if (x)
		return 1;
	return 0;
}
static void entry_static_cb(struct ib_cq *cq,
			    struct ib_wc *wc)
{
	wc->wr_cqe->done = done_handler;
}
static void done_handler(struct ib_cq *cq, struct ib_wc *wc)
{
}
static noinline int
private_helper(void)
{
	return helper(2);
}
int svc_rdma_exported(void)
{
	return private_helper();
}
'''

FIXTURE_DOC = '''
Refs: ``rust/x/a.rs: Conn::free, Conn::init, Conn::ready, Work::Received``
``rust/x/a.rs: Ops::recvfrom, Pending::recvfrom, pending::Pending, impl_thing, plain``
``rust/x/a.rs: Work::Idle, Ops::N``
``rust/x/``

.. list-table::
   :header-rows: 1

   * - C
     - Rust
   * - ``svc_rdma_exported``
     - ``rust/x/a.rs: plain``
   * - ``entry_static_cb``, ``done_handler``
     - ``rust/x/a.rs: Conn::free``
   * - ``helper``
     - no counterpart: inlined
   * - ``thing_class``
     - ``rust/x/a.rs: Conn``
   * - ``svc_rdma_thing``
     - ``rust/x/a.rs: Work``
'''

BAD_DOC_ADDITIONS = '''
``rust/x/a.rs: in_a_comment``
``rust/x/a.rs: not_an_item``
``rust/x/a.rs: Conn::recvfrom``
``rust/x/a.rs: Work::Busy``
``rust/x/missing.rs: plain``
``rust/y/``
``rust/x/a.rs: moved``
'''


def selftest():
    failures = []

    def expect(cond, what):
        if not cond: failures.append(what)

    tmp = tempfile.mkdtemp(prefix="design-map-")
    try:
        os.makedirs(os.path.join(tmp, "rust/x"))
        os.makedirs(os.path.join(tmp, "csrc/net/sunrpc/xprtrdma"))
        os.makedirs(os.path.join(tmp, "Documentation"))
        open(os.path.join(tmp, "rust/x/a.rs"), "w").write(FIXTURE_RS)
        open(os.path.join(tmp, "rust/x/b.rs"), "w").write("pub(crate) fn moved() {}\n")
        open(os.path.join(tmp, "csrc/net/sunrpc/xprtrdma/svc_rdma_x.c"), "w").write(FIXTURE_C)
        csrc = os.path.join(tmp, "csrc")
        entry, structs, funcs = c_entry_points(csrc)
        expect(set(entry) == {"svc_rdma_exported", "entry_static_cb", "done_handler",
                              "helper", "thing_class"},
               "C entry points of the fixture: %s" % sorted(entry))
        expect(set(structs) == {"svc_rdma_thing"}, "C structures of the fixture: %s" % sorted(structs))
        expect("private_helper" in funcs and "in_a_comment" not in funcs,
               "C functions of the fixture: %s" % sorted(funcs))
        doc = os.path.join(tmp, DOC)
        null = open(os.devnull, "w")
        open(doc, "w").write(FIXTURE_DOC)
        p = check(tmp, doc, csrc, out=null)
        expect(p == [], "the good fixture document fails: %s" % p)
        open(doc, "w").write(FIXTURE_DOC + BAD_DOC_ADDITIONS)
        p = check(tmp, doc, csrc, out=null)
        for bad in ("in_a_comment is not defined", "not_an_item is not defined",
                    "Conn::recvfrom is not defined", "Work::Busy is not defined",
                    "rust/x/missing.rs: plain``: no such file; plain (defined in rust/x/a.rs)",
                    "rust/y/``: no such directory",
                    "moved is not defined in rust/x/a.rs (defined in rust/x/b.rs)"):
            expect(any(bad in x for x in p), "not caught: %s" % bad)
        expect(len(p) == 7, "7 problems expected, got %d: %s" % (len(p), p))
        # A missing row and a row that points nowhere.
        open(doc, "w").write(FIXTURE_DOC.replace("``helper``", "``helper_gone``")
                             .replace("- ``rust/x/a.rs: Work``", "- (to do)"))
        p = check(tmp, doc, csrc, out=null)
        expect(any("entry point helper " in x and "has no row" in x for x in p),
               "a C entry point without a row is not caught: %s" % p)
        expect(any("svc_rdma_thing points nowhere" in x for x in p),
               "a row pointing nowhere is not caught: %s" % p)
        # The real document, one reference made dangling and one row dropped.
        real = os.path.join(ROOT, DOC)
        text = open(real, encoding="utf-8").read()
        m = re.search(r"``(rust/[\w./-]+\.rs): ([A-Za-z_]\w*(?:::\w+)?)", text)
        expect(m is not None, "no reference with an item in %s" % DOC)
        if m:
            bad = text.replace(m.group(0), "``%s: %s_gone" % (m.group(1), m.group(2)), 1)
            open(doc, "w").write(bad)
            p = check(ROOT, doc, None, out=null)
            expect(any("%s_gone is not defined" % m.group(2) in x for x in p),
                   "a dangling reference in the real document is not caught: %s" % p)
            print("design-map selftest: a dangling reference is reported as:\n  %s"
                  % "\n  ".join(p))
        real_csrc = find_csrc(None)
        if real_csrc and "* - ``svc_rdma_recvfrom``" in text:
            open(doc, "w").write(text.replace("* - ``svc_rdma_recvfrom``", "* - ``svc_rdma_recvfrom_gone``"))
            p = check(ROOT, doc, real_csrc, out=null)
            expect(any("entry point svc_rdma_recvfrom " in x for x in p),
                   "dropping the real row of svc_rdma_recvfrom is not caught: %s" % p)
            print("design-map selftest: a C entry point without a row is reported as:\n  %s"
                  % "\n  ".join(x for x in p if "svc_rdma_recvfrom" in x))
    finally:
        shutil.rmtree(tmp)
    for f in failures:
        print("design-map selftest: FAILED: " + f, file=sys.stderr)
    if failures:
        return 1
    print("design-map selftest: passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--doc", default=os.path.join(ROOT, DOC))
    ap.add_argument("--csrc", help="kernel tree with net/sunrpc/xprtrdma (default: the newest in $SVCRDMA_CACHE/src)")
    ap.add_argument("--no-c", action="store_true", help="skip the C coverage check if the C source is absent")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.selftest:
        return selftest()
    csrc = find_csrc(a.csrc)
    if csrc is None and not a.no_c:
        print("design-map: no C svcrdma source (give --csrc, run scripts/build-kernel, or pass --no-c)",
              file=sys.stderr)
        return 1
    return report(check(ROOT, a.doc, csrc))


if __name__ == "__main__":
    sys.exit(main())
