#!/usr/bin/python3
"""The house rules a maintainer relies on, checked on the source tree.

  house_check.py SRC [--report]

1. Layers: an include points down util -> sagas -> policies -> adapters ->
   coordinator/store -> coordinator/engine -> coordinator/http ->
   coordinator/server -> coordinator/client -> coordinator/cli, never up or
   sideways.
2. Time: the pure model (sagas/, policies/) and the engine
   (coordinator/engine/) read time only through the injected Clock.
3. Size: no product source file over 500 lines, no function over 70 lines,
   a README of at most 300 lines.
4. Only public headers are installed: none of them includes a private one.
5. READMEs stay true: every product source file is named by its folder's
   README.md (or, for a folder without one, its parent's), as `stem.h`,
   `stem.cc`, `stem.*` or `stem.{h,cc}`; and every such name a product
   README gives is a file of its folder, of one below it or of a sibling.
6. Owners own: at most MAX_ENGINE_MUTEXES mutexes in coordinator/engine
   (per-instance state lives on its owner thread, without a lock).
7. The manual is whole: docs/README.md links every page of docs/, and no
   page refers to an issue or a design part outside the repository.
8. The tests mirror the engine: every folder of coordinator/engine has its
   folder under tests/coordinator/engine.
Prints each breach on one line and exits 1 if there is any.
"""
import os
import re
import sys

LAYERS = ["util", "sagas", "policies", "adapters", "coordinator/store",
          "coordinator/engine", "coordinator/http", "coordinator/server",
          "coordinator/client", "coordinator/cli", "coordinator/sim"]
PRODUCT = ["util", "sagas", "policies", "adapters", "coordinator"]
# Real time is the edges' business: nothing inside the engine reads it.
TIME_EXEMPT = set()
MAX_FILE_LINES = 500
MAX_ENGINE_MUTEXES = 8
MAX_FUNCTION_LINES = 70
MAX_README_LINES = 300


def layer_of(path):
    best = -1
    for i, layer in enumerate(LAYERS):
        if path == layer or path.startswith(layer + "/"):
            best = i  # the longest (latest) match: coordinator/x over coordinator
    return best


def sources(src):
    for top in PRODUCT:
        for root, _, files in os.walk(os.path.join(src, top)):
            for f in sorted(files):
                if f.endswith((".h", ".cc")):
                    yield os.path.relpath(os.path.join(root, f), src)


def check_layers(src, rel, text, out):
    mine = layer_of(rel)
    for inc in re.findall(r'^#include "([^"]+)"', text, re.M):
        theirs = layer_of(inc)
        if theirs < 0:
            continue  # generated headers (openapi_json.h, ...)
        if theirs > mine:
            out.append(f"{rel}: includes {inc}, a layer above it")


def check_time(rel, text, out):
    if not (rel.startswith(("sagas/", "policies/", "coordinator/engine/"))):
        return
    if rel in TIME_EXEMPT:
        return
    for n, line in enumerate(text.split("\n"), 1):
        if re.search(r"(steady_clock|system_clock|high_resolution_clock)::now\(\)", line):
            out.append(f"{rel}:{n}: reads the time without the Clock")


