"""ImportReach: the top-level definitions a line of a file needs when another module imports it."""

from __future__ import annotations

import ast
import textwrap

from xla_lint.analysis.reach import ENTRY_ONLY, ImportReach

SOURCE = textwrap.dedent(
    """\
    import os

    RANK = int(os.environ.get("RANK", 0))


    def setup():
        return int(os.environ.get("LOCAL_RANK", 0))


    def main():
        setup()


    def helper(x):
        return x


    class Base:
        def rank(self):
            return int(os.environ.get("RANK", 0))


    def registered():
        return 1


    TABLE = {"r": registered}


    @app.command()
    def cli():
        return 2


    def unused_by_module():
        cli()


    if __name__ == "__main__":
        main()
    """
)


def reach(line_text: str) -> tuple[str, ...]:
    lines = SOURCE.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if line_text in text)
    return ImportReach(ast.parse(SOURCE), SOURCE).of(line)


def test_a_function_needs_itself_and_the_definitions_that_name_it():
    assert reach('"LOCAL_RANK"') == ("main", "setup")
    assert reach("return x") == ("helper",)


def test_a_method_needs_its_class():
    assert reach("def rank") == ("Base",)


def test_module_level_code_and_what_it_names_run_at_import():
    assert reach("RANK = int") == ()
    assert reach("return 1") == ()  # TABLE names it at module level


def test_a_decorated_definition_and_its_callers_may_run_at_import():
    assert reach("return 2") == ()
    assert reach("    cli()") == ("unused_by_module",)


def test_the_main_block_runs_only_as_the_entry():
    assert reach("    main()") == ENTRY_ONLY


def test_a_line_between_statements_restricts_nothing():
    source = "def f():\n    pass\n\n# a comment\n"
    assert ImportReach(ast.parse(source), source).of(4) == ()
