#!/usr/bin/env python3
"""Rejects identity-hashed containers keyed by integers in the code that reads files.

    tests/layering/check_file_keys.py [--root DIR]

Keys read from a file (correlation ids, thread ids, ranks, ...) go in ordered containers
(`FileKeyMap` / `FileKeySet`, src/common/file_key_map.h) or in a hash container given a seeded
hash: libstdc++'s std::hash of an integer is the integer itself, so a hostile file can put every
key in one bucket and make each lookup linear (hash flooding). This lint finds, in FOLDERS, a
`std::unordered_{map,set,multimap,multiset}` whose key is an integer type (or a pair or tuple of
them) and that is given no hash argument. Exit 0 when there is none, 1 with one line per finding
(`path:line: ...`). check_layers.py runs it too (ctest: layering); its self-test is
test_check_layers.py.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ROOT = os.path.dirname(os.path.dirname(HERE))
FOLDERS = ("src", "analyzers", "reports")
SOURCE_EXTENSIONS = (".h", ".hh", ".hpp", ".inc", ".cc", ".cpp", ".cxx")

CONTAINER_RE = re.compile(r"\bunordered_(map|set|multimap|multiset)\s*<")
INTEGER_RE = re.compile(
    r"(std::)?(u?int(8|16|32|64)_t|u?int_(fast|least)(8|16|32|64)_t|size_t|ptrdiff_t|u?intptr_t|"
    r"((un)?signed\s+)?(char|short|int|long(\s+long)?)(\s+int)?|(un)?signed|bool|char(8|16|32)_t|wchar_t)\Z")
PAIR_RE = re.compile(r"(std::)?(pair|tuple)\s*<(.*)>\Z", re.S)


def strip_comments(text):
    """The text with comments and string/char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # not a digit separator
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j, n)
            closed = j < n and text[j] == c
            out.append(c + " " * (j - i - 1) + (c if closed else ""))
            i = j + 1 if closed else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def template_args(text, start):
    """The top-level arguments of the template argument list that opens at text[start] == '<'."""
    depth, args, cur = 0, [], []
    for i in range(start, len(text)):
        c = text[i]
        if c in "<([{":
            depth += 1
            if depth == 1:
                continue
        elif c in ">)]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(c)
    return None  # unbalanced: not a template argument list


def is_integer_key(key):
    key = " ".join(key.replace("const", " ").split())
    if INTEGER_RE.match(key):
        return True
    m = PAIR_RE.match(key)
    if m:
        inner = template_args("<" + m.group(3) + ">", 0) or []
        return bool(inner) and all(is_integer_key(k) for k in inner)
    return False


def findings(text):
    """(line, message) for each identity-hashed integer-keyed container in C++ source `text`."""
    code = strip_comments(text)
    for m in CONTAINER_RE.finditer(code):
        args = template_args(code, m.end() - 1)
        if not args:
            continue
        kind = m.group(1)
        hash_at = 1 if kind.endswith("set") else 2  # the argument a hash goes in
        if len(args) > hash_at or not is_integer_key(args[0]):
            continue
        line = code.count("\n", 0, m.start()) + 1
        yield line, (f"std::unordered_{kind} keyed by {args[0]} with std::hash (the identity: floodable by a "
                     f"file's keys); use FileKeyMap/FileKeySet (src/common/file_key_map.h) or a seeded hash")


def check(root, folders=FOLDERS):
    """Returns (violations, files checked)."""
    violations, nfiles = [], 0
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SOURCE_EXTENSIONS):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                nfiles += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                violations += [f"{rel}:{line}: {msg}" for line, msg in findings(text)]
    return violations, nfiles


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=DEFAULT_ROOT, help="source tree (default: this repository)")
    a = ap.parse_args(argv)
    violations, nfiles = check(a.root)
    for v in violations:
        print(v)
    if violations:
        print(f"file keys: {len(violations)} identity-hashed integer key(s) in {', '.join(FOLDERS)}")
        return 1
    print(f"file keys: ok, {nfiles} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
