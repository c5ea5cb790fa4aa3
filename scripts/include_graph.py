#!/usr/bin/env python3
"""The layering of Stoke's sources: every edge between modules (directories)
points to a strictly lower layer (LAYERS, docs/DESIGN.md "Modules"), and no
units (a .c file with its .h) form a cycle outside the ones allowed to share
one. Prints every violation and exits 1 when there is one.

    scripts/include_graph.py                  # the check (docs/DESIGN.md, "Modules"), from includes
    scripts/include_graph.py --edges          # the unit graph, one "a -> b" per line
    scripts/include_graph.py --objects build  # the same from the object files'
                                              # symbols: what each unit calls, wherever
                                              # it is declared
"""
import glob
import subprocess
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = ["common", "storage", "decode", "augment", "pack", "device", "kernels", "engine", "loader", "train", "distributed", "runlog",
           "run", "tune", "tools", "python"]
# Lowest first: a module may use only modules of lower layers.
LAYERS = [
    {"common"},
    {"storage", "decode", "device", "runlog"},
    {"augment", "kernels"},
    {"engine", "loader", "pack"},
    {"train"},
    {"distributed"},
    {"run"},
    {"tune"},
    {"python"},
    {"tools"},
]
# Units that are one concern and may share a cycle: a tensor knows its grad
# node and hook, and the registry of live tensors; the caching allocator loads the CUDA module for the GPU heap's ops, and the
# module allocates its workspaces through the allocator (device/cuda_module_impl.h).
ALLOWED = [{"engine/tensor", "engine/autograd", "engine/tensor_registry"},
           {"device/device_alloc", "device/cuda_module"}]
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def unit(path):
    base = re.sub(r"\.(c|h|cu|cuh|cpp)$", "", path)
    return re.sub(r"_impl$", "", base)


def graph():
    edges = {}
    for mod in MODULES:
        for dirpath, _, files in os.walk(os.path.join(ROOT, mod)):
            for f in files:
                if not re.search(r"\.(c|h|cu|cuh)$", f):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                text = open(os.path.join(ROOT, rel), errors="replace").read()
                for inc in INC.findall(text):
                    if os.path.exists(os.path.join(ROOT, inc)):
                        a, b = unit(rel), unit(inc)
                        if a != b:
                            edges.setdefault(a, set()).add(b)
    return edges


def object_graph(build):
    """Unit -> units whose symbols it uses, from `nm` of the build's objects."""
    defined, used = {}, {}
    for o in glob.glob(os.path.join(build, "CMakeFiles", "stoke*.dir", "**", "*.o"), recursive=True):
        # the CUDA module's own entry: its forwarding copies of host functions
        # (stk_error, ...) and its copy of common/clock.c are not edges
        if os.sep + "stoke_cuda.dir" + os.sep in o:
            continue
        rel = o.split(".dir" + os.sep, 1)[1]
        u = unit(re.sub(r"\.o$", "", rel))
        if u.split("/")[0] not in MODULES:
            continue
        out = subprocess.run(["nm", o], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                used.setdefault(u, set()).add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRV":
                defined[parts[2]] = u
    edges = {}
    for u, syms in used.items():
        for s in syms:
            d = defined.get(s)
            if d and d != u:
                edges.setdefault(u, set()).add(d)
    return edges


def cycles(edges):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main():
    if "--objects" in sys.argv:
        edges = object_graph(sys.argv[sys.argv.index("--objects") + 1])
    else:
        edges = graph()
    if "--edges" in sys.argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(a, "->", b)
        return 0
    modules = {}
    for a, bs in edges.items():
        for b in bs:
            ma, mb = a.split("/")[0], b.split("/")[0]
            if ma != mb:
                modules.setdefault(ma, set()).add(mb)
    bad = 0
    layer = {m: i for i, ms in enumerate(LAYERS) for m in ms}
    for m in MODULES:
        if m not in layer:
            print("module %s has no layer in LAYERS" % m)
            bad += 1
    for ma in sorted(modules):
        for mb in sorted(modules[ma]):
            if layer.get(mb, 99) >= layer.get(ma, -1):
                print("layer violation: %s (layer %s) uses %s (layer %s)" %
                      (ma, layer.get(ma), mb, layer.get(mb)))
                bad += 1
    for comp in cycles(modules):
        print("module circle:", " <-> ".join(sorted(comp)))
        bad += 1
    for comp in cycles(edges):
        allowed = any(comp <= a for a in ALLOWED)
        print("unit circle%s:" % (" (allowed)" if allowed else ""), " <-> ".join(sorted(comp)))
        bad += not allowed
    print("%d layering problem(s): module edges against LAYERS, circles between different "
          "concerns" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
