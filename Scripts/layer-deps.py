#!/usr/bin/env python3
"""Lists, per PromiseHTTP file, which other files' types it names; prints back-edges and cycles.

Usage: python3 Scripts/layer-deps.py [Sources/PromiseHTTP] [-v]
The layers, highest first: Client, Transfers, Lifecycle, Transport, Policies, Messages. A back-edge is a
file naming a top-level type (or extending one) declared in a higher layer. Textual: comments
and string literals are stripped, nested type names are not resolved.
"""
import re, sys, os, itertools
root = sys.argv[1] if len(sys.argv) > 1 else "Sources/PromiseHTTP"
order = ["Client", "Transfers", "Lifecycle", "Transport", "Policies", "Messages"]
files = {}
for d in order:
    p = os.path.join(root, d)
    for f in sorted(os.listdir(p)):
        if f.endswith(".swift"):
            files[f"{d}/{f}"] = open(os.path.join(p, f)).read()
def strip(src):
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r'"""(.*?)"""', '""', src, flags=re.S)
    src = re.sub(r'"(\\.|[^"\\\n])*"', '""', src)
    return src
code = {f: strip(s) for f, s in files.items()}
decl = re.compile(r"\b(?:class|struct|enum|protocol|actor|typealias)\s+([A-Za-z_][A-Za-z0-9_]*)")
declext = re.compile(r"\bextension\s+([A-Za-z_][A-Za-z0-9_.]*)")
owner = {}
def depth_at(s, i):
    return s.count("{", 0, i) - s.count("}", 0, i)
for f, s in code.items():
    for m in decl.finditer(s):
        if depth_at(s, m.start()) == 0:
            owner.setdefault(m.group(1), f)
# nested names: only top-level names are resolved; qualified Outer.Inner counts Outer
# a file also "owns" members it adds in extension: record statics declared in extensions elsewhere
# (conformance declared in another file counts as that file naming the extended type)
edges = {f: {} for f in code}
for f, s in code.items():
    for name, of in owner.items():
        if of == f: continue
        if re.search(r"(?<![A-Za-z0-9_.])" + re.escape(name) + r"\b", s):
            edges[f].setdefault(of, []).append(name)
    # conformance/extension declared here for a type owned elsewhere
    for m in re.finditer(r"^extension\s+([A-Za-z_][A-Za-z0-9_]*)", s, flags=re.M):
        of = owner.get(m.group(1))
        if of and of != f and m.group(1) not in edges[f].get(of, []):
            edges[f].setdefault(of, []).append(m.group(1))
layer = lambda f: order.index(f.split("/")[0])
verbose = "-v" in sys.argv
back = []
for f in code:
    for g, names in sorted(edges[f].items()):
        if layer(g) < layer(f):
            back.append((f, g, names))
if verbose:
    for f in code:
        print(f, "->", ", ".join(f"{g.split('/')[1][:-6]}({','.join(n)})" for g, n in sorted(edges[f].items())))
print(f"\nback-edges (lower layer names a higher one): {len(back)}")
for f, g, n in back:
    print(f"  {f} -> {g}: {', '.join(n)}")
# SCCs (Tarjan)
idx, low, st, on, sccs, c = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
for v in code:
    if v not in idx: sc(v)
cyc = [s for s in sccs if len(s) > 1]
print(f"\nfiles: {len(code)}; cycles (strongly connected groups > 1 file): {len(cyc)}")
for s in sorted(cyc, key=len, reverse=True):
    print(f"  {len(s)} files: {', '.join(sorted(x.split('/')[1][:-6] for x in s))}")
