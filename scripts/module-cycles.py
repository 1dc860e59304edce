#!/usr/bin/env python3
"""Import cycles between the modules (files) of Rust crates.

Usage: scripts/module-cycles.py SRC_DIR... (e.g. `src cargo-vramtest/src`). A module
uses another when it names a path in it (`use`, `crate::`, `super::`, a child by
name); a name a module re-exports (`pub use`) is followed to where it is defined.
Inline `#[cfg(test)]` modules are left out. Prints each cycle and exits 1 if any.
"""
import os, re, sys

def strip(src):
    src = re.sub(r'//[^\n]*', '', src)
    m = re.search(r'#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{', src)
    return src[:m.start()] if m else src

def modfile(root, parts):
    """The file of module `parts` (a list) under src root, or None."""
    base = os.path.join(root, *parts) if parts else root
    for f in ([base + '.rs', os.path.join(base, 'mod.rs')] if parts else []):
        if os.path.isfile(f): return f
    return None

def crate_graph(root, top):
    files = {}
    for dp, _, fns in os.walk(root):
        for f in fns:
            if f.endswith('.rs'):
                p = os.path.join(dp, f)
                rel = os.path.relpath(p, root)[:-3].split(os.sep)
                if rel[-1] == 'mod': rel = rel[:-1]
                if rel == [top]: rel = []
                files[p] = rel
    bymod = {tuple(v): k for k, v in files.items()}
    edges = {p: set() for p in files}
    imports = {}
    for p, mod in files.items():
        names = {}
        for m in re.finditer(r'\buse\s+([^;]+);', strip(open(p).read())):
            for path in expand(m.group(1)):
                segs = [x for x in path.split('::') if x]
                if not segs or segs[-1] in ('*', 'self'): continue
                if segs[0] == 'crate': base, rest = (), segs[1:]
                elif segs[0] in ('super', 'self'):
                    base = tuple(mod)
                    while segs and segs[0] in ('super', 'self'):
                        if segs[0] == 'super': base = base[:-1]
                        segs = segs[1:]
                    rest = segs
                elif tuple(mod + [segs[0]]) in bymod: base, rest = tuple(mod), segs
                else: continue
                names[rest[-1]] = (base, rest)
        imports[p] = names
    for p, mod in files.items():
        src = strip(open(p).read())
        # expand `use a::{b, c::{d}}` groups into paths
        paths = []
        for m in re.finditer(r'\buse\s+([^;]+);', src):
            paths += expand(m.group(1))
        paths += re.findall(r'\b((?:crate|super|self)(?:::\w+)+)', src)
        for path in paths:
            segs = [s for s in path.split('::') if s]
            if not segs: continue
            if segs[0] == 'crate': cur, segs = [], segs[1:]
            elif segs[0] in ('super', 'self'):
                cur = list(mod)
                while segs and segs[0] in ('super', 'self'):
                    if segs[0] == 'super': cur = cur[:-1]
                    segs = segs[1:]
            else:
                # a child module of this one used by its bare name (`child::f`)
                if tuple(mod + [segs[0]]) in bymod: cur = list(mod)
                else: continue
            t = bymod.get(resolve(tuple(cur), segs, bymod, imports, 0))
            if t and t != p: edges[p].add(t)
    return edges

def resolve(target, segs, bymod, imports, depth):
    """The module a path lands in; a name a module imports (`pub use`) is followed to
    where it is defined, so `crate::Result` is the module that defines `Result`."""
    for i, s in enumerate(segs):
        if target + (s,) in bymod:
            target = target + (s,)
            continue
        via = imports.get(bymod[target], {}).get(s) if target in bymod else None
        if via is not None and depth < 8:
            return resolve(via[0], via[1] + segs[i + 1:], bymod, imports, depth + 1)
        break
    return target

def expand(text):
    text = re.sub(r'\s+', '', text)
    out = []
    def go(prefix, s):
        i = s.find('{')
        if i < 0:
            for item in split(s): out.append(prefix + item.split(' as ')[0])
            return
        head, body = s[:i], s[i+1:s.rfind('}')]
        for item in split(body): go(prefix + head, item)
    def split(s):
        parts, depth, cur = [], 0, ''
        for ch in s:
            if ch == '{': depth += 1
            if ch == '}': depth -= 1
            if ch == ',' and depth == 0: parts.append(cur); cur = ''
            else: cur += ch
        if cur: parts.append(cur)
        return parts
    go('', text)
    return out

def sccs(edges):
    index, low, stack, on, res, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: res.append(sorted(comp))
    for v in edges:
        if v not in index: visit(v)
    return res

bad = 0
for root in sys.argv[1:]:
    top = 'main' if os.path.isfile(os.path.join(root, 'main.rs')) else 'lib'
    for comp in sccs(crate_graph(root, top)):
        bad += 1
        print('cycle:', ' <-> '.join(os.path.relpath(c) for c in comp))
print(f'{bad} import cycle(s) in', ' '.join(sys.argv[1:]))
sys.exit(1 if bad else 0)
