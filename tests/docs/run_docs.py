"""Run the docs as a reader would: every shell, console and Python block of
README.md and docs/*.md, page by page, on the small data the tests make.

    run_docs.py SRC_DIR STOKE WORK [PAGE ...]

Each page runs in a folder of its own (WORK/PAGE), its blocks in order, as
a reader pastes them: the files a page uses without making them are put
there first (DATA below: Fashion-MNIST cut to 256 + 128 images, the
fixtures' JPEG folder, damaged copies), `stoke` and `python3` are on PATH,
and `build`, `examples`, `scripts` and `tests` point into the checkout and
this build. The kinds of block:

  ```sh / ```bash   one script, `sh -e`: every line must succeed.
  ```console        each `$ ` line on its own; exit status 0 or 1 (never a
                    crash), 1 where the block shows a `stoke: ...` error
                    (its text, up to the first parenthesis, must be what
                    stoke printed) or `$ echo $?` then 1.
  ```python         run; a page's Python blocks build on each other (each
                    runs after the page's earlier ones, as in one session).
  ```c FILE,        an excerpt: its lines must appear, in order, in FILE,
  ```python FILE    a program the tests build and run.
  ``` (no label)    output or a synopsis: not run (check_commands.py
                    parses the `stoke` lines of every block).

What cannot run here is skipped by the rules in SKIP, each with its reason,
and counted; REWRITE lists the only changes made to the text. Prints one
line per page and a total; exits 1 if anything failed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

from markdown_blocks import blocks, logical_lines

SRC, STOKE, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
ONLY = sys.argv[4:]
BUILD = os.path.dirname(STOKE)
PAGES = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(SRC, "docs"))
                               if f.endswith(".md")) + ["CONTRIBUTING.md"]
# docs/cli.md is the help texts (cli_reference checks it); MEASUREMENTS.md
# holds recorded output only.
PAGES = [p for p in PAGES if p not in ("docs/cli.md", "docs/MEASUREMENTS.md")]

# The files pages use without making them: name in the page -> what it is.
FM_TRAIN, FM_TEST = "fm-train.stoke", "fm-test.stoke"
DATA = {
    "README.md": {},
    "docs/datasets.md": {"photos": "photos-with-a-bad-file", "mutant.stoke": "mutant.stoke",
                         "mutant2.stoke": "mutant2.stoke", "flipped.stoke": "flipped.stoke"},
    "docs/distributed.md": {"train.stoke": FM_TRAIN, "test.stoke": FM_TEST},
    "docs/export.md": {"train.stoke": "photos-144.stoke", "val.stoke": "photos-144.stoke",
                       "photos": "photos-144", "photo.jpg": "photos-144/cat/cat_000.jpg"},
    "docs/gpu.md": {"train.stoke": FM_TRAIN, "test.stoke": FM_TEST},
    "docs/install.md": {"train.stoke": FM_TRAIN, "test.stoke": FM_TEST},
    "docs/loader.md": {"jpeg6k.stoke": "photos.stoke"},
    "docs/models.md": {"demo-data/fmnist-train.stoke": FM_TRAIN,
                       "demo-data/fmnist-test.stoke": FM_TEST, "train.stoke": FM_TRAIN},
    "docs/observability.md": {"train.stoke": FM_TRAIN, "test.stoke": FM_TEST},
    "docs/training.md": {"fmnist-train.stoke": FM_TRAIN, "photos.stoke": "photos-48.stoke",
                         "val.stoke": "photos-48.stoke"},
    "docs/transforms.md": {"jpeg6k.stoke": "photos.stoke"},
    "docs/tune.md": {"fmnist-train.stoke": FM_TRAIN, "fmnist-test.stoke": FM_TEST},
}

# The only changes to the text (and TORCH_1_13 below): Debian's
# Fashion-MNIST -> its 256-image cut; no internet in CI: torchvision's random weights instead of the
# downloaded ones (the same file, the same names); and at most EPOCHS
# epochs a run (`stoke train` and `stoke tune` lines; given where a line
# has no --epochs): the same code, a minute for all pages.
REWRITE = [("/usr/share/datasets/fashion-mnist", "{small}"),
           ('weights="DEFAULT"', "weights=None")]
EPOCHS = 1
# torch 1.13 (Debian's, which CI has) has only the exporter that torch 2's
# dynamo=False selects, and no such keyword: dropped there.
TORCH_1_13 = """import functools as _functools, torch as _torch
if int(_torch.__version__.split(".")[0]) < 2:
    _export = _torch.onnx.export
    _torch.onnx.export = _functools.wraps(_export)(lambda *a, dynamo=False, **k: _export(*a, **k))
