"""The fenced blocks of a Markdown page and their logical lines, for the docs
checks (check_commands.py parses their stoke commands, run_docs.py runs
them)."""
import re

# ```LANG [SOURCE]: SOURCE names the file a block is an excerpt of
FENCE = re.compile(r"^```([a-z]*)[ \t]*([^\n`]*)\n(.*?)^```", re.M | re.S)


def blocks(text):
    """(lang, source, the body's first line number, body) of each block."""
    for m in FENCE.finditer(text):
        yield m.group(1), m.group(2).strip(), text.count("\n", 0, m.start(3)) + 1, m.group(3)


def without_blocks(text):
    """text with every block's lines blanked (line numbers kept)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def logical_lines(body):
    """(first index, last index, the line with its `\\` continuations joined)."""
    lines, out, i = body.split("\n"), [], 0
    while i < len(lines):
        start, line = i, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i]
        out.append((start, i, line))
        i += 1
    return out
