"""The import scan of files that are not parsed (xla_lint/program/modules.py): one scan of each
``import`` word and one of the line starts give the statements, the entry and the tests that the
line-based rules describe, wherever on a line and in the file they are."""

from __future__ import annotations

from xla_lint.program.modules import import_facts


def test_the_first_line_counts_like_any_other():
    f = import_facts("run.py", b"import data1\nmain()\n")
    assert "data1" in f.imports and f.entry
    assert import_facts("run.py", b"main()\nimport os\n").entry
    assert import_facts("t.py", b"def test_x():\n    import os\n").defines_tests
    assert import_facts("a.py", b"if __name__ == '__main__':\n    import os\n").entry


def test_statements_after_semicolons_and_in_parentheses_are_read_once_each():
    f = import_facts(
        "glue.py",
        b"x = 1; import data1; from data2 import (a,\n    important, b as c)\n"
        b"from .sibling import helper\nfrom importlib import import_module\n",
    )
    assert {"data1", "data2.a", "data2.important", "data2.b", "importlib.import_module"} <= (
        f.imports
    )
    assert "sibling.helper" in f.imports  # a top-level module: relative to its folder
    assert "import_module" not in f.imports and "important" not in f.imports


def test_words_that_only_contain_import_are_no_statements():
    assert import_facts("a.py", b"important = 1\nreimport(x)\n# import data\n") is None
    assert import_facts("a.py", b"if x: import data\n") is None  # not where a statement starts


def test_type_checking_bodies_are_left_out_also_after_a_semicolon():
    f = import_facts(
        "a.py",
        b"from typing import TYPE_CHECKING\nif typing.TYPE_CHECKING:  # types\n"
        b"    import data1; import data2\n\n    from data3 import y\nimport data4\n",
    )
    assert "data4" in f.imports and not {"data1", "data2", "data3"} & f.imports


def test_entry_and_tests_are_decided_by_line_starts_only():
    library = b"import os\nlogger = logging.getLogger(__name__)\nlogger.setLevel(1)\nX = f(1)\n"
    f = import_facts("lib.py", library)
    assert not f.entry  # library idioms, and a call that is not at a line start
    assert import_facts("lib.py", library + b"for i in range(3):\n    pass\n").entry
    assert import_facts("lib.py", library + b"with open('x') as f:\n    pass\n").entry
    assert not import_facts("pkg/__init__.py", library + b"main()\n").entry  # a package
    tests = import_facts("checks.py", b"import os\nclass Checks(unittest.TestCase):\n    pass\n")
    assert tests.defines_tests and not tests.entry
    assert not import_facts("a.py", b"import os\n    def test_x(): pass\n").defines_tests
