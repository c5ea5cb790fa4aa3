"""Every `stoke` command in README.md and docs/*.md, taken from their shell
blocks (```sh, ```bash, ```console's "$ " lines, and in unlabelled blocks
the lines that start `stoke COMMAND`: not the output), parsed by today's flag
tables: run with STOKE_PARSE_ONLY=1 (tools/flags.h), so a renamed or
removed flag, a value out of range or a wrong number of arguments in the
docs fails this test. A line whose flags use shell variables other than the
docs' own ($S, $F) is counted as not checked; the README's quick start and
Python loop also run in full (tests/cli/test_docs.sh).

    check_commands.py SRC_DIR STOKE
"""
import glob
import os
import re
import shlex
import subprocess
import sys

from markdown_blocks import blocks, logical_lines, without_blocks

SRC, STOKE = sys.argv[1], sys.argv[2]
STOKE_WORDS = {"stoke", "build/stoke", "./build/stoke", "BUILD/stoke", "$S", "$STOKE",
               "$B/stoke", "PREFIX/bin/stoke", "~/.local/bin/stoke"}
CUT = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "&"}


SHELL = ("sh", "bash", "shell", "console", "")


def commands(path):
    for lang, source, first, body in blocks(open(path, encoding="utf-8").read()):
        if lang not in SHELL or source:
            continue
        for i, _, line in logical_lines(body):
            if lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            yield first + i, line, lang == ""


INLINE = re.compile(r"`((?:build/)?stoke [a-z][^`]*)`")
# a template's placeholder (N, FILE, DATA.stoke, RUNDIR/last.safetensors, [OPTIONS])
PLACEHOLDER = re.compile(r"^(\[?[A-Z][A-Z0-9_]*\]?)([.:/|=].*)?$|^--[a-z-]+=[A-Z][A-Z0-9_]*$")


def inline_commands(path):
    """`stoke COMMAND ...` code spans in the prose (outside the blocks)."""
    text = without_blocks(open(path, encoding="utf-8").read())
    for no, line in enumerate(text.split("\n"), 1):
        for m in INLINE.finditer(line):
            yield no, m.group(1), True


def stoke_args(line, strict, names):
    """The arguments after the stoke binary, or None when the line runs no
    stoke (strict: an unlabelled block's line must start with stoke and one
    of its command names)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    if strict and not (len(words) > 1 and words[0] in STOKE_WORDS and words[1] in names):
        return None
    for k, w in enumerate(words):
        if w in STOKE_WORDS or w.endswith("/stoke") and not w.endswith(".stoke"):
            args = []
            for a in words[k + 1:]:
                if a in CUT or a.startswith(">") or a.startswith("2>"):
                    break
                if a not in ("...", "[...]", "…"):  # the docs' elisions
                    args.append(a)
            return args
    return None


def main():
    files = [os.path.join(SRC, "README.md")] + sorted(glob.glob(os.path.join(SRC, "docs", "*.md")))
    checked = skipped = templates = 0
    failed = []
    env = dict(os.environ, STOKE_PARSE_ONLY="1")
    names = set(subprocess.run([STOKE, "help", "--commands"], capture_output=True, text=True,
                               check=True).stdout.split()) | {"help", "--version", "--help"}
    for path in files:
        rel = os.path.relpath(path, SRC)
        if rel == "docs/cli.md":  # the help texts themselves
            continue
        spans = [(no, line, True, False) for no, line, _ in inline_commands(path)]
        for no, line, strict, block in [(n, l, s, True) for n, l, s in commands(path)] + spans:
            args = stoke_args(line, strict, names)
            if args is None or not args or (not block and len(args) == 1):
                continue  # (a span naming a command is a mention, not a command)
            if any("$" in a or "`" in a for a in args):
                skipped += 1
                continue
            if any(PLACEHOLDER.match(a) for a in args):
                templates += 1
                continue
            r = subprocess.run([STOKE, *args], env=env, capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=60)
            if not block and "needs a value" in r.stderr:
                continue  # a span naming a flag (`stoke train --val`) is a mention too
            checked += 1
            if r.returncode != 0:
                failed.append(f"{rel}:{no}: stoke {' '.join(args)}\n    {r.stderr.strip()}")
    for f in failed:
        print(f)
    print(f"docs: {checked} stoke commands parsed, {len(failed)} refused; not checked: "
          f"{skipped} with shell variables, {templates} templates (N, FILE, ...)")
    return 1 if failed or checked < 40 else 0


if __name__ == "__main__":
    sys.exit(main())
