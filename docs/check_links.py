#!/usr/bin/python3
"""Checks the relative links and #anchors of Markdown files.

    check_links.py [--root DIR] [FILE.md ...]

With no FILE, checks every *.md file tracked by git under DIR (the repository root; default: two
levels above this script's real path), except third_party/. A link is checked when its target has
no URL scheme (http:, mailto:, ...): the path, relative to the linking file (or to DIR when it
starts with "/"), must exist inside DIR, and an #anchor must name a heading (GitHub's slug rules)
or an explicit <a id="..."> / <a name="..."> of the target Markdown file. Links inside fenced code
blocks and inline code spans are ignored. With no FILE it also checks every citation of the form
docs/NAME.md#anchor in the other tracked text files (code comments, BUILD files, scripts). Prints
one line per broken link, "FILE:LINE: target: why", and exits 1 when there is any, else 0.
Standard library only.
"""

import os
import re
import subprocess
import sys

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)\s*=\s*\"([^\"]+)\"", re.IGNORECASE)
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_CITATION = re.compile(r"\bdocs/([\w.-]+\.md)(?:#([\w-]+))?")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def github_slug(text):
    """The anchor GitHub gives a heading with this (Markdown) text, before de-duplication."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images -> their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _lines_outside_code(text):
    """Yields (line number, line) of lines outside fenced code blocks, code spans blanked."""
    fence = None
    for number, line in enumerate(text.splitlines(), start=1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
            continue
        yield number, _CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line)


def anchors_of(text):
    """Every anchor a Markdown document defines: heading slugs (with GitHub's -1, -2 suffixes for
    repeats) and explicit <a id/name> anchors."""
    anchors, seen = set(), {}
    fence = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
            continue
        anchors.update(_EXPLICIT_ANCHOR.findall(line))
        h = _HEADING.match(line)
        if h:
            slug = github_slug(h.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else "%s-%d" % (slug, n))
    return anchors


def links_of(text):
    """(line number, target) of every link in a Markdown document, outside code."""
    for number, line in _lines_outside_code(text):
        for m in _INLINE_LINK.finditer(line):
            yield number, m.group(1)
        r = _REF_DEF.match(line)
        if r:
            yield number, r.group(1)


def check_file(path, root, anchor_cache):
    """Broken links of one file as (line, target, why)."""
    root = os.path.realpath(root)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    problems = []
    for number, target in links_of(text):
        if not target or _SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        if file_part.startswith("/"):
            resolved = os.path.normpath(os.path.join(root, file_part.lstrip("/")))
        elif file_part:
            resolved = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(path)),
                                                     file_part))
        else:
            resolved = os.path.realpath(path)
        if resolved != root and not resolved.startswith(root + os.sep):
            problems.append((number, target, "points outside the repository"))
            continue
        if not os.path.exists(resolved):
            problems.append((number, target, "no such file or directory"))
            continue
        if not anchor:
            continue
        if not resolved.endswith(".md") or os.path.isdir(resolved):
            problems.append((number, target, "an #anchor needs a Markdown file"))
            continue
        if resolved not in anchor_cache:
            with open(resolved, encoding="utf-8") as f:
                anchor_cache[resolved] = anchors_of(f.read())
        if anchor not in anchor_cache[resolved]:
            problems.append((number, target, "no heading or anchor '%s' in %s" %
                             (anchor, os.path.relpath(resolved, root))))
    return problems


def check_citations(root, files, anchor_cache):
    """Broken docs/NAME.md[#anchor] citations in `files` (paths relative to root) as
    (file, line, target, why). Files that are not UTF-8 text are skipped."""
    problems = []
    for name in files:
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for m in _CITATION.finditer(line):
                doc = os.path.join(root, "docs", m.group(1))
                target = m.group(0)
                if not os.path.isfile(doc):
                    problems.append((name, number, target, "no such file"))
                    continue
                if m.group(2) is None:
                    continue
                if doc not in anchor_cache:
                    with open(doc, encoding="utf-8") as f:
                        anchor_cache[doc] = anchors_of(f.read())
                if m.group(2) not in anchor_cache[doc]:
                    problems.append((name, number, target, "no heading or anchor '%s' in docs/%s"
                                     % (m.group(2), m.group(1))))
    return problems


def tracked_files(root, pattern=None):
    """Files tracked by git under root (all, or those matching the git pathspec `pattern`), as
    paths relative to root; None when root is not the top of a git checkout."""
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"], check=True,
                             capture_output=True).stdout.decode().strip()
        if os.path.realpath(top) != os.path.realpath(root):
            return None
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--"] +
                             ([pattern] if pattern else []),
                             check=True, capture_output=True).stdout.decode()
        return [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        return None


def tracked_markdown(root):
    """Tracked *.md files under root (git ls-files when root is the top of a git checkout, else a
    directory walk), third_party/ excluded, as paths relative to root."""
    files = tracked_files(root, "*.md")
    if files is None:  # Not the top of a git checkout: walk the tree.
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".", "bazel-"))]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(".md")]
    return sorted(f for f in files if not f.startswith("third_party/"))


def main(argv):
    args = argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if len(args) >= 2 and args[0] == "--root":
        root, args = args[1], args[2:]
    files = [os.path.join(root, f) for f in tracked_markdown(root)] if not args else args
    if not files:
        print("check_links: no Markdown files found under %s" % root, file=sys.stderr)
        return 1
    cache, broken = {}, 0
    for path in files:
        for number, target, why in check_file(path, root, cache):
            print("%s:%d: %s: %s" % (os.path.relpath(path, root), number, target, why))
            broken += 1
    if not args:
        others = [f for f in (tracked_files(root) or [])
                  if not f.startswith(("third_party/", "docs/check_links")) and
                  not f.endswith(".md")]
        for name, number, target, why in check_citations(root, others, cache):
            print("%s:%d: %s: %s" % (name, number, target, why))
            broken += 1
    print("check_links: %d files, %d broken links" % (len(files), broken))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
