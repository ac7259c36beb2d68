#!/usr/bin/env python3
"""fix-naming.py — makes Sources/CRunLoop follow the naming rule of
scripts/check-naming.py (its header states the rule) where that is
mechanical, and names what it left for a person.

What it does, in rounds until nothing more changes:
  shared   a name other files use gets its shared prefix, everywhere it is
           written (library, Tests/, bench/, examples/, docs): a function or
           global `rl_x`/`x` -> `rl__x`, a `static inline` of a header ->
           `rl__x`, a type of a header `rl_x`/`x` -> `rl__x`;
  static   a non-static `rl__x` that only its own file uses becomes
           `static` and plain (`x`): its declarations leave the headers (the
           comment above one moves to the definition if that has none) and a
           `static` prototype is put before the first use if the use comes
           before the definition;
  strip    a static function or global, or a type defined in a .c file,
           loses its `rl_`/`rl__` prefix (in that file, and in docs/ and
           README.md when no other file has the word);
  move     an `rl__` declaration outside the headers of the room that
           defines it (base/internal.h declaring a function of loop/, a
           test hook declared in its .c file) moves, with the comment right
           above it, into the room's header: the one named after the
           defining file, else the one that declares most of that file's
           other rl__ names; files that got the declaration through the old
           place and do not include the new header get an #include.

A new name is taken only when no file that could see it already uses it
(the file's own words, what its includes declare as `$CC -E -dD` shows,
keywords and names with a leading underscore): otherwise the name is left
as it is and reported. Occurrences after `.` or `->` (struct members) are
never renamed. Running it again changes nothing (the rounds stop when a
round changes no file).

    scripts/fix-naming.py [--root DIR] [--dry-run] [--cc clang]
Exit 0 when check-naming passes afterwards, 1 when something is left (the
list is printed).
"""
import argparse
import collections
import importlib.util
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # no scripts/__pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("check_naming", os.path.join(HERE, "check-naming.py"))
cn = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cn)

RENAMES = os.path.join(HERE, "naming-renames.txt")
TEXT_DIRS = ["docs"]
TEXT_FILES = ["README.md"]
C_KEYWORDS = cn.KEYWORDS | {"main", "errno", "bool", "true", "false", "NULL"}


