#!/usr/bin/env python3
"""check-naming.py — one way to name things in Sources/CRunLoop.

THE RULE (docs/architecture.md says it in short at its top):

  Functions and globals
    1. A name that lives inside one file is `static` and plain: no `rl_`,
       no `rl__` prefix (`static void merge_keys(...)`, `static int count`).
    2. A name that another file calls or reads is `rl__name`, not static,
       and declared in a private header (any `*.h`) of the ROOM (folder of
       Sources/CRunLoop) whose `.c` file defines it — not in a `.c` file, not
       in another room's header.
    3. A `static inline` function defined in a private header is shared by
       every file that includes the header: it is `rl__name` as well.
    4. Public API (a name declared in include/crunloop/*.h) is exempt.
    5. So an `rl__` name that is defined in one file and used by no other
       file (library, tests, fuzz targets, benches, examples) breaks rule 1:
       it should be static and plain (and if even its own file does not use
       it, it should go).
    6. base/internal.h holds base things only: it declares no function or
       global defined outside base/.

  Types (typedef names and struct/union/enum tags), the same rule:
    7. A type defined in a `.c` file and named in no other file is plain
       (`typedef struct okey okey;`); one that a header names too (a
       forward declaration) is shared, as in rule 8;
       the struct that completes a public opaque type keeps its public name
       (`struct RLRunLoopSource`): any name a public header writes is exempt.
    8. A type defined in a private header is shared: `rl__name`
       (`rl__mode`, `rl__object`), as libuv's `uv__io_t`.
    Macros and enumerators are not checked (they have no linkage and are
    SCREAMING_CASE by habit).

Parsing: a C tokenizer (comments, literals and preprocessor lines blanked)
and a file-scope parser of its own (brace depth 0: function definitions,
prototypes, globals, typedefs, struct/union/enum tags; both branches of an
#if are read, block parameters `(^name)` too, which ctags misreads). Uses
are counted as words in the library, Tests/, bench/, examples/ and
Sources/CSwiftThreadsShims (tests link the static library and call rl__
hooks); a word after `.` or `->` is a member, not a use of a global.

Exit 0 and one PASS line when the tree follows the rule; exit 1 and the
list of violations otherwise (file:line: [rule] name: what to do).
scripts/fix-naming.py fixes what is mechanical.

    scripts/check-naming.py [--root DIR] [--quiet] [--json]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

CORE = "Sources/CRunLoop"
PUBLIC = "include/crunloop"
# Where outside users of private names live (tests link the static library).
USER_DIRS = ["Tests", "bench", "examples", "Sources/CSwiftThreadsShims"]
C_EXT = (".c", ".h")

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def blank_comments_and_literals(text):
    """The text with comments, string and char literals replaced by spaces
    (newlines kept, so offsets and line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + (text[j - 1] if j - 1 > i else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_prefixed(name):
    return name.startswith("rl_")


def plain_of(name):
    """The name without its rl_/rl__ prefix."""
    return re.sub(r"^rl__?", "", name)


class Source:
    def __init__(self, root, path, text=None):
        self.path = path
        if text is None:
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                text = f.read()
        self.text = text
        self.code = blank_comments_and_literals(self.text)
        self.line_starts = [0] + [m.end() for m in re.finditer(r"\n", self.text)]
        self.tokens = collections.Counter(IDENT.findall(self.code))

    def line_of(self, offset):
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def token_lines(self, name):
        return [self.line_of(m.start()) for m in re.finditer(r"\b%s\b" % re.escape(name), self.code)]


def room_of(path):
    """The room (folder under Sources/CRunLoop) of a library file, or None."""
    parts = path.split("/")
    if path.startswith(CORE + "/") and len(parts) == 4:
        return parts[2]
    return None


def list_files(root, top, exts):
    found = []
    base = os.path.join(root, top)
    for d, dirs, files in os.walk(base):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x not in ("build", "corpus"))
        for f in sorted(files):
            if f.endswith(exts):
                found.append(os.path.relpath(os.path.join(d, f), root))
    return found


KEYWORDS = set("""auto break case char const continue default do double else enum extern float for goto
if inline int long register restrict return short signed sizeof static struct switch typedef union unsigned
void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert
_Thread_local __attribute__ __thread __typeof__ typeof __extension__ __restrict __inline asm __asm__""".split())


class Entity:
    """One top-level name: a function, prototype, variable, extern variable
    or type, as written at file scope (brace depth 0) in one file."""
    __slots__ = ("name", "path", "kind", "line", "static", "start", "end", "name_at")

    def __init__(self, name, path, kind, line, static, start, end, name_at):
        self.name, self.path, self.kind, self.line = name, path, kind, line
        self.static, self.start, self.end, self.name_at = static, start, end, name_at

    def where(self):
        return "%s:%d" % (self.path, self.line)


def blank_preprocessor(code):
    """Preprocessor lines (with their continuations) blanked out."""
    out = []
    cont = False
    for line in code.split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            out.append(" " * len(line))
        else:
            out.append(line)
    return "\n".join(out)


def match_close(code, i):
    """Offset after the bracket that closes code[i] (one of ([{)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c in pairs:
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def top_groups(text):
    """The top-level items of a declaration: ('id', name, at), ('(', at, end),
    ('[', at, end), ('{', at, end), ('=', at), (',', at), ('*', at)."""
    items = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "([{":
            j = match_close(text, i)
            items.append((c, i, j))
            i = j
        elif c.isalpha() or c == "_":
            m = IDENT.match(text, i)
            items.append(("id", m.group(0), i))
            i = m.end()
        elif c in "=,*;:":
            items.append((c, i))
            i += 1
        else:
            i += 1
    return items


def strip_attributes(items):
    """Items without __attribute__((...)) and asm(...) groups."""
    out = []
    skip = False
    for it in items:
        if skip:
            skip = False
            if it[0] == "(":
                continue
        if it[0] == "id" and it[1] in ("__attribute__", "__asm__", "asm", "_Alignas", "__aligned__"):
            skip = True
            continue
        out.append(it)
    return out


def declarator_names(text, base):
    """(name, offset) of each declarator of a declaration without its
    specifiers' bodies: `static int a = 1, *b[2]` -> a, b; `int f(void)` -> f
    with is_function; `int (*fp)(void)` -> fp as a variable."""
    items = strip_attributes(top_groups(text))
    # split on top-level commas
    decls, cur = [], []
    for it in items:
        if it[0] == ",":
            decls.append(cur)
            cur = []
        else:
            cur.append(it)
    decls.append(cur)
    found = []
    for k, d in enumerate(decls):
        # cut the initializer
        for j, it in enumerate(d):
            if it[0] == "=":
                d = d[:j]
                break
        while d and d[-1][0] == "[":
            d = d[:-1]
        if not d:
            continue
        is_fn = False
        if d[-1][0] == "(" and len(d) >= 2:
            prev = d[-2]
            if prev[0] == "(":
                # (*name)(args): a pointer to a function, a variable
                inner = text[prev[1] + 1:prev[2] - 1]
                ids = [m for m in IDENT.finditer(inner) if m.group(0) not in KEYWORDS]
                if ids:
                    found.append((ids[-1].group(0), base + prev[1] + 1 + ids[-1].start(), False))
                continue
            if prev[0] == "id" and prev[1] not in KEYWORDS:
                found.append((prev[1], base + prev[2], True))
                continue
        ids = [it for it in d if it[0] == "id" and it[1] not in KEYWORDS]
        if d[-1][0] == "id" and ids:
            found.append((ids[-1][1], base + ids[-1][2], False))
        elif d[-1][0] == "(" and ids:
            # int (*name); or similar
            inner = text[d[-1][1] + 1:d[-1][2] - 1]
            m = [x for x in IDENT.finditer(inner) if x.group(0) not in KEYWORDS]
            if m:
                found.append((m[-1].group(0), base + d[-1][1] + 1 + m[-1].start(), False))
    return found


def parse_entities(src):
    """Every top-level entity of one file (see Entity)."""
    code = blank_preprocessor(src.code)
    ents = []
    n = len(code)
    i = 0
    start = 0

    def add(name, kind, static, at, s, e):
        ents.append(Entity(name, src.path, kind, src.line_of(at), static, s, e, at))

    def type_bodies(s, e):
        # struct/union/enum TAG { ... } inside [s, e)
        for m in re.finditer(r"\b(struct|union|enum)\s+([A-Za-z_]\w*)\s*\{", code[s:e]):
            add(m.group(2), m.group(1), False, s + m.start(2), s, e)

    while i < n:
        c = code[i]
        if c == "{":
            head = code[start:i]
            if head.rstrip().endswith(")"):
                # a function definition
                j = match_close(code, i)
                names = declarator_names(head, start)
                toks = set(IDENT.findall(head))
                if names and names[-1][2]:
                    add(names[-1][0], "function", "static" in toks, names[-1][1], start, j)
                i = j
                start = i
                continue
            j = match_close(code, i)
            i = j
            continue
        if c in "([":
            i = match_close(code, i)
            continue
        if c == ";":
            text = code[start:i]
            toks = IDENT.findall(text)
            type_bodies(start, i + 1)
            if toks:
                static = "static" in toks
                if toks[0] == "typedef" or "typedef" in toks[:3]:
                    for name, at, _ in declarator_names(text, start):
                        add(name, "typedef", False, at, start, i + 1)
                elif toks[0] in ("_Static_assert", "static_assert"):
                    pass
                else:
                    # text without struct bodies: a declaration's declarators
                    flat = re.sub(r"\{[^{}]*\}", lambda m: " " * len(m.group(0)), text)
                    while re.search(r"\{[^{}]*\}", flat):
                        flat = re.sub(r"\{[^{}]*\}", lambda m: " " * len(m.group(0)), flat)
                    only_type = re.fullmatch(r"\s*(struct|union|enum)\s+\w+\s*", flat)
                    if not only_type:
                        for name, at, is_fn in declarator_names(flat, start):
                            if is_fn:
                                kind = "prototype"
                            elif "extern" in toks:
                                kind = "externvar"
                            else:
                                kind = "variable"
                            add(name, kind, static, at, start, i + 1)
            i += 1
            start = i
            continue
        if c == "}":
            i += 1
            start = i
            continue
        i += 1
    return ents


VALUE_KINDS = ("function", "variable")
DECL_KINDS = ("prototype", "externvar")
TYPE_KINDS = ("typedef", "struct", "union", "enum")


class Model:
    """Everything the checker and the fixer need to know about names."""

    def __init__(self, root):
        self.root = root
        self.core_files = [p for p in list_files(root, CORE, C_EXT) if room_of(p)]
        self.public_files = list_files(root, PUBLIC, (".h",))
        self.user_files = []
        for d in USER_DIRS:
            if os.path.isdir(os.path.join(root, d)):
                self.user_files += list_files(root, d, C_EXT)
        self.sources = {p: Source(root, p) for p in self.core_files + self.public_files + self.user_files}
        # Any name a public header writes is public (functions, types,
        # opaque struct tags, constants).
        self.public_names = set()
        for p in self.public_files:
            self.public_names |= set(self.sources[p].tokens)
        self.tags = []
        self.entities = {}
        for p in self.core_files:
            self.entities[p] = parse_entities(self.sources[p])
            self.tags += self.entities[p]
        self.defs = collections.defaultdict(list)     # name -> [Tag] (function/variable)
        self.decls = collections.defaultdict(list)    # name -> [Tag] (prototype/externvar)
        self.types = collections.defaultdict(list)    # name -> [Tag]
        for t in self.tags:
            if t.kind in VALUE_KINDS:
                self.defs[t.name].append(t)
            elif t.kind in DECL_KINDS:
                self.decls[t.name].append(t)
            elif t.kind in TYPE_KINDS:
                self.types[t.name].append(t)
        # Every identifier of the library and its users: name -> files.
        self.users_of = collections.defaultdict(set)
        for p, s in self.sources.items():
            for name in s.tokens:
                self.users_of[name].add(p)

    # -- uses ---------------------------------------------------------
    def decl_count(self, name, path):
        return sum(1 for d in self.decls.get(name, []) if d.path == path)

    def using_files(self, name, exclude=()):
        """Files that USE name (a declaration alone is no use)."""
        used = set()
        for p in self.users_of.get(name, ()):
            if p in exclude:
                continue
            n = self.sources[p].tokens[name] - self.decl_count(name, p)
            if n > 0:
                used.add(p)
        return used

    def names_in(self, path):
        return set(self.sources[path].tokens)

    # -- violations ---------------------------------------------------
    def violations(self):
        v = []

        def add(tag, rule, msg, **extra):
            d = {"file": tag.path, "line": tag.line, "name": tag.name, "rule": rule, "message": msg}
            d.update(extra)
            v.append(d)

        for name, defs in sorted(self.defs.items()):
            if name in self.public_names:
                continue
            for t in defs:
                what = "function" if t.kind == "function" else "global"
                header = t.path.endswith(".h")
                if header:
                    if not t.static:
                        add(t, "header-def", "%s %s defined non-static in a header" % (what, name))
                    elif not name.startswith("rl__"):
                        add(t, "inline-name", "static %s %s in a header is shared by its includers: "
                            "name it rl__%s" % (what, name, plain_of(name)), fix="rename-shared",
                            new="rl__" + plain_of(name))
                    continue
                if t.static:
                    if is_prefixed(name):
                        add(t, "static-plain", "static %s %s: a file's own name is plain (%s)"
                            % (what, name, plain_of(name)), fix="strip", new=plain_of(name))
                    continue
                others = self.using_files(name, exclude={t.path})
                own = self.sources[t.path].tokens[name] - self.decl_count(name, t.path) - 1
                if not others and own <= 0:
                    add(t, "unused", "%s %s is used nowhere: delete it" % (what, name))
                elif not others:
                    add(t, "file-only", "%s %s is used in %s only: make it static, named %s"
                        % (what, name, os.path.basename(t.path), plain_of(name)),
                        fix="make-static", new=plain_of(name))
                elif not name.startswith("rl__"):
                    add(t, "shared-name", "%s %s is used by other files (%s): name it rl__%s"
                        % (what, name, ", ".join(sorted(others)[:3]) + (" ..." if len(others) > 3 else ""),
                           plain_of(name)), fix="rename-shared", new="rl__" + plain_of(name))
        # Declarations: in a header of the defining room.
        for name, decls in sorted(self.decls.items()):
            defs = [t for t in self.defs.get(name, []) if not t.static and t.path.endswith(".c")]
            if name in self.public_names or not defs:
                continue
            room = room_of(defs[0].path)
            for d in decls:
                if d.static:
                    continue
                if room_of(d.path) == room and d.path.endswith(".h"):
                    continue
                if d.path == CORE + "/base/internal.h":
                    add(d, "internal-h", "base/internal.h declares %s, defined in %s (room %s): "
                        "declare it in a header of %s/" % (name, defs[0].path, room, room),
                        fix="move-decl", room=room)
                else:
                    add(d, "decl-room", "%s is defined in %s but declared in %s: declare it in a "
                        "header of %s/" % (name, defs[0].path, d.path, room), fix="move-decl", room=room)
        # Types.
        for name, tags in sorted(self.types.items()):
            if name in self.public_names:
                continue
            for t in tags:
                tag = re.compile(r"\b(struct|union|enum)\s+%s\b" % re.escape(name))
                shared_by = {p for p in self.users_of.get(name, ()) if p != t.path
                             and (is_prefixed(name) or tag.search(self.sources[p].code))}
                if t.path.endswith(".c") and shared_by and not name.startswith("rl__"):
                    add(t, "type-shared", "%s %s is named in %s too, so shared: name it rl__%s"
                        % (t.kind, name, sorted(shared_by)[0], plain_of(name)),
                        fix="rename-shared", new="rl__" + plain_of(name))
                elif t.path.endswith(".c") and not shared_by:
                    if is_prefixed(name):
                        add(t, "type-plain", "%s %s is defined in a .c file: a file's own type is plain (%s)"
                            % (t.kind, name, plain_of(name)), fix="strip", new=plain_of(name))
                elif not name.startswith("rl__"):
                    add(t, "type-shared", "%s %s is defined in a header, so shared: name it rl__%s"
                        % (t.kind, name, plain_of(name)), fix="rename-shared", new="rl__" + plain_of(name))
        v.sort(key=lambda d: (d["file"], d["line"], d["name"]))
        return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--json", action="store_true", help="the violations as JSON")
    ap.add_argument("--quiet", action="store_true", help="the summary line only")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    m = Model(root)
    v = m.violations()
    if args.json:
        json.dump(v, sys.stdout, indent=1)
        print()
    elif v:
        if not args.quiet:
            for d in v:
                print("%s:%d: [%s] %s" % (d["file"], d["line"], d["rule"], d["message"]))
        byrule = collections.Counter(d["rule"] for d in v)
        print("[naming] FAIL %d names break the naming rule (%s); scripts/fix-naming.py fixes the "
              "mechanical ones, the rule is in scripts/check-naming.py's header"
              % (len(v), ", ".join("%s %d" % kv for kv in sorted(byrule.items()))))
    else:
        print("[naming] PASS %d files of %s follow the naming rule" % (len(m.core_files), CORE))
    return 1 if v else 0


if __name__ == "__main__":
    sys.exit(main())
