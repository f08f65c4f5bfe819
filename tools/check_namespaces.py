#!/usr/bin/python3
"""Checks that C++ namespaces follow folders (docs/architecture.md#code-layout).

    check_namespaces.py [--root DIR] [FILE ...]

The rule: code in a file under folder a/b is in namespace falcon::a::b (a file at the root: falcon).
A namespace nested inside the folder's namespace is allowed (falcon::a::b::x_internal, a table of
constants), unless it is named like a subfolder of a/b, whose code has a namespace of its own. A
block that holds only forward declarations (`class X;`) may name another folder's namespace.
Generated protobuf/gRPC code keeps its proto package (falcon.v1 -> falcon::v1): the package is part
of the wire names; it is generated at build time and never in the tree (*.pb.h / *.pb.cc are
skipped anyway).

With no FILE, checks every *.h, *.cc and *.cu file tracked by git under DIR (default: the
repository holding this script, found through its real path), except third_party/. FILE paths are
taken relative to DIR. Prints one line per offending namespace block, "FILE:LINE: namespace N:
expected E", and exits 1 when there is any, else 0. Standard library only.
"""

import os
import re
import subprocess
import sys

_EXTENSIONS = (".h", ".cc", ".cu")
_NAMESPACE = re.compile(r"\b(?:inline\s+)?namespace\s+((?:\w+\s*::\s*)*\w+)?\s*\{")
_FORWARD_DECL = re.compile(r"\b(?:class|struct|enum\s+class|enum\s+struct)\s+\w+(?:\s*:\s*\w+)?\s*;")


def strip_comments_and_literals(text):
    """text with comments and string/char literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(text[i])
                i += 1
                continue
            j = text.find(")" + m.group(1) + '"', i)
            j = n if j < 0 else j + len(m.group(1)) + 2
        elif text[i] in "\"'" and not (text[i] == "'" and i > 0 and text[i - 1].isalnum()):
            j = i + 1
            while j < n and text[j] != text[i] and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(text[i])
            i += 1
            continue
        out.append("".join(c if c == "\n" else " " for c in text[i:j]))
        i = j
    return "".join(out)


def namespace_blocks(code):
    """Yields (line, full namespace name, body) for every named namespace block of the code."""
    stack = []  # per open brace: (namespace components it adds, start offset, line) or None
    i = 0
    while i < len(code):
        m = _NAMESPACE.match(code, i) if code[i] == "n" or code[i] == "i" else None
        if m and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            parts = re.sub(r"\s", "", m.group(1)).split("::") if m.group(1) else ["{anonymous}"]
            stack.append((parts, m.end(), code.count("\n", 0, i) + 1))
            i = m.end()
            continue
        if code[i] == "{":
            stack.append(None)
        elif code[i] == "}" and stack:
            top = stack.pop()
            if top is not None:
                outer = [p for s in stack if s is not None for p in s[0]]
                yield top[2], "::".join(outer + top[0]), code[top[1]:i]
        i += 1


def only_forward_declarations(body):
    rest = _NAMESPACE.sub(" ", body)
    rest = _FORWARD_DECL.sub(" ", rest).replace("}", " ")
    return not rest.strip()


def expected_namespace(relpath):
    folder = os.path.dirname(relpath)
    return "::".join(["falcon"] + (folder.split("/") if folder else []))


def check_file(root, relpath):
    """Yields (line, namespace, expected) for each namespace block of the file that breaks the
    rule."""
    with open(os.path.join(root, relpath), encoding="utf-8", errors="replace") as f:
        code = strip_comments_and_literals(f.read())
    expected = expected_namespace(relpath)
    folder = os.path.join(root, os.path.dirname(relpath))
    for line, name, body in namespace_blocks(code):
        if name != "falcon" and not name.startswith("falcon::"):
            continue  # another project's namespace (forward declarations of grpc::, gloo::, ...)
        if name.endswith("{anonymous}"):
            continue  # judged with the named namespace around it
        if name == expected:
            continue
        if name.startswith(expected + "::"):
            sub = name[len(expected) + 2:].split("::")[0]
            if sub == "{anonymous}" or not os.path.isdir(os.path.join(folder, sub)):
                continue
        elif expected.startswith(name + "::") and not _strip_nested(body).strip():
            continue  # an enclosing namespace opened only to open the expected one inside
        if only_forward_declarations(body):
            continue
        yield line, name, expected


def _strip_nested(body):
    """body without its nested blocks (what the namespace itself declares)."""
    out, depth = [], 0
    for c in body:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return re.sub(r"\b(?:inline\s+)?namespace\s+[\w:\s]*", " ", "".join(out))


def source_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--"] +
                             ["*" + e for e in _EXTENSIONS],
                             check=True, capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".", "bazel-"))]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(f for f in files if f.endswith(_EXTENSIONS) and not f.startswith("third_party/")
                  and ".pb." not in os.path.basename(f))


def main(argv):
    args = argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if len(args) >= 2 and args[0] == "--root":
        root, args = args[1], args[2:]
    files = args or source_files(root)
    if not files:
        print("check_namespaces: no C++ files found under %s" % root, file=sys.stderr)
        return 1
    bad = 0
    for relpath in files:
        for line, name, expected in check_file(root, relpath):
            print("%s:%d: namespace %s: expected %s (namespaces follow folders)" %
                  (relpath, line, name, expected))
            bad += 1
    print("check_namespaces: %d files, %d namespace blocks off their folder" % (len(files), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
