#!/usr/bin/env python3
"""The shape of the code: file and function sizes, macro bodies, module import cycles.

    infra/shape.py            # report: the top five of each, the distributions, every cycle
    infra/shape.py --check    # also fail (exit 1) when a limit is broken

Counts only non-test code of each crate's `src/`: a file's lines stop at its
`#[cfg(test)]` module, a file that is itself a test module (declared
`#[cfg(test)] mod name;` by its parent) is counted apart, and `tests/`,
`benches/` and `examples/` are left out.

The limits are a smell detector, not a target. So the report prints how the
sizes are distributed and how many sit just under each limit: a pile-up there
shows splits made by the counter rather than where an idea ends. `macro_rules!`
bodies are reported on their own, since code generated from them is invisible
to every other count here.

A cycle is a loop of `use` references between sibling modules: the top-level
modules of a crate, or the children of one module directory (a parent's
`mod.rs` re-exporting its children is not a cycle). The scheduler's top-level
modules are its layers, listed bottom up in LAYERS: a reference from one layer
to a layer above it is reported as well, so that the fire path never reaches
HTTP and the store never reaches the loops; a new top-level module must be
given its place in the list.

Parsing is deliberately simple (comments and string literals are blanked, then
braces are counted), which is exact enough for rustfmt-formatted code.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = ["schemas", "kafka", "scheduler", "executor-sdk", "bridge", "tests"]
FILE_LIMIT = 500
FUNCTION_LIMIT = 80

# The scheduler's layers, bottom up (its crate tour in scheduler/src/lib.rs draws them): each
# may use those before it, never one after it.
LAYERS = {
    "scheduler": [
        "domain", "config", "clock", "metrics", "traces", "store", "engine", "readers",
        "monitors", "operations", "http", "app", "cli",
    ],
}


def blank_literals(text):
    """Blanks comments, string and char literals, keeping line breaks."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif m := re.compile(r'b?r(#*)"').match(text, i):
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"' or text.startswith('b"', i):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif m := re.compile(r"b?'(\\.|[^\\'])'").match(text, i):
            out.append("' '")
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def source_files():
    for crate in CRATES:
        src = ROOT / crate / "src"
        if src.is_dir():
            for path in sorted(src.rglob("*.rs")):
                yield crate, path


TEST_MODULE_DECLARATION = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;")


def test_module_files():
    """The files that are test modules of their own: `#[cfg(test)] mod name;` in the parent."""
    found = set()
    for _, path in source_files():
        # A module's children live beside mod.rs/lib.rs/main.rs, or in a folder named after it.
        folder = path.parent if path.stem in ("mod", "lib", "main") else path.with_suffix("")
        for m in TEST_MODULE_DECLARATION.finditer(blank_literals(path.read_text())):
            for child in (folder / f"{m.group(1)}.rs", folder / m.group(1) / "mod.rs"):
                if child.is_file():
                    found.add(child)
    return found


MACRO = re.compile(r"\bmacro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)")


def macro_bodies(path, lines):
    """(length, name, file:line) of each `macro_rules!` definition in the non-test lines."""
    code = blank_literals("\n".join(lines)).splitlines()
    found = []
    for start, line in enumerate(code):
        m = MACRO.search(line)
        if not m:
            continue
        depth, opened = 0, False
        for end in range(start, len(code)):
            segment = code[end][m.end() :] if end == start else code[end]
            depth += sum(segment.count(c) for c in "{([") - sum(segment.count(c) for c in "})]")
            opened = opened or any(c in segment for c in "{([")
            if opened and depth <= 0:
                found.append((end - start + 1, m.group(1), f"{path}:{start + 1}"))
                break
    return found


def distribution(sizes, bounds):
    """Lines like `  100–199  ####  12` counting the sizes in each [low, high] bound."""
    rows = []
    widest = max((sum(low <= s <= high for s in sizes) for low, high in bounds), default=0)
    for low, high in bounds:
        count = sum(low <= s <= high for s in sizes)
        bar = "#" * (round(40 * count / widest) if widest else 0)
        rows.append(f"  {low:4}–{high:<4} {count:5}  {bar}")
    return rows


def non_test_lines(text):
    """The lines before the file's test module (`#[cfg(test)]` then `mod …`)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        following = next((l.strip() for l in lines[index + 1 :] if l.strip()), "")
        if line.strip() == "#[cfg(test)]" and following.startswith("mod "):
            return lines[:index]
    return lines


FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def functions(path, lines):
    """(length, name, file:line) of each function body in the non-test lines."""
    code = blank_literals("\n".join(lines)).splitlines()
    found = []
    for start, line in enumerate(code):
        m = FN.search(line)
        if not m:
            continue
        depth, opened = 0, False
        for end in range(start, len(code)):
            segment = code[end][m.end() :] if end == start else code[end]
            for ch in segment:
                if ch == ";" and not opened and depth == 0:
                    break  # a declaration without a body (trait method)
                if ch == "{":
                    depth += 1
                    opened = True
                elif ch == "}":
                    depth -= 1
            else:
                if opened and depth == 0:
                    found.append((end - start + 1, m.group(1), f"{path}:{start + 1}"))
                    break
                continue
            break
    return found


def module_of(crate_src, path):
    """Module path of a file: src/a/b.rs and src/a/b/mod.rs are both ['a', 'b']."""
    parts = list(path.relative_to(crate_src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


USE = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def references(module, text):
    """Absolute module paths this module's non-test code names (`super` is the parent)."""
    for m in USE.finditer(blank_literals(text)):
        rest = m.group(2).split("::")[1:]
        yield rest if m.group(1) == "crate" else module[:-1] + rest


def cycles():
    """Strongly connected groups of sibling modules, per crate and directory."""
    found = []
    for crate in CRATES:
        src = ROOT / crate / "src"
        if not src.is_dir():
            continue
        modules = {}
        for path in sorted(src.rglob("*.rs")):
            module = module_of(src, path)
            text = "\n".join(non_test_lines(path.read_text()))
            modules[tuple(module)] = list(references(module, text))
        parents = {m[:-1] for m in modules if m} | {()}
        for parent in sorted(parents):
            children = {m[len(parent)] for m in modules if len(m) > len(parent) and m[: len(parent)] == parent}
            edges = {c: set() for c in children}
            for module, refs in modules.items():
                if len(module) <= len(parent) or module[: len(parent)] != parent:
                    continue
                source = module[len(parent)]
                for ref in refs:
                    if len(ref) > len(parent) and tuple(ref[: len(parent)]) == parent:
                        target = ref[len(parent)]
                        if target in children and target != source:
                            edges[source].add(target)
            for group in strongly_connected(edges):
                if len(group) > 1:
                    where = "::".join(parent) or "(root)"
                    found.append(f"{crate} {where}: {' <-> '.join(sorted(group))}")
    return found


def layer_breaches():
    """References from a layer up to a layer above it, and top-level modules not in LAYERS."""
    found = []
    for crate, order in LAYERS.items():
        src = ROOT / crate / "src"
        rank = {layer: index for index, layer in enumerate(order)}
        for path in sorted(src.rglob("*.rs")):
            module = module_of(src, path)
            if not module:
                continue
            if module[0] not in rank:
                found.append(f"{crate}: {module[0]} is not placed in infra/shape.py's LAYERS")
                continue
            text = "\n".join(non_test_lines(path.read_text()))
            upward = sorted(
                {ref[0] for ref in references(module, text) if ref and rank.get(ref[0], -1) > rank[module[0]]}
            )
            for layer in upward:
                found.append(f"{crate}: {'::'.join(module)} reaches up to {layer}")
    return sorted(set(found))


def strongly_connected(edges):
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            groups.append(group)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def main():
    check = "--check" in sys.argv
    files, funcs, macros, test_files = [], [], [], []
    own_test_modules = test_module_files()
    for crate, path in source_files():
        rel = path.relative_to(ROOT)
        if path in own_test_modules:
            test_files.append((len(path.read_text().splitlines()), str(rel)))
            continue
        lines = non_test_lines(path.read_text())
        files.append((len(lines), str(rel)))
        funcs.extend(functions(rel, lines))
        macros.extend(macro_bodies(rel, lines))
    files.sort(reverse=True)
    funcs.sort(reverse=True)
    macros.sort(reverse=True)
    found_cycles = cycles()
    breaches = layer_breaches()

    print(f"files: {len(files)}, {sum(c for c, _ in files)} non-test lines")
    print("largest files (non-test lines):")
    for count, name in files[:5]:
        print(f"  {count:5}  {name}")
    print(f"file sizes (lines; limit {FILE_LIMIT}):")
    file_bounds = [(0, 99), (100, 199), (200, 299), (300, 399), (400, 449), (450, 474), (475, FILE_LIMIT)]
    print("\n".join(distribution([c for c, _ in files], file_bounds)))
    print(f"functions: {len(funcs)}")
    print("longest functions (lines):")
    for count, name, where in funcs[:5]:
        print(f"  {count:5}  {name}  {where}")
    print(f"function lengths (lines; limit {FUNCTION_LIMIT}):")
    function_bounds = [(1, 9), (10, 19), (20, 39), (40, 59), (60, 69), (70, 75), (76, FUNCTION_LIMIT)]
    print("\n".join(distribution([c for c, _, _ in funcs], function_bounds)))
    print(f"macro_rules! bodies: {len(macros)}, {sum(c for c, _, _ in macros)} lines")
    for count, name, where in macros[:5]:
        print(f"  {count:5}  {name}!  {where}")
    print(f"test modules in files of their own: {len(test_files)}, {sum(c for c, _ in test_files)} lines")
    print("module cycles:" + ("" if found_cycles else " none"))
    for cycle in found_cycles:
        print(f"  {cycle}")
    print("layers reached from below:" + ("" if breaches else " none"))
    for breach in breaches:
        print(f"  {breach}")

    if check:
        broken = [f"{n} has {c} lines (limit {FILE_LIMIT})" for c, n in files if c > FILE_LIMIT]
        broken += [
            f"{name} at {where} has {c} lines (limit {FUNCTION_LIMIT})"
            for c, name, where in funcs
            if c > FUNCTION_LIMIT
        ]
        broken += [f"cycle: {c}" for c in found_cycles]
        broken += [f"layers: {b}" for b in breaches]
        for line in broken:
            print(f"shape: {line}", file=sys.stderr)
        return 1 if broken else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
