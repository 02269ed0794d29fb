#!/usr/bin/env python3
"""Checks every #include of the source tree against the layering rule (layers.txt).

    tests/layering/check_layers.py [--root DIR] [--rules FILE] [--cmake-layer TARGET=FILE,...]...

Exit 0 when every include keeps the rule, 1 with one line per violation
(`path:line: #include "...": why`), 2 when the rules file itself is wrong. The rule's
format is described at the top of layers.txt; docs/architecture.md explains the layers.

With --cmake-layer (one per layer library, lowest first, as tests/CMakeLists.txt passes them)
it also checks that the build's layers are the rule's: as many, in the same order, each
library's sources in the folders of its layer.

It also runs check_file_keys.py (no identity-hashed integer keys where files are read), whose
findings count as violations.
"""
import argparse
import os
import re
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_file_keys  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_RULES = os.path.join(HERE, "layers.txt")

SOURCE_EXTENSIONS = (".h", ".hh", ".hpp", ".hxx", ".inc", ".def", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class RulesError(Exception):
    pass


@dataclass
class Owner:
    """Who a folder belongs to: a layer (with its rank, 0 lowest) or an `outside` entry."""

    name: str  # layer name, or the outside folder
    folder: str
    rank: int = -1  # >= 0 for layers
    allowed: list = field(default_factory=list)  # outside only: compiled path patterns
    allowed_text: list = field(default_factory=list)

    @property
    def is_layer(self):
        return self.rank >= 0


@dataclass
class Rules:
    path: str
    layers: list  # layer names, lowest first
    folders: dict  # folder -> Owner
    generated: dict  # include prefix -> folder


def _pattern(text):
    """`**` crosses folders, `*` stays within one."""
    out = []
    i = 0
    while i < len(text):
        if text.startswith("**", i):
            out.append(".*")
            i += 2
        elif text[i] == "*":
            out.append("[^/]*")
            i += 1
        else:
            out.append(re.escape(text[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def load_rules(path):
    layers, folders, generated = [], {}, {}

    def add_folder(folder, owner, lineno):
        folder = folder.strip("/")
        if folder in folders:
            raise RulesError(f"{path}:{lineno}: folder {folder} is listed twice")
        owner.folder = folder
        folders[folder] = owner

    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            kind, args = words[0], words[1:]
            if kind == "layer":
                if len(args) < 2:
                    raise RulesError(f"{path}:{lineno}: `layer NAME FOLDER...`")
                name = args[0]
                if name in layers:
                    raise RulesError(f"{path}:{lineno}: layer {name} is listed twice")
                for folder in args[1:]:
                    add_folder(folder, Owner(name, folder, rank=len(layers)), lineno)
                layers.append(name)
            elif kind == "outside":
                if not args:
                    raise RulesError(f"{path}:{lineno}: `outside FOLDER [PATH...]`")
                add_folder(args[0], Owner(args[0].strip("/"), args[0], allowed=[_pattern(p) for p in args[1:]],
                                          allowed_text=args[1:]), lineno)
            elif kind == "generated":
                if len(args) != 2:
                    raise RulesError(f"{path}:{lineno}: `generated PREFIX FOLDER`")
                generated[args[0]] = args[1].strip("/")
            else:
                raise RulesError(f"{path}:{lineno}: unknown entry {kind!r} (layer, outside, generated)")
    if not layers:
        raise RulesError(f"{path}: no layers")
    for prefix, folder in generated.items():
        if folder not in folders:
            raise RulesError(f"{path}: generated {prefix} belongs to {folder}, which is in no rule")
    return Rules(path, layers, folders, generated)


def owner_of(rules, relpath):
    """The Owner of the longest listed folder that `relpath` lies in, else None."""
    best = None
    for folder, owner in rules.folders.items():
        if relpath.startswith(folder + "/") and (best is None or len(folder) > len(best.folder)):
            best = owner
    return best


def source_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == ".":
            # Build trees, .git and other hidden folders are not sources.
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.startswith("build")]
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXTENSIONS):
                yield os.path.normpath(os.path.join(rel, name)).replace(os.sep, "/")


def includes(path):
    """(line number, delimiter, included name) of each #include outside comments."""
    in_comment = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            code = ""
            i = 0
            while i < len(line):
                if in_comment:
                    end = line.find("*/", i)
                    if end < 0:
                        i = len(line)
                    else:
                        in_comment = False
                        i = end + 2
                elif line.startswith("/*", i):
                    in_comment = True
                    i += 2
                elif line.startswith("//", i):
                    break
                else:
                    code += line[i]
                    i += 1
            m = INCLUDE_RE.match(code)
            if m:
                yield lineno, m.group(1), m.group(2).strip()


def resolve(root, rules, relpath, delim, name):
    """(path for the rule, Owner) of an included project header; None for a system header;
    (name, None) for a project path that does not exist."""
    if delim == '"':
        local = os.path.normpath(os.path.join(os.path.dirname(relpath), name)).replace(os.sep, "/")
        if not local.startswith("../") and os.path.isfile(os.path.join(root, local)):
            return local, owner_of(rules, local)
    top = os.path.normpath(name).replace(os.sep, "/")
    if not top.startswith("../") and os.path.isfile(os.path.join(root, top)):
        return top, owner_of(rules, top)
    for prefix, folder in rules.generated.items():
        if name.startswith(prefix):
            return name, rules.folders[folder]
    first = top.split("/", 1)[0]
    if delim == '"' and "/" in top and any(f == first or f.startswith(first + "/") for f in rules.folders):
        return name, None  # names a project folder, but no such file
    return None


def check(root, rules):
    """Returns (violations, files checked, project includes seen)."""
    violations = []
    nfiles = nincludes = 0
    for folder in sorted(rules.folders):
        if not os.path.isdir(os.path.join(root, folder)):
            violations.append(f"{rules.path}: the rule names folder {folder}, which does not exist")
    for relpath in source_files(root):
        owner = owner_of(rules, relpath)
        if owner is None:
            violations.append(f"{relpath}: in no layer and no `outside` entry of {rules.path}: add its folder there")
            continue
        nfiles += 1
        for lineno, delim, name in includes(os.path.join(root, relpath)):
            target = resolve(root, rules, relpath, delim, name)
            if target is None:
                continue
            nincludes += 1
            tpath, towner = target
            where = f"{relpath}:{lineno}: #include {delim}{name}{'>' if delim == '<' else delim}"
            if towner is None:
                if not os.path.isfile(os.path.join(root, tpath)):
                    violations.append(f"{where}: no such file in the source tree")
                else:
                    violations.append(f"{where}: {tpath} is in no layer and no `outside` entry")
                continue
            if owner.is_layer:
                if not towner.is_layer:
                    violations.append(f"{where}: {owner.name} (a layer) includes {tpath} of {towner.folder}/, "
                                      f"which is outside the layers")
                elif towner.rank > owner.rank:
                    violations.append(f"{where}: layer {owner.name} includes {tpath} of layer {towner.name}, "
                                      f"which is above it (order, lowest first: {' < '.join(rules.layers)})")
            else:
                if towner is owner:
                    continue
                if not any(p.match(tpath) for p in owner.allowed):
                    allowed = " ".join(owner.allowed_text) or "nothing"
                    violations.append(f"{where}: {owner.folder}/ may include only its own files and: {allowed}")
    return violations, nfiles, nincludes


def check_cmake_layers(root, rules, cmake_layers):
    """`cmake_layers`: [(target, [absolute source paths])], lowest first. Sources outside the
    source tree (generated into the build tree) are not checked."""
    violations = []
    if len(cmake_layers) != len(rules.layers):
        violations.append(f"the build has {len(cmake_layers)} layer libraries "
                          f"({', '.join(t for t, _ in cmake_layers)}), {rules.path} has {len(rules.layers)} "
                          f"layers ({', '.join(rules.layers)})")
        return violations
    root = os.path.realpath(root)
    for (target, sources), layer in zip(cmake_layers, rules.layers):
        for src in sources:
            rel = os.path.relpath(os.path.realpath(src), root).replace(os.sep, "/")
            if rel.startswith("../"):
                continue
            owner = owner_of(rules, rel)
            if owner is None or owner.name != layer:
                violations.append(f"{rel}: compiled into {target} (layer {layer} in the build), but "
                                  f"{rules.path} puts it in {owner.name if owner else 'no layer'}")
    return violations


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=DEFAULT_ROOT, help="source tree (default: this repository)")
    ap.add_argument("--rules", default=DEFAULT_RULES, help="rules file (default: tests/layering/layers.txt)")
    ap.add_argument("--cmake-layer", action="append", default=[], metavar="TARGET=FILE,...",
                    help="a layer library of the build and its sources, lowest first (repeat)")
    a = ap.parse_args(argv)
    try:
        rules = load_rules(a.rules)
    except (OSError, RulesError) as e:
        print(f"layering: {e}", file=sys.stderr)
        return 2
    violations, nfiles, nincludes = check(a.root, rules)
    if a.cmake_layer:
        layers = []
        for arg in a.cmake_layer:
            target, _, files = arg.partition("=")
            layers.append((target, [f for f in files.split(",") if f]))
        violations += check_cmake_layers(a.root, rules, layers)
    key_violations, _ = check_file_keys.check(a.root)
    violations += key_violations
    for v in violations:
        print(v)
    if violations:
        print(f"layering: {len(violations)} violation(s) of {a.rules} (docs/architecture.md explains the layers)")
        return 1
    built = f", the {len(a.cmake_layer)} layer libraries match it" if a.cmake_layer else ""
    print(f"layering: ok, {nfiles} files, {nincludes} project includes keep {a.rules}{built}; "
          f"no identity-hashed file keys in {', '.join(check_file_keys.FOLDERS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
