"""``# noqa`` in shell scripts: comments as bash finds them."""

from __future__ import annotations

from xla_lint.diagnostics import Diagnostic, OptionCheck
from xla_lint.results import FileResult, result_from_json, result_to_json
from xla_lint.sources.suppress import find_shell_suppressions


def test_comments_outside_quotes_only():
    text = (
        "export A=1  # noqa: XLA304\n"
        "echo '# noqa: XLA013' \"# noqa\"\n"
        "echo x#noqa\n"  # not a comment: '#' inside a word
        "python t.py;# noqa\n"
    )
    found = find_shell_suppressions(text)
    assert sorted(found.noqa) == [1, 4]
    assert found.noqa[1].codes == {"XLA304"} and found.noqa[4].codes is None
    assert found.suppresses("XLA304", 1) and not found.suppresses("XLA013", 1)
    assert not found.suppresses("XLA013", 2)


def test_continued_command_takes_the_comment_of_its_last_line():
    text = "python -m torch_xla.distributed.xla_dist \\\n  --tpu=x \\\n  -- python t.py  # noqa: XLA013\n"
    found = find_shell_suppressions(text)
    assert found.suppresses("XLA013", 1) and not found.suppresses("XLA013", 3)


def test_quote_left_open_continues_on_the_next_line():
    text = 'gcloud ssh n --command "python t.py\n  # noqa: XLA013 inside the string"\nls  # noqa: XLA304\n'
    found = find_shell_suppressions(text)
    assert sorted(found.noqa) == [3]


def test_disable_file():
    found = find_shell_suppressions("#!/bin/bash\n# xla-lint: disable-file=XLA304\n")
    assert found.suppresses("XLA304", 9) and not found.suppresses("XLA013", 9)


def test_launch_and_option_checks_survive_the_result_cache():
    check = OptionCheck("--num_cores", "int", ("1",), "`nprocs` is {value} ({where})", keep=True)
    d = Diagnostic("XLA019", "spawn-nprocs", "m", "a.py", 3, 5, 3, 9, option=check)
    s = Diagnostic(
        "XLA007",
        "spmd-multiprocess-launch",
        "m",
        "run.sh",
        1,
        1,
        1,
        9,
        requires=(("spmd", True),),
        launch="run.sh:1",
    )
    back = result_from_json(result_to_json(FileResult("a.py", [d, s])))
    assert back.diagnostics == [d, s]
