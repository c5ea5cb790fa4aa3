#!/usr/bin/env python3
"""The house rules that a reader checks by eye, as a test (ctest house_rules;
docs/DESIGN.md and ../shared/STYLE.md state them):

  status     no `if (st)` / `if (!st)`: a status is compared with STK_OK
             (`if (st != STK_OK)`), so that reading it never needs to know
             that STK_OK is 0
  cuda-if    no preprocessor conditional on CUDA outside kernels/cuda/, but
             where the CUDA compiler reads shared code: __CUDACC__ in
             common/host_device.h (STK_HD), __CUDA_ARCH__ in kernels/*_math.h
             (device intrinsics that round as the CPU does), and the build's
             STOKE_CUDA_MODULE_BUILT in device/cuda_module.c (the loader's
             message when the build has no backend); tests may ask too
  impl       a module's *_impl.h is included by that module (and tests/,
             bench/, which test its insides) only; the CUDA module's seam
             (device/cuda_module_impl.h, device/device_heap_ops_impl.h) also
             by the module's own sources (kernels/cuda/) and, for the op
             table, kernels/backend_registry.c: the two sides of one seam
  installed  every function an installed header declares (cmake --install:
             the modules' *.h but *_impl.h and kernels/cuda/) is exported by
             libstoke.so (with --library BUILD/libstoke.so), so that a C user
             who includes a header can link what it promises

    scripts/house_rules.py [--library BUILD/libstoke.so]
"""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODULES = ["common", "storage", "decode", "augment", "pack", "device", "kernels", "engine", "loader", "train",
           "distributed", "runlog", "run", "tune", "tools", "python", "examples"]
INSTALLED = ["common", "storage", "decode", "augment", "pack", "device", "kernels", "engine", "loader", "train",
             "distributed", "runlog", "run", "tune"]  # CMakeLists.txt's install(DIRECTORY ...)
CUDA_IF_ALLOWED = {
    "common/host_device.h": {"__CUDACC__"},
    "device/cuda_module.c": {"STOKE_CUDA_MODULE_BUILT"},
}
# The seam between the host and the CUDA backend module: who else includes it.
SEAM = {
    "device/cuda_module_impl.h": ("kernels/cuda/", "kernels/backend_registry.c"),
    "device/device_heap_ops_impl.h": ("kernels/cuda/",),
}
CUDA_TOKEN = re.compile(r"\b(__CUDACC__|__CUDA_ARCH__|__NVCC__|STOKE_CUDA\w*|CUDA\w*)\b")


def sources(dirs, exts=(".c", ".h", ".cu", ".cuh")):
    for d in dirs:
        for base, subdirs, files in os.walk(os.path.join(ROOT, d)):
            subdirs[:] = [s for s in subdirs if not s.startswith((".", "build"))]
            for f in sorted(files):
                if f.endswith(exts):
                    path = os.path.join(base, f)
                    yield os.path.relpath(path, ROOT), path


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group()), text,
                  flags=re.S)


def check_status(fails):
    pat = re.compile(r"(?<![\w.>])!\s*st\b(?!\s*(->|\.|\[|==|!=|=[^=]))"  # !st
                     r"|\b(if|while)\s*\(\s*st\s*(\)|&&|\|\|)"  # if (st) / if (st && ...)
                     r"|(&&|\|\|)\s*st\s*(\)|&&|\|\||;)")  # ... && st)
    for rel, path in sources(MODULES + ["tests", "bench", "fuzz"]):
        text = strip_comments(open(path, encoding="utf-8", errors="replace").read())
        for no, line in enumerate(text.splitlines(), 1):
            if pat.search(line):
                fails.append(f"{rel}:{no}: status tested as a truth value ({line.strip()}): "
                             "compare it with STK_OK")


def check_cuda_if(fails):
    for rel, path in sources(MODULES):
        if rel.startswith("kernels/cuda/"):
            continue
        text = strip_comments(open(path, encoding="utf-8", errors="replace").read())
        allowed = set(CUDA_IF_ALLOWED.get(rel, ()))
        if re.fullmatch(r"kernels/\w+_math\.h", rel):
            allowed.add("__CUDA_ARCH__")
        for no, line in enumerate(text.splitlines(), 1):
            if not re.match(r"\s*#\s*(if|ifdef|ifndef|elif)\b", line):
                continue
            bad = {t for t in CUDA_TOKEN.findall(line) if t not in allowed}
            if bad:
                fails.append(f"{rel}:{no}: a preprocessor conditional on {', '.join(sorted(bad))} "
                             "outside kernels/cuda/ (the backend is a module: ask it at run time)")


def check_impl(fails):
    inc = re.compile(r'#\s*include\s*"(\w+)/([\w/]+_impl\.h)"')
    for rel, path in sources(MODULES + ["tests", "bench", "fuzz"],
                             exts=(".c", ".h", ".cu", ".cuh", ".cpp")):
        mine = rel.split("/")[0]
        for no, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
            m = inc.search(line)
            header = f"{m.group(1)}/{m.group(2)}" if m else ""
            if header in SEAM and rel.startswith(SEAM[header]):
                continue
            if m and m.group(1) != mine and mine not in ("tests", "bench", "fuzz"):
                fails.append(f"{rel}:{no}: includes {m.group(1)}/{m.group(2)}, private to "
                             f"{m.group(1)}/")


DECL = re.compile(r"(?:^|[;}])\s*((?:extern\s+)?(?:const\s+)?(?:unsigned\s+|struct\s+|enum\s+)?"
                  r"[A-Za-z_]\w*[\s\*]+(?:const\s*\*?\s*)?)([a-z_]\w*)\s*\(([^;{}()]|\([^()]*\))*\)"
                  r"\s*(?:__attribute__\s*\(\([^;]*\)\))?\s*;", re.S)


def declared_functions(text):
    text = strip_comments(text)
    text = re.sub(r"^\s*#.*?(?<!\\)$", "", text, flags=re.M | re.S)  # preprocessor lines
    text = re.sub(r'extern\s+"C"\s*\{', "", text)
    names = set()
    for m in DECL.finditer(text):
        head = m.group(1)
        if re.search(r"\b(typedef|static|return|else)\b", head):
            continue
        names.add(m.group(2))
    return names


def check_installed(fails, library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True,
                         check=True).stdout
    exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    for rel, path in sources(INSTALLED, exts=(".h",)):
        if rel.endswith("_impl.h") or rel.startswith("kernels/cuda/"):
            continue
        text = open(path, encoding="utf-8").read()
        # (a build without the feature gives a static inline of the same name instead)
        inline = set(re.findall(r"static\s+inline\s+[\w\s\*]+?\b([a-z_]\w*)\s*\(", text))
        for name in sorted(declared_functions(text) - inline):
            if name not in exported:
                fails.append(f"{rel}: declares {name}(), which {os.path.basename(library)} does "
                             "not export (installed headers promise only what the library has)")


def main():
    library = None
    if len(sys.argv) == 3 and sys.argv[1] == "--library":
        library = sys.argv[2]
    elif len(sys.argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    fails = []
    check_status(fails)
    check_cuda_if(fails)
    check_impl(fails)
    if library:
        check_installed(fails, library)
    for f in fails:
        print(f)
    print(f"house rules: {len(fails)} broken" if fails else "house rules: all kept")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
