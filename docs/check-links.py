#!/usr/bin/env python3
"""Broken-link check for the book (docs/src) and README.md.

Every relative Markdown link `[text](path#anchor)` must name a file that exists, and an
anchor must be a heading of the target page (or of the same page for `#anchor` alone),
slugged as mdBook and GitHub do: lowercase, punctuation dropped except `-` and `_`, each
space a `-`, and a repeated heading given `-1`, `-2`... Links with a scheme (https:,
mailto:) are not checked. Exits 1 listing every broken link, 0 when all resolve.

    python3 docs/check-links.py              # from anywhere in the repository
    python3 docs/check-links.py --self-test  # the slug and link parsing on known cases
"""

import os
import re
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the target ends at the first space or ')'.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target (reference definitions)
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HTML_ID = re.compile(r"""<a\s+(?:name|id)\s*=\s*["']([^"']+)["']""")


def slug(heading):
    """The anchor mdBook (and GitHub) give a heading's text."""
    text = re.sub(r"<[^>]+>", "", heading)  # inline HTML
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = text.replace("`", "")
    text = unicodedata.normalize("NFC", text).strip().lower()
    out = []
    for ch in text:
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def strip_code(line):
    return INLINE_CODE.sub("", line)


def parse(text):
    """(anchors, links) of a Markdown text; links as (line number, target)."""
    anchors, links, seen = set(), [], {}
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is not None:
            continue
        h = HEADING.match(line)
        if h:
            s = slug(h.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            anchors.add(s if k == 0 else f"{s}-{k}")
        for a in HTML_ID.findall(line):
            anchors.add(a)
        bare = strip_code(line)
        for m in LINK.finditer(bare):
            links.append((n, m.group(1)))
        r = REFDEF.match(bare)
        if r:
            links.append((n, r.group(1)))
    return anchors, links


def files():
    out = [os.path.join(ROOT, "README.md")]
    for d, _, names in os.walk(os.path.join(ROOT, "docs", "src")):
        out += [os.path.join(d, f) for f in sorted(names) if f.endswith(".md")]
    return out


def check(paths):
    cache, broken = {}, []

    def anchors_of(path):
        if path not in cache:
            with open(path, encoding="utf-8") as f:
                cache[path] = parse(f.read())
        return cache[path][0]

    for path in paths:
        anchors_of(path)
        for n, target in cache[path][1]:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto:
                continue
            where = f"{os.path.relpath(path, ROOT)}:{n}: {target}"
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                broken.append(f"{where}: no such file {os.path.relpath(dest, ROOT)}")
                continue
            if anchor:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    continue  # anchors into source files are not headings
                if anchor not in anchors_of(dest):
                    broken.append(f"{where}: no heading #{anchor} in {os.path.relpath(dest, ROOT)}")
    return broken


def self_test():
    cases = {
        "Two commands": "two-commands",
        "Find your own server's knee": "find-your-own-servers-knee",
        "`loadlab run`: one URL": "loadlab-run-one-url",
        'How achieved throughput and "sustained" are computed': "how-achieved-throughput-and-sustained-are-computed",
        "The JVM actor app (`targets/jvm-actors`)": "the-jvm-actor-app-targetsjvm-actors",
        "gRPC and HTTP/2: `bench/grpc.sh`": "grpc-and-http2-benchgrpcsh",
        "snake_case and kebab-case": "snake_case-and-kebab-case",
        "Où ça casse": "où-ça-casse",
        "A [link](x.md) inside": "a-link-inside",
    }
    failed = [(h, slug(h), want) for h, want in cases.items() if slug(h) != want]
    text = (
        "# Title\n## Title\n[a](other.md#x) `[not](code.md)` ![img](p.png)\n"
        "```\n[in](fence.md)\n# not a heading\n```\n[ref]: ref.md#y\n"
    )
    anchors, links = parse(text)
    if anchors != {"title", "title-1"}:
        failed.append(("anchors", anchors, {"title", "title-1"}))
    want_links = [(3, "other.md#x"), (3, "p.png"), (8, "ref.md#y")]
    if links != want_links:
        failed.append(("links", links, want_links))
    for f in failed:
        print("FAIL", *f, sep="\n  ")
    print("self-test:", "failed" if failed else f"ok ({len(cases)} slugs, parsing)")
    return 1 if failed else 0


def main():
    if "--self-test" in sys.argv[1:]:
        return self_test()
    paths = files()
    broken = check(paths)
    for b in broken:
        print(b)
    print(f"{len(paths)} files, {len(broken)} broken links", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
