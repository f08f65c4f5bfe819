#!/usr/bin/python3
"""Unit tests of check_namespaces.py on small fixtures written to a temporary directory."""

import os
import tempfile
import unittest

import check_namespaces

_FILES = {
    # Good: the folder's namespace, a nested helper namespace, an anonymous namespace, another
    # project's namespace, a forward declaration of another folder's class, a string and a comment.
    "a/b/good.h": """// namespace falcon::wrong { in a comment
namespace grpc { class Channel; }
namespace falcon::a::c {
class Other;
}  // namespace falcon::a::c
namespace falcon::a::b {
namespace {
const char* k = "namespace falcon::wrong {";
}
namespace table_internal { int x; }
struct S { int f() { return 1; } };
}  // namespace falcon::a::b
""",
    "a/b/nested_style.cc": "namespace falcon {\nnamespace a {\nnamespace b {\nint y;\n}\n}\n}\n",
    "top.cc": "namespace falcon {\nint z;\n}  // namespace falcon\n",
    "a/b/c/.keep": "",
    # Bad: a parent folder's namespace, another folder's, a subfolder's, code in an enclosing one.
    "a/b/parent.cc": "namespace falcon::a {\nint bad;\nnamespace {\nint c;\n}\n}  // namespace falcon::a\n",
    "a/b/other.h": "#pragma once\nnamespace falcon::x::b {\nstruct T {};\n}\n",
    "a/b/sub.cc": "namespace falcon::a::b::c {\nvoid F() {}\n}\n",
    "a/b/enclosing.cc": "namespace falcon {\nint w;\nnamespace a::b {\n}\n}\n",
}


class CheckNamespacesTest(unittest.TestCase):

    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.root = self._dir.name
        for name, text in _FILES.items():
            os.makedirs(os.path.join(self.root, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(self.root, name), "w") as f:
                f.write(text)

    def tearDown(self):
        self._dir.cleanup()

    def check(self, name):
        return list(check_namespaces.check_file(self.root, name))

    def test_expected_namespace(self):
        self.assertEqual(check_namespaces.expected_namespace("controller/store/keys.h"),
                         "falcon::controller::store")
        self.assertEqual(check_namespaces.expected_namespace("main.cc"), "falcon")

    def test_good_files_pass(self):
        for name in ("a/b/good.h", "a/b/nested_style.cc", "top.cc"):
            self.assertEqual(self.check(name), [], name)

    def test_bad_files_fail_naming_the_namespace(self):
        self.assertEqual(self.check("a/b/parent.cc"), [(1, "falcon::a", "falcon::a::b")])
        self.assertEqual(self.check("a/b/other.h"), [(2, "falcon::x::b", "falcon::a::b")])
        self.assertEqual(self.check("a/b/sub.cc"), [(1, "falcon::a::b::c", "falcon::a::b")])
        self.assertEqual(self.check("a/b/enclosing.cc"), [(1, "falcon", "falcon::a::b")])

    def test_main_names_each_bad_file_and_fails(self):
        bad = ["a/b/parent.cc", "a/b/other.h"]
        self.assertEqual(check_namespaces.main(["x", "--root", self.root] + bad), 1)
        self.assertEqual(check_namespaces.main(["x", "--root", self.root, "a/b/good.h"]), 0)


if __name__ == "__main__":
    unittest.main()