class Fixer:
    def __init__(self, root, cc, dry):
        self.root = root
        self.cc = cc
        self.dry = dry
        self.left = {}            # (file, name, rule) -> why it was left
        self.done = collections.Counter()
        self._visible = {}
        self.changed = set()
        # Names a person chose where the plain one was taken:
        # "FILE OLD NEW" a line (FILE as under Sources/CRunLoop/).
        self.chosen = {}
        if os.path.exists(RENAMES):
            for line in open(RENAMES, encoding="utf-8"):
                w = line.split("#")[0].split()
                if len(w) == 3:
                    self.chosen[(w[0], w[1])] = w[2]

    # -- files ----------------------------------------------------------
    def read(self, path):
        with open(os.path.join(self.root, path), encoding="utf-8") as f:
            return f.read()

    def write(self, path, text):
        if self.read(path) == text:
            return
        self.changed.add(path)
        if not self.dry:
            with open(os.path.join(self.root, path), "w", encoding="utf-8") as f:
                f.write(text)

    def text_files(self, m):
        files = list(m.core_files) + list(m.public_files) + list(m.user_files)
        for d in TEXT_DIRS:
            files += cn.list_files(self.root, d, (".md",))
        files += [f for f in TEXT_FILES if os.path.exists(os.path.join(self.root, f))]
        return files

    def doc_files(self):
        files = []
        for d in TEXT_DIRS:
            files += cn.list_files(self.root, d, (".md",))
        return files + [f for f in TEXT_FILES if os.path.exists(os.path.join(self.root, f))]

    # -- what a file can see ---------------------------------------------
    def visible(self, m, path):
        """Every identifier a file can see: its own words, and what its
        includes declare (the preprocessor's output with macros kept)."""
        if path in self._visible:
            return self._visible[path]
        words = set(m.sources[path].tokens) if path in m.sources else set()
        words |= set(cn.IDENT.findall(self.read(path)))
        if path.endswith(".c"):
            cmd = [self.cc, "-E", "-dD", "-D_GNU_SOURCE", "-Iinclude"]
            cmd += ["-I" + os.path.join(cn.CORE, r) for r in sorted({cn.room_of(p) for p in m.core_files})]
            cmd += ["-ITests/c/support"]
            if "clang" in os.path.basename(self.cc):
                cmd += ["-fblocks"]
            cmd += [path]
            r = subprocess.run(cmd, cwd=self.root, capture_output=True, text=True)
            if r.returncode == 0:
                words |= set(cn.IDENT.findall(r.stdout))
        self._visible[path] = words
        return words

    def includers(self, m, header):
        """Files whose (transitive) includes reach header."""
        return {p for p in m.sources if header in self.closure(m, p)}

    def closure(self, m, path):
        if not hasattr(self, "_closure"):
            self._closure = {}
        if path in self._closure:
            return self._closure[path]
        by_base = collections.defaultdict(list)
        for p in m.core_files + m.user_files:
            if p.endswith(".h"):
                by_base[os.path.basename(p)].append(p)
        seen = set()
        todo = [path]
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', self.read(p), re.M):
                cands = [os.path.normpath(os.path.join(os.path.dirname(p), inc))]
                cands += by_base.get(os.path.basename(inc), [])
                for c in cands:
                    if c in m.sources:
                        todo.append(c)
                        break
        self._closure[path] = seen
        return seen

    # -- renaming --------------------------------------------------------
    @staticmethod
    def rename_text(text, old, new, value=False):
        """old -> new as a word, never after `.` or `->` (a member), never
        in an #include line nor as a file name (`rl_lockclass.h`); for a
        function or global (value), never after struct/union/enum (a tag
        may share its name)."""
        out = []
        pat = re.compile(r"(?<![.>\w])%s\b(?!\.(?:h|c|md|swift)\b)" % re.escape(old))
        tag = re.compile(r"\b(struct|union|enum)\s+$")

        def one(mo, line):
            if value and tag.search(line[:mo.start()]):
                return mo.group(0)
            return new
        for line in text.split("\n"):
            if re.match(r"\s*#\s*include\b", line):
                out.append(line)
                continue
            out.append(pat.sub(lambda mo: one(mo, line), line))
        return "\n".join(out)

    def name_ok(self, new):
        return bool(cn.IDENT.fullmatch(new)) and new not in C_KEYWORDS and not new.startswith("_") \
            and not new[0].isdigit()

    def rename_in(self, paths, old, new):
        for p in paths:
            t = self.read(p)
            if re.search(r"\b%s\b" % re.escape(old), t):
                self.write(p, self.rename_text(t, old, new))

    def new_name(self, d):
        key = (os.path.relpath(d["file"], cn.CORE), d["name"])
        return self.chosen.get(key, d["new"])

    def leave(self, d, why):
        self.left[(d["file"], d["name"], d["rule"])] = why

    # -- the rounds ------------------------------------------------------
    def round_shared(self, m, v):
        """Shared names get rl__, in every file that writes them."""
        all_words = set()
        for p in m.sources:
            all_words |= set(m.sources[p].tokens)
        did = False
        for d in v:
            if d.get("fix") != "rename-shared":
                continue
            old, new = d["name"], d["new"]
            if not cn.is_prefixed(old):
                self.leave(d, "%s is a plain word that other code uses for other things: rename it "
                           "to %s by hand" % (old, new))
                continue
            if not self.name_ok(new) or new in all_words:
                self.leave(d, "%s is taken already (or not a valid name): choose another" % new)
                continue
            self.rename_in(self.text_files(m), old, new)
            all_words.add(new)
            self.done["shared"] += 1
            did = True
        return did

    def round_strip(self, m, v):
        """Static names and .c types lose their prefix, in their file."""
        did = False
        docs = []
        by_file = collections.defaultdict(list)
        for d in v:
            if d.get("fix") == "strip":
                by_file[d["file"]].append(d)
        for path, ds in sorted(by_file.items()):
            text = self.read(path)
            seen = set(self.visible(m, path))
            for d in sorted(ds, key=lambda d: d["name"]):
                old, new = d["name"], self.new_name(d)
                if old not in set(cn.IDENT.findall(text)):
                    continue
                if not self.name_ok(new) or new in seen:
                    self.leave(d, "the plain name %s is already used in or seen by %s: choose one "
                               "in scripts/naming-renames.txt" % (new, os.path.basename(path)))
                    continue
                is_type = d["rule"].startswith("type")
                if is_type and (any(e.path == path for e in m.defs.get(old, []))
                                or any(e.path == path for e in m.decls.get(old, []))):
                    self.leave(d, "a function or global of %s shares the name %s: rename by hand"
                               % (os.path.basename(path), old))
                    continue
                text = self.rename_text(text, old, new, value=not is_type)
                seen.add(new)
                self.done["strip"] += 1
                did = True
                # the docs name it too when no other file has the word
                if not any(p != path for p in m.users_of.get(old, ())):
                    docs.append((old, new))
            self.write(path, text)
        for old, new in docs:
            self.rename_in(self.doc_files(), old, new)
        return did

    def decl_lines(self, text, ent):
        """(first, last) line indexes (0-based, inclusive) of a declaration
        with the comment lines right above it."""
        lines = text.split("\n")
        code = cn.blank_preprocessor(cn.blank_comments_and_literals(text))
        # first line holding code of the entity
        s = ent.start
        while s < ent.end and code[s].isspace():
            s += 1
        first = text.count("\n", 0, s)
        last = text.count("\n", 0, ent.end - 1)
        c = first
        while c > 0:
            prev = lines[c - 1].strip()
            if prev.startswith("/*") or prev.startswith("*") or prev.startswith("//") or \
                    (prev.endswith("*/") and not code.split("\n")[c - 1].strip()):
                if prev.startswith("*") or prev.endswith("*/") and not prev.startswith("/*"):
                    # inside a block comment: climb to its start
                    k = c - 1
                    while k > 0 and "/*" not in lines[k]:
                        k -= 1
                    if code.split("\n")[k].strip():
                        break
                    c = k
                else:
                    c -= 1
                continue
            break
        return c, first, last

    def cut_decl(self, path, ent):
        """Removes a declaration (and its comment) from path; returns
        (comment_text, decl_text) or None if the declaration shares its
        lines with something else."""
        text = self.read(path)
        # the file may have changed since the model read it: find it again
        fresh = [e for e in cn.parse_entities(cn.Source(self.root, path, text))
                 if e.name == ent.name and e.kind == ent.kind]
        if not fresh:
            return None
        ent = fresh[0]
        lines = text.split("\n")
        c, first, last = self.decl_lines(text, ent)
        code_lines = cn.blank_preprocessor(cn.blank_comments_and_literals(text)).split("\n")
        # the declaration must own its lines: nothing else on them
        body = "\n".join(code_lines[first:last + 1])
        if ent.kind in cn.DECL_KINDS and len(re.findall(r";", body)) != 1:
            return None
        comment = "\n".join(lines[c:first])
        decl = "\n".join(lines[first:last + 1])
        new_lines = lines[:c] + lines[last + 1:]
        # no double blank line where it was
        if c < len(new_lines) and c > 0 and not new_lines[c].strip() and not new_lines[c - 1].strip():
            del new_lines[c]
        self.write(path, "\n".join(new_lines))
        return comment, decl

    def round_static(self, m, v):
        """One-file rl__ names become static and plain."""
        did = False
        for d in v:
            if d.get("fix") != "make-static":
                continue
            name, new, path = d["name"], self.new_name(d), d["file"]
            if not self.name_ok(new) or new in self.visible(m, path):
                self.leave(d, "the plain name %s is already used in or seen by %s" % (new, os.path.basename(path)))
                continue
            defs = [e for e in m.defs[name] if e.path == path]
            if len(m.defs[name]) != 1:
                self.leave(d, "defined more than once")
                continue
            # drop the declarations from headers (and from the file itself)
            decls = sorted(m.decls.get(name, []), key=lambda e: (e.path, -e.start))
            comment_kept = None
            proto = None
            ok = True
            for e in decls:
                if e.path != path and not e.path.endswith(".h"):
                    ok = False
            if not ok:
                self.leave(d, "declared in another .c file")
                continue
            for e in decls:
                got = self.cut_decl(e.path, e)
                if got is None:
                    self.leave(d, "its declaration in %s shares lines with another: edit by hand" % e.path)
                    ok = False
                    break
                comment, decl = got
                if comment.strip() and comment_kept is None:
                    comment_kept = comment
                proto = decl
            if not ok:
                continue
            text = self.read(path)
            code = cn.blank_comments_and_literals(text)
            # re-parse: offsets moved if the file held a declaration
            ents = cn.parse_entities(cn.Source(self.root, path))
            de = [e for e in ents if e.name == name and e.kind in cn.VALUE_KINDS]
            if not de:
                self.leave(d, "definition not found again")
                continue
            de = de[0]
            s = de.start
            # past blanks and preprocessor lines (a definition right after
            # the file's #includes starts, as parsed, before them)
            while True:
                while code[s].isspace():
                    s += 1
                if code[s] != "#":
                    break
                while True:
                    eol = code.find("\n", s)
                    if eol < 0 or code[eol - 1] != "\\":
                        break
                    s = eol + 1
                s = eol + 1 if eol >= 0 else len(code)
            line_start = text.rfind("\n", 0, s) + 1
            c, first, _ = self.decl_lines(text, de)
            has_comment = c < first
            insert = ""
            if comment_kept and not has_comment:
                insert = comment_kept.strip("\n") + "\n"
            text = text[:line_start] + insert + text[line_start:s] + "static " + text[s:]
            # a use before the definition wants a prototype before it
            code = cn.blank_comments_and_literals(text)
            first_use = re.search(r"(?<![.>\w])%s\b" % re.escape(name), code)
            ents = cn.parse_entities(cn.Source(self.root, path, text))
            de = [e for e in ents if e.name == name and e.kind in cn.VALUE_KINDS][0]
            if first_use and first_use.start() < de.name_at:
                holder = [e for e in ents if e.start <= first_use.start() < e.end]
                if proto is None:
                    # build one from the definition's head
                    head = text[de.start:text.index("{", de.name_at)] if de.kind == "function" else None
                    proto = head.strip() + ";" if head else None
                if proto is None or not holder:
                    self.leave(d, "used before its definition and no prototype to copy")
                    self.write(path, text)
                    continue
                h = holder[0]
                hs = h.start
                while code[hs].isspace():
                    hs += 1
                c2, _, _ = self.decl_lines(text, h)
                at = sum(len(x) + 1 for x in text.split("\n")[:c2])
                p = re.sub(r"^\s*(RL__HIDDEN\s+)?(extern\s+)?", "", proto.strip())
                text = text[:at] + "static " + p + "\n\n" + text[at:]
            text = self.rename_text(text, name, new, value=True)
            self.write(path, text)
            self.done["static"] += 1
            did = True
        return did

    def target_header(self, m, name, room, def_path, old_path=None):
        hdrs = [p for p in m.core_files if p.endswith(".h") and cn.room_of(p) == room]
        stem = os.path.splitext(os.path.basename(def_path))[0]
        for h in hdrs:
            if os.path.splitext(os.path.basename(h))[0] == stem:
                return h
        # the header that declares most of the defining file's other names
        votes = collections.Counter()
        for n, ds in m.defs.items():
            if any(e.path == def_path and not e.static for e in ds):
                for e in m.decls.get(n, []):
                    if e.path in hdrs:
                        votes[e.path] += 1
        if votes:
            return votes.most_common(1)[0][0]
        # the room header that the defining file includes and most files of
        # the room include too
        own = [h for h in hdrs if h in self.closure(m, def_path)]
        if own:
            room_files = [p for p in m.core_files if cn.room_of(p) == room]
            # one that sees what the old place saw of the room, then the
            # one most files of the room include
            wanted = {h for h in self.closure(m, old_path) if h in hdrs} if old_path else set()
            return max(sorted(own), key=lambda h: (wanted <= self.closure(m, h),
                                                   sum(1 for p in room_files if h in self.closure(m, p))))
        return None

    def move_headers(self, m, v):
        """A header that declares only names of one other room moves into
        that room (includes use bare names: no #include changes)."""
        wrong = collections.defaultdict(set)
        for d in v:
            if d.get("fix") == "move-decl" and d["file"].endswith(".h"):
                wrong[d["file"]].add(d["room"])
        did = False
        for h, rooms in sorted(wrong.items()):
            if len(rooms) != 1 or h == cn.CORE + "/base/internal.h":
                continue
            room = rooms.pop()
            own = [e for e in m.entities[h] if e.kind in cn.DECL_KINDS + cn.VALUE_KINDS
                   and not any(dd["file"] == h and dd["name"] == e.name for dd in v if dd.get("fix") == "move-decl")]
            if own:
                continue
            dest = os.path.join(cn.CORE, room, os.path.basename(h))
            if os.path.exists(os.path.join(self.root, dest)):
                continue
            self.changed.add(h)
            self.changed.add(dest)
            if not self.dry:
                r = subprocess.run(["git", "mv", h, dest], cwd=self.root, capture_output=True)
                if r.returncode != 0:
                    os.rename(os.path.join(self.root, h), os.path.join(self.root, dest))
            self.done["header"] += 1
            did = True
        return did

    def round_move(self, m, v):
        """rl__ declarations move into a header of the defining room."""
        if self.move_headers(m, v):
            return True
        did = False
        for d in v:
            if d.get("fix") != "move-decl":
                continue
            name, old = d["name"], d["file"]
            defs = [e for e in m.defs[name] if not e.static]
            target = self.target_header(m, name, d["room"], defs[0].path, d["file"])
            if target is None:
                self.leave(d, "no header of %s/ to take it: make one" % d["room"])
                continue
            ents = [e for e in m.decls[name] if e.path == old]
            if not ents:
                continue
            ent = ents[0]
            # the static inlines of the old header over the name go along
            inlines = []
            if old.endswith(".h") and m.sources[old].tokens[name] > 1:
                code = m.sources[old].code
                inlines = [e for e in m.entities[old] if e.kind == "function" and e.static
                           and re.search(r"\b%s\b" % re.escape(name), code[e.start:e.end])]
                uses = sum(len(re.findall(r"\b%s\b" % re.escape(name), code[e.start:e.end])) for e in inlines)
                if uses + 1 != m.sources[old].tokens[name] or any(
                        re.search(r"\b%s\b" % re.escape(e.name), code[:e.start] + code[e.end:]) for e in inlines):
                    self.leave(d, "%s uses %s beyond its declaration and inlines over it: move by hand"
                               % (os.path.basename(old), name))
                    continue
            words = [name] + [e.name for e in inlines]
            # who got the declaration from the old place
            needs = [p for p in m.sources if p not in (target, old)
                     and any(m.sources[p].tokens[w] > 0 for w in words)
                     and old in self.closure(m, p) and target not in self.closure(m, p)]
            got = self.cut_decl(old, ent)
            if got is None:
                self.leave(d, "its declaration shares lines with another: move by hand")
                continue
            comment, decl = got
            decl = decl.strip("\n")
            if not re.search(r"\bRL__HIDDEN\b", decl) and "RL__HIDDEN" in self.read(target):
                decl = "RL__HIDDEN " + decl.lstrip()
            block = (comment.strip("\n") + "\n" if comment.strip() else "") + decl + "\n"
            for e in inlines:
                g = self.cut_decl(old, e)
                if g:
                    block += (g[0].strip("\n") + "\n" if g[0].strip() else "") + g[1].strip("\n") + "\n"
            t = self.read(target)
            mm = list(re.finditer(r"^#\s*endif\b.*$", t, re.M))
            if mm and not t[mm[-1].end():].strip():
                at = mm[-1].start()
                t = t[:at].rstrip("\n") + "\n\n" + block + "\n" + t[at:]
            else:
                t = t.rstrip("\n") + "\n\n" + block
            self.write(target, t)
            for p in needs:
                self.add_include(p, os.path.basename(target))
            self._closure = {}
            self.done["move"] += 1
            did = True
        return did

    def add_include(self, path, header):
        t = self.read(path)
        if re.search(r'^\s*#\s*include\s+"%s"' % re.escape(header), t, re.M):
            return
        incs = list(re.finditer(r'^#\s*include\s+"[^"]+".*$', t, re.M))
        if incs:
            at = incs[-1].end()
            t = t[:at] + '\n#include "%s"' % header + t[at:]
        else:
            incs = list(re.finditer(r'^#\s*include\s+<[^>]+>.*$', t, re.M))
            at = incs[0].start() if incs else 0
            t = t[:at] + '#include "%s"\n' % header + t[at:]
        self.write(path, t)

    def run(self):
        rounds = [("shared", self.round_shared), ("move", self.round_move),
                  ("static", self.round_static), ("strip", self.round_strip)]
        for _ in range(6):
            any_change = False
            for label, fn in rounds:
                m = cn.Model(self.root)
                self._visible = {}
                self._closure = {}
                before = len(self.changed)
                v = m.violations()
                v = [d for d in v if (d["file"], d["name"], d["rule"]) not in self.left]
                if fn(m, v) or len(self.changed) > before:
                    any_change = True
                if self.dry:
                    break
            if not any_change or self.dry:
                break
        m = cn.Model(self.root)
        return m.violations()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(HERE, ".."))
    ap.add_argument("--dry-run", action="store_true", help="change nothing; say what one round would touch")
    ap.add_argument("--cc", default=os.environ.get("NAMING_CC", "clang"))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    f = Fixer(root, args.cc, args.dry_run)
    left = f.run()
    print("[fix-naming] %s: %s; %d files %s" % (
        "would change" if args.dry_run else "changed",
        ", ".join("%s %d" % kv for kv in sorted(f.done.items())) or "nothing",
        len(f.changed), "to change" if args.dry_run else "changed"))
    if f.changed:
        for p in sorted(f.changed):
            print("  " + p)
    if left:
        print("[fix-naming] left for a person (%d):" % len(left))
        for d in left:
            why = f.left.get((d["file"], d["name"], d["rule"]), "")
            print("%s:%d: [%s] %s%s" % (d["file"], d["line"], d["rule"], d["message"],
                                        ("  -- not fixed: " + why) if why else ""))
        return 1
    print("[fix-naming] check-naming passes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
