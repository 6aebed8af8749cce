#!/usr/bin/env python3
"""Import cycles among a crate's modules.

Usage: scripts/module-cycles.py [--depth N] [--edges] CRATE_SRC_DIR

Maps each file under CRATE_SRC_DIR (lib.rs or main.rs is the crate root; src/bin is skipped:
those are crates of their own) to its module path, follows inline `mod x { ... }` blocks, and
collects the paths the code names through `crate::...`, `super::...` and `self::...`, and the
relative paths that start with a child module's name (grouped `use` trees included; comments
and string literals are ignored). Each path is resolved to the
longest known module it names and cut to its first N segments (N = --depth, 1 by default: the
crate's top-level modules). Prints the strongly connected components of more than one module of
the resulting graph and exits 1 if there is any, else prints that there is none and exits 0.
With --edges, the graph's edges are printed too.
"""

import argparse
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text):
    """Replaces comments, string and char literals with spaces (keeping newlines)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and (i == 0 or not re.match(r"[A-Za-z0-9_]", text[i - 1])):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}'); otherwise a lifetime, kept.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def file_module(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel in (["lib"], ["main"]):
        return ()
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel)


def expand_use_tree(text, start):
    """From text[start:] (just after `crate::`, `super::` or `self::`), the paths it names:
    a plain path, or a `{...}` group (nested groups expanded)."""
    m = re.match(r"\s*((?:%s\s*::\s*)*)" % IDENT, text[start:])
    prefix = [s for s in re.split(r"\s*::\s*", m.group(1).strip()) if s]
    j = start + m.end()
    rest = text[j:]
    if rest.lstrip().startswith("{"):
        j += len(rest) - len(rest.lstrip())
        depth, k = 0, j
        while k < len(text):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        inner = text[j + 1:k]
        parts, depth, cur = [], 0, ""
        for ch in inner:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        parts.append(cur)
        paths = []
        for part in parts:
            part = part.strip()
            if not part:
                continue
            if part.startswith("{") or "::" in part and "{" in part:
                for sub in expand_use_tree(part + " ", 0):
                    paths.append(prefix + sub)
            else:
                head = re.split(r"\s+as\s+", part)[0]
                paths.append(prefix + [s for s in re.split(r"\s*::\s*", head) if s])
        return paths
    m2 = re.match(r"\s*(%s)" % IDENT, rest)
    return [prefix + ([m2.group(1)] if m2 else [])]


def references(module, text, modules):
    """(inner module path, referenced absolute path) for each reference in a file's code; a path
    that starts with the name of a child module (`use reads::X`) counts as one into it."""
    refs = []
    stack = [(module, -1)]  # (module path, brace depth at which it closes)
    depth = 0
    token = re.compile(r"\bmod\s+(%s)\s*\{|\{|\}|\b(crate|self|super(?:\s*::\s*super)*)\s*::|(?<![:\w])(%s)\s*::" % (IDENT, IDENT))
    for m in token.finditer(text):
        if m.group(3):
            # A relative path (2018 edition) that starts with a child module of this one.
            child = stack[-1][0] + (m.group(3),)
            if child in modules:
                for path in expand_use_tree(text, m.end()):
                    refs.append((stack[-1][0], child + tuple(path)))
        elif m.group(1):
            stack.append((stack[-1][0] + (m.group(1),), depth))
            depth += 1
        elif m.group(0) == "{":
            depth += 1
        elif m.group(0) == "}":
            depth -= 1
            if len(stack) > 1 and stack[-1][1] == depth:
                stack.pop()
        else:
            current = stack[-1][0]
            base = {"crate": (), "self": current}.get(m.group(2))
            if base is None:
                # `super`, `super::super`, ...: one level up for each.
                ups = m.group(2).count("super")
                base = current[: max(len(current) - ups, 0)]
            for path in expand_use_tree(text, m.end()):
                if path and path[0] == "self":
                    path = path[1:]
                refs.append((current, base + tuple(path)))
    return refs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--edges", action="store_true")
    args = ap.parse_args()
    src = os.path.abspath(args.src)
    files = []
    for root, dirs, names in os.walk(src):
        if os.path.relpath(root, src) == ".":
            dirs[:] = [d for d in dirs if d != "bin"]
        files += [os.path.join(root, f) for f in names if f.endswith(".rs")]
    modules = {file_module(src, f) for f in files}
    texts = {f: strip_comments_and_strings(open(f, encoding="utf-8").read()) for f in files}
    refs = []
    for f in files:
        refs += references(file_module(src, f), texts[f], modules)
    modules |= {inner for inner, _ in refs}

    def node(path):
        # The longest known module the path names, cut to the depth.
        while path and tuple(path) not in modules:
            path = path[:-1]
        return tuple(path[: args.depth])

    graph = {}
    for inner, target in refs:
        a, b = node(inner), node(target)
        if a != b:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
    name = lambda p: "::".join(p) or "crate"
    if args.edges:
        for a in sorted(graph):
            for b in sorted(graph[a]):
                print(f"{name(a)} -> {name(b)}")

    # Tarjan's strongly connected components (iterative).
    index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]
    for v0 in sorted(graph):
        if v0 in index:
            continue
        work = [(v0, iter(sorted(graph[v0])))]
        index[v0] = low[v0] = counter[0]
        counter[0] += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        sccs.append(sorted(comp))
    if not sccs:
        print(f"no cycle among the modules of {args.src} (depth {args.depth})")
        return 0
    for comp in sorted(sccs):
        print("cycle: " + " <-> ".join(name(p) for p in comp))
    return 1


if __name__ == "__main__":
    sys.exit(main())