"""


def fewer_epochs(line, add=True):
    """line with its runs cut to EPOCHS epochs (add: --epochs where it has none)."""
    if not re.search(r"\bstoke (train|tune)\b", line) and "--epochs" not in line:
        return line
    if "--epochs" not in line:
        if not add:
            return line
        return re.sub(r"\bstoke (train|tune)\b", rf"\g<0> --epochs {EPOCHS}", line, count=1)
    return re.sub(r"--epochs (\d+)", lambda m: f"--epochs {min(int(m.group(1)), EPOCHS)}", line)

SUITE = "the build or the test suite itself (this test runs inside make test)"
SKIP = [
    (r"^make (demo|test|test-[a-z]+|format|reference)\b", SUITE),
    (r"^(scripts/install-deps\.sh|cmake -S |cmake --build |cd build && ctest)", SUITE),
    (r"pip install \.", "builds and installs the wheel: cli_pip_install does"),
    (r"^tensorboard ", "starts a server: cli_tensorboard checks the event files"),
    (r"^srun ", "needs Slurm"),
    (r"^scripts/gpu-check\.sh|--device cuda", "needs an NVIDIA GPU"),
]


def log(*a):
    print(*a, flush=True)


def make_data(d, python):
    """The data every page draws from, made once in d."""
    os.makedirs(d, exist_ok=True)
    fixtures = os.environ["STOKE_FIXTURES"]
    small = os.path.join(d, "fashion-mnist")
    subprocess.run([python, os.path.join(SRC, "tests/docs/cut_idx.py"),
                    "/usr/share/datasets/fashion-mnist", small, "256", "128"], check=True)
    run = lambda *a: subprocess.run([STOKE, *a], cwd=d, check=True, capture_output=True)
    run("pack", "--from", "idx", small, FM_TRAIN)
    run("pack", "--from", "idx", "--split", "test", small, FM_TEST)
    shutil.copytree(os.path.join(fixtures, "good"), os.path.join(d, "photos"))
    shutil.copytree(os.path.join(fixtures, "good"), os.path.join(d, "photos-with-a-bad-file"))
    os.makedirs(os.path.join(d, "photos-with-a-bad-file/broken"))
    shutil.copy(os.path.join(fixtures, "bad/truncated.jpg"),
                os.path.join(d, "photos-with-a-bad-file/broken/IMG_0042.jpg"))
    run("pack", "photos", "photos.stoke")
    # photos enough for a batch of 128 (stoke train's default), and fewer
    for n in (48, 16):
        subprocess.run([python, os.path.join(SRC, "tests/docs/make_photos.py"),
                        os.path.join(d, f"photos-{3 * n}"), str(n)], check=True)
        run("pack", f"photos-{3 * n}", f"photos-{3 * n}.stoke")
    subprocess.run([python, os.path.join(SRC, "tests/docs/damage.py"), "photos.stoke"], cwd=d,
                   check=True)
    return small


def sandbox(page, data, python):
    box = os.path.join(WORK, page.replace("/", "_").removesuffix(".md"))
    os.makedirs(os.path.join(box, "bin"))
    os.symlink(STOKE, os.path.join(box, "bin/stoke"))
    with open(os.path.join(box, "bin/python3"), "w") as f:
        f.write(f'#!/bin/sh\nexec "{python}" "$@"\n')
    os.chmod(os.path.join(box, "bin/python3"), 0o755)
    os.symlink(BUILD, os.path.join(box, "build"))
    for name in ("examples", "scripts", "tests"):
        os.symlink(os.path.join(SRC, name), os.path.join(box, name))
    for name, source in DATA.get(page, {}).items():
        dst = os.path.join(box, name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        src = os.path.join(data, source)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, dst)
    return box


def skip_reason(line):
    for pattern, reason in SKIP:
        if re.search(pattern, line.strip()):
            return reason
    if os.environ.get("STOKE_HAVE_MPI", "ON") != "ON" and re.match(r"\s*mpirun ", line):
        return "no MPI in this build"
    return None


def code_of(line):
    """A line of C or Python without its comment, its spaces evened."""
    line = re.sub(r"/\*.*?\*/\s*$|\s//\s.*$|^\s*#\s.*$|\s\s#\s.*$", "", line.rstrip())
    return " ".join(line.split())


class Page:
    def __init__(self, page, box, env, python):
        self.page, self.box, self.env, self.python = page, box, env, python
        self.ran = self.skipped = 0
        self.failed, self.reasons, self.python_so_far = [], {}, ""

    def fail(self, no, what, r=None):
        detail = ""
        if r is not None:
            detail = "\n    " + "\n    ".join(((r.stdout or "") + (r.stderr or "")).strip()
                                              .split("\n")[-8:])
        self.failed.append(f"{self.page}:{no}: {what}{detail}")

    def skip(self, reason):
        self.skipped += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def shell(self, no, text):
        keep = text.split("\n")
        logical = logical_lines(text)
        in_heredoc = None
        for start, end, line in logical:
            if in_heredoc:
                if line.strip() == in_heredoc:
                    in_heredoc = None
                continue
            m = re.search(r"<<-?'?(\w+)'?", line)
            if m:
                in_heredoc = m.group(1)
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            reason = skip_reason(line)
            if reason:
                self.skip(reason)
                keep[start:end + 1] = [": skipped"] + [""] * (end - start)
            else:
                self.ran += 1
                if "--epochs" not in line:  # (where the flag is on another line, it stays there)
                    keep[start] = fewer_epochs(keep[start])
                else:
                    keep[start:end + 1] = [fewer_epochs(k, False) for k in keep[start:end + 1]]
        r = subprocess.run(["sh", "-e", "-x", "-c", "\n".join(keep)], cwd=self.box, env=self.env,
                           capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            self.fail(no, f"the block exits {r.returncode}", r)

    def console(self, no, text):
        lines = text.split("\n")
        last = None
        for i, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            cmd = line[2:]
            shown = []
            for out in lines[i + 1:]:
                if out.startswith("$ "):
                    break
                shown.append(out)
            if cmd.strip() == "echo $?":
                if last is not None and shown and shown[0].strip() != str(last.returncode):
                    self.fail(no + i, f"exit status {last.returncode}, the page shows {shown[0]}")
                continue
            reason = skip_reason(cmd)
            if reason:
                self.skip(reason)
                continue
            self.ran += 1
            last = r = subprocess.run(["sh", "-c", fewer_epochs(cmd)], cwd=self.box, env=self.env,
                                      capture_output=True, text=True, timeout=900)
            errors = [s for s in shown if s.startswith("stoke: ") and
                      not s.startswith(("stoke: warning", "stoke: wrote"))]
            status = [j for j in range(i + 1, len(lines)) if lines[j].startswith("$ ")][:1]
            shows_1 = status and lines[status[0]] == "$ echo $?" and \
                status[0] + 1 < len(lines) and lines[status[0] + 1].strip() == "1"
            if r.returncode not in (0, 1) or (r.returncode == 1) != bool(errors or shows_1):
                self.fail(no + i, f"`{cmd}` exits {r.returncode}", r)
            for e in errors:
                if e.split(" (")[0] not in r.stderr:
                    self.fail(no + i, f"`{cmd}` does not print `{e.split(' (')[0]}`", r)

    def run_python(self, no, text):
        if not os.path.isdir(os.path.join(BUILD, "python", "stoke")) and "stoke" in text:
            return self.skip("no Python module in this build")
        self.ran += 1
        code = self.python_so_far + text
        self.python_so_far = code + "\n"
        if "dynamo=" in code:
            code = TORCH_1_13 + code
        r = subprocess.run([self.python, "-"], input=code, cwd=self.box, env=self.env,
                           capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            self.fail(no, "the Python block fails", r)

    def excerpt(self, no, path, text):
        """text's lines, in order, in path: whitespace and comments at the
        ends of lines aside; `...` lines and comment lines stand for lines
        left out."""
        self.ran += 1
        try:
            have = [code_of(s) for s in open(os.path.join(SRC, path), encoding="utf-8")]
        except OSError as e:
            return self.fail(no, f"excerpt of {path}: {e}")
        at = 0
        for k, line in enumerate(text.split("\n")):
            want = code_of(line)
            if not want or want == "...":
                continue
            while at < len(have) and have[at] != want:
                at += 1
            if at == len(have):
                return self.fail(no + k, f"not in {path} (in this order): {line.strip()}")
            at += 1


def main():
    python = os.environ.get("STOKE_VENV_PYTHON") or "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        python = "/usr/bin/python3"
    if os.path.isdir(WORK):
        shutil.rmtree(WORK)
    data = os.path.join(WORK, "data")
    small = make_data(data, python)
    pymod = os.path.join(BUILD, "python")
    devices = json.loads(subprocess.run([STOKE, "devices", "--json"], capture_output=True,
                                        text=True, check=True).stdout)
    if not devices.get("cpu_bf16"):  # (an AVX2-only CPU, or DNNL_MAX_CPU_ISA)
        SKIP.append((r"--amp\b(?!.*--device cuda)", "needs a CPU with bf16 instructions"))
    total_ran = total_skipped = 0
    failed, reasons = [], {}
    for page in ONLY or PAGES:
        t0 = time.time()
        box = sandbox(page, data, python)
        env = dict(os.environ, PATH=os.path.join(box, "bin") + ":" + os.environ["PATH"],
                   HOME=box, PYTHONPATH=pymod, STOKE_PROGRESS="plain",
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        p = Page(page, box, env, python)
        text = open(os.path.join(SRC, page), encoding="utf-8").read()
        for old, new in REWRITE:
            text = text.replace(old, new.format(small=small))
        for lang, source, no, body in blocks(text):
            if source:
                p.excerpt(no, source, body)
            elif lang in ("sh", "bash"):
                p.shell(no, body)
            elif lang == "console":
                p.console(no, body)
            elif lang == "python":
                p.run_python(no, body)
        log(f"{page}: {p.ran} run, {p.skipped} skipped, {len(p.failed)} failed "
            f"({time.time() - t0:.1f} s)")
        total_ran += p.ran
        total_skipped += p.skipped
        failed += p.failed
        for k, v in p.reasons.items():
            reasons[k] = reasons.get(k, 0) + v
    for f in failed:
        log("FAIL " + f)
    log(f"docs: {total_ran} commands and blocks run, {len(failed)} failed; {total_skipped} "
        f"skipped: " + "; ".join(f"{v} {k}" for k, v in sorted(reasons.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