def functions(text):
    """(signature, first line number, length) of each function defined at
    namespace scope (column 0) or in a class body (column 2): its signature
    starts at that column, ends with '{' within a few lines, and its body
    ends with a '}' at the same column."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        if (indent in (0, 2) and body and "(" in body
                and not body.startswith(("#", "//", "}", "return", "if ", "for ", "while ",
                                         "switch ", "case ", "else", "do ", "namespace"))
                and "=" not in body.split("(")[0]):
            j = i
            while j < len(lines) and j < i + 8 and not lines[j].rstrip().endswith(("{", ";", "}")):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{") and not lines[j].rstrip().endswith("= {"):
                close = " " * indent + "}"
                k = j + 1
                while k < len(lines) and not (lines[k] == close or lines[k].startswith(close + ";")
                                              or lines[k].startswith(close + " ")):
                    k += 1
                yield body, i + 1, k - i + 1
                i = k + 1
                continue
        i += 1


def check_sizes(rel, text, out):
    n = text.count("\n")
    if n > MAX_FILE_LINES:
        out.append(f"{rel}: {n} lines (at most {MAX_FILE_LINES})")
    if rel.endswith(".cc"):
        for name, first, length in functions(text):
            if length > MAX_FUNCTION_LINES:
                out.append(f"{rel}:{first}: a function of {length} lines "
                           f"(at most {MAX_FUNCTION_LINES}): {name[:60]}")


def check_installed(src, out):
    cmake = open(os.path.join(src, "CMakeLists.txt")).read()
    m = re.search(r"set\(SAGAD_PUBLIC_HEADERS(.*?)\)", cmake, re.S)
    if not m:
        out.append("CMakeLists.txt: no SAGAD_PUBLIC_HEADERS")
        return
    public = set(m.group(1).split())
    for h in sorted(public):
        path = os.path.join(src, h)
        if not os.path.exists(path):
            out.append(f"CMakeLists.txt: installs {h}, which does not exist")
            continue
        for inc in re.findall(r'^#include "([^"]+)"', open(path).read(), re.M):
            if layer_of(inc) >= 0 and inc not in public:
                out.append(f"{h}: public, but includes {inc}, which is not installed")


def check_named(src, rel, out):
    folder, name = os.path.split(rel)
    stem = name.rsplit(".", 1)[0]
    readme = os.path.join(src, folder, "README.md")
    if not os.path.exists(readme):
        readme = os.path.join(src, os.path.dirname(folder), "README.md")
    if not os.path.exists(readme):
        out.append(f"{rel}: no README.md in its folder or the one above")
        return
    text = open(readme, encoding="utf-8").read()
    if not re.search(r"(?<![\w/])" + re.escape(stem) + r"\.(h|cc|\*|\{)", text):
        out.append(f"{rel}: not named by {os.path.relpath(readme, src)}")


# A file a README names: `stem.h`, `stem.cc`, `stem.*`, `stem.{h,cc}`.
NAME = r"`(\w+)\.(h|cc|\*|\{h,cc\})`"


def check_readme_names(src, out):
    for top in PRODUCT:
        for root, _, files in os.walk(os.path.join(src, top)):
            if "README.md" not in files:
                continue
            below = set()  # of its folder, below it, or of a sibling folder
            for r2, _, fs in os.walk(os.path.dirname(root)):
                below.update(f.rsplit(".", 1)[0] for f in fs if f.endswith((".h", ".cc")))
            text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
            for stem, _ in re.findall(NAME, text):
                if stem not in below:
                    rel = os.path.relpath(os.path.join(root, "README.md"), src)
                    out.append(f"{rel}: names {stem}.*, no file near it")


def check_engine_mutexes(src, out):
    found = []
    for root, _, files in os.walk(os.path.join(src, "coordinator/engine")):
        for f in sorted(files):
            if not f.endswith((".h", ".cc")):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)
            for n, line in enumerate(open(os.path.join(root, f), encoding="utf-8"), 1):
                if re.match(r"\s*(mutable\s+)?(Mutex|std::mutex|std::shared_mutex)\s+\w+\s*;", line):
                    found.append(f"{rel}:{n}")
    if len(found) > MAX_ENGINE_MUTEXES:
        out.append(f"coordinator/engine: {len(found)} mutexes (at most {MAX_ENGINE_MUTEXES}): " +
                   " ".join(found))


def check_docs(src, out):
    docs = os.path.join(src, "docs")
    index = open(os.path.join(docs, "README.md"), encoding="utf-8").read()
    for f in sorted(os.listdir(docs)):
        if f.endswith(".md") and f != "README.md":
            if f"({f})" not in index and f"(./{f})" not in index:
                out.append(f"docs/README.md: does not link {f}")
            text = open(os.path.join(docs, f), encoding="utf-8").read()
            for m in re.finditer(r"\b(issue #?\d+|DESIGN(\.md)?,? Part \d|Part \d of DESIGN)",
                                 text, re.I):
                out.append(f"docs/{f}: refers to '{m.group(0)}', outside the repository")


def check_test_tree(src, out):
    engine = os.path.join(src, "coordinator/engine")
    for d in sorted(os.listdir(engine)):
        if os.path.isdir(os.path.join(engine, d)) and \
           not os.path.isdir(os.path.join(src, "tests/coordinator/engine", d)):
            out.append(f"tests/coordinator/engine/{d}: missing (the tests mirror the engine)")


def main():
    src = sys.argv[1]
    out = []
    for rel in sources(src):
        text = open(os.path.join(src, rel), encoding="utf-8").read()
        check_layers(src, rel, text, out)
        check_time(rel, text, out)
        check_sizes(rel, text, out)
        check_named(src, rel, out)
    readme = open(os.path.join(src, "README.md")).read().count("\n")
    if readme > MAX_README_LINES:
        out.append(f"README.md: {readme} lines (at most {MAX_README_LINES})")
    check_installed(src, out)
    check_readme_names(src, out)
    check_engine_mutexes(src, out)
    check_docs(src, out)
    check_test_tree(src, out)
    for line in out:
        print(line)
    print(f"house: {len(out)} breaches")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
