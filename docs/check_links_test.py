#!/usr/bin/python3
"""Unit tests of check_links.py on small fixtures written to a temporary directory."""

import os
import tempfile
import unittest

import check_links

_GOOD = """# Title

## BOCD
## Period (ACF)
## S1-S4 and `micro_batch`
## Repeat
## Repeat
<a id="explicit"></a>

[self](#bocd) [acf](#period-acf) [code](#s1-s4-and-micro_batch) [dup](#repeat-1)
[other](other.md#target) [dir](sub/) [explicit](#explicit) [web](https://example.com/x#y)
![img](sub/pic.png) [abs](/other.md)

[ref]: other.md#target

```
[in a fence](missing.md)
```
Inline `[code](missing.md)` is not a link.
"""

_BROKEN = """# Broken

[file](missing.md)
[anchor](other.md#nowhere)
[own anchor](#nope)
[outside](../outside.md)
[anchor on a directory](sub/#x)
[ref]: gone.md
"""


class CheckLinksTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, "sub"))
        self._write("other.md", "# Other\n\n## Target\n")
        self._write("sub/pic.png", "png")
        self._write("good.md", _GOOD)
        self._write("broken.md", _BROKEN)

    def tearDown(self):
        self.tmp.cleanup()

    def _write(self, name, text):
        with open(os.path.join(self.root, name), "w", encoding="utf-8") as f:
            f.write(text)

    def _check(self, name):
        return check_links.check_file(os.path.join(self.root, name), self.root, {})

    def test_slugs_follow_github(self):
        self.assertEqual(check_links.github_slug("Period (ACF)"), "period-acf")
        self.assertEqual(check_links.github_slug("S2 micro-batch solver"), "s2-micro-batch-solver")
        self.assertEqual(check_links.github_slug("1F1B cost model"), "1f1b-cost-model")
        self.assertEqual(check_links.github_slug("`micro_batch` and **bold**"),
                         "micro_batch-and-bold")
        self.assertEqual(check_links.github_slug("[Link](x.md) text"), "link-text")

    def test_good_links_pass(self):
        self.assertEqual(self._check("good.md"), [])

    def test_every_broken_link_is_reported(self):
        problems = self._check("broken.md")
        self.assertEqual([(line, target) for line, target, _ in problems],
                         [(3, "missing.md"), (4, "other.md#nowhere"), (5, "#nope"),
                          (6, "../outside.md"), (7, "sub/#x"), (8, "gone.md")])
        self.assertIn("no such file", problems[0][2])
        self.assertIn("no heading or anchor 'nowhere'", problems[1][2])
        self.assertIn("outside the repository", problems[3][2])

    def test_main_fails_on_a_broken_file_and_passes_on_good_ones(self):
        good = os.path.join(self.root, "good.md")
        broken = os.path.join(self.root, "broken.md")
        self.assertEqual(check_links.main(["check_links", "--root", self.root, good]), 0)
        self.assertEqual(check_links.main(["check_links", "--root", self.root, good, broken]), 1)

    def test_main_walks_the_tree_without_git(self):
        # Not a git repository: every *.md file is found by walking, broken.md among them.
        self.assertEqual(check_links.main(["check_links", "--root", self.root]), 1)
        os.remove(os.path.join(self.root, "broken.md"))
        self.assertEqual(check_links.main(["check_links", "--root", self.root]), 0)

    def test_citations_in_code_are_checked(self):
        os.makedirs(os.path.join(self.root, "docs"))
        self._write("docs/algorithms.md", "# Algorithms\n\n## BOCD\n")
        self._write("code.h", "// BOCD (docs/algorithms.md#bocd), see docs/algorithms.md.\n"
                    "// Gone: docs/algorithms.md#acf and docs/missing.md#x.\n")
        problems = check_links.check_citations(self.root, ["code.h"], {})
        self.assertEqual([(name, line, target) for name, line, target, _ in problems],
                         [("code.h", 2, "docs/algorithms.md#acf"),
                          ("code.h", 2, "docs/missing.md#x")])


if __name__ == "__main__":
    unittest.main()
