"""Every relative link in README.md, CONTRIBUTING.md and docs/*.md points to
a file of the checkout, and a #anchor to one of that page's headings
(GitHub's anchors: lower case, punctuation but hyphens dropped, spaces as
hyphens, -1, -2 ... for repeats).

    check_links.py SRC_DIR
"""
import glob
import os
import re
import sys

from markdown_blocks import without_blocks

SRC = sys.argv[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path):
    seen, out = {}, set()
    text = without_blocks(open(path, encoding="utf-8").read())
    for m in re.finditer(r"^#{1,6} (.+)$", text, re.M):
        a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower().replace("`", "")).replace(" ", "-")
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


def main():
    pages = [os.path.join(SRC, p) for p in ("README.md", "CONTRIBUTING.md")]
    pages += sorted(glob.glob(os.path.join(SRC, "docs", "*.md")))
    bad, checked = [], 0
    for page in pages:
        text = without_blocks(open(page, encoding="utf-8").read())
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            checked += 1
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
            rel = os.path.relpath(page, SRC)
            if not os.path.exists(dest):
                bad.append(f"{rel}: {target}: no such file")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad.append(f"{rel}: {target}: no heading #{anchor} in {os.path.relpath(dest, SRC)}")
    for b in bad:
        print(b)
    print(f"links: {checked} checked, {len(bad)} broken")
    return 1 if bad or checked < 50 else 0


if __name__ == "__main__":
    sys.exit(main())
