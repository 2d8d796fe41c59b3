"""The line-for-line IPython transformation (xla_lint.sources.notebooks.transform_cell), held
against IPython's own ``TransformerManager().transform_cell`` on the same cells.

IPython is in the ``test`` extra only: the linter never imports it. For a cell IPython runs as
Python, both results must agree on whether the cell compiles, and their lines must be the same
once blank lines are dropped (ours keeps a blank line for each continuation line IPython joins,
so positions stay those of the cell). A ``%%time``-like cell magic is one call in IPython's
result; its body, which the magic transforms and runs in the kernel, is compared the same way.
"""

from __future__ import annotations

import ast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xla_lint.sources.notebooks import run_cell, transform_cell

inputtransformer2 = pytest.importorskip("IPython.core.inputtransformer2")


def _compiles(code: str) -> bool:
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return False
    return True


def _lines(code: str) -> list[str]:
    return [line for line in code.splitlines() if line.strip()]


def _ipython(cell: str) -> str:
    return inputtransformer2.TransformerManager().transform_cell(cell)


CELLS = [
    # `!` with backslash continuations, then Python (shared case c24, cell 2)
    "!pip install -q torch~=2.9.0 'torch_xla[tpu]~=2.9.0' \\\n    -f https://x.invalid/index.html\n"
    "import torch\nimport torch_xla.core.xla_model as xm\ndevice = xm.xla_device()",
    "!cmd \\\n  a \\\n  b\nx = 1\n",
    "!echo it's ok?\n",
    "!ls # what?\n",
    "!!ls\n",
    # line magics, at the top and inside blocks
    "%time x = f(1)\n",
    "%pip install -q a b\n",
    "%cd /kaggle\\\n/working\n",
    "def f():\n    return 1\n%matplotlib inline\n",
    "x = 1 \\\n  + 2\n%env A=1\n",
    "if x:\n    !ls\n    %time f()\nelse:\n    y = !pwd\n",
    # assignment from `!` and from a magic
    "files = !ls -la\nprint(files)\n",
    "a, b = !echo 1 2\n",
    "x=!ls\n",
    "x = !ls \\\n -la\n",
    "d = {'a': 1}\nd['b'] = !ls\n",
    "env = %env\n",
    "x = %time f(1)\n",
    "x: int = %who_ls\n",
    "x = %%foo\n",
    "x == !y\n",
    "x != 3\n",
    "lambda a=1: a\n",
    # a cell indented as a whole, uniformly (IPython 8 and 9 agree)
    "    model = f(1)\n    out = model(x)\n    other = xm.xla_device()",
    "    if x:\n        y = 1\n    \n    z = 2\n",
    "\tx = 1\n\ty = 2\n",
    "\n\n    import torch\n    x = 1\n",
    # help
    "xm.mark_step?\n",
    "xm.mark_step??\n",
    "a.b.c?\n",
    "a[0]?\n",
    "*int*?\n",
    "?xm\n",
    "??xm\n",
    "?\n",
    "f(x)??\n",
    "print(a)?\nx?\n",  # IPython cannot transform the first: the second stays too
    "x = 1 # ?\n",
    "x = '''\n?\n'''\n",
    # IPython syntax inside Python is Python
    'msg = ("value: %d"\n       % 3)\ntotal = 10 \\\n    % 3\ns = """\n!important\n?why\n"""\n!pip install x\n',
    "x = [1,\n 2] ; !ls\n",
    # autocall escapes
    "/print a b\n",
    ",print a b\n",
    ";print a b\n",
    # cell magics
    "%%time\nx = torch.randn(4, device=xm.xla_device())\ny = x @ x",
    "%%capture out\n!pip install x\nimport y\n",
    "%%timeit -n 3\nx = !ls\n",
    "\n\n%%time\n  x = 1\n  y = 2\n",
    "  %%time\n  x = 1\n",
    "%%time?\n",
    "%%bash\necho hi\n",
    "%%writefile train.py\nimport torch\n!ls\n",
    "%%file a.py\nimport os\n",
    "%%python3\nprint(1)\n",
    "%%script bash\nls\n",
    "%%html\n<b>x</b>\n",
    # real syntax errors stay errors (shared case c24, cell 5)
    "for step in range(3)\n    out = model(x)",
    "  x = 1\n    y = 2\n",
    "def f(:\n    pass\n",
]


@pytest.mark.parametrize("cell", CELLS)
def test_the_transformation_is_ipython_s_line_for_line(cell):
    ours = transform_cell(cell)
    expected_lines = len((cell if cell.endswith("\n") else cell + "\n").splitlines())
    assert len(ours.shifts) == expected_lines
    theirs = _ipython(cell)
    if ours.magic:
        (statement,) = ast.parse(theirs).body
        assert isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
        name, _, body = (ast.literal_eval(a) for a in statement.value.args)
        assert name == ours.magic
        if ours.kind == "script":  # written to a file or run by another interpreter, as is
            theirs = body
        elif ours.kind == "kernel":  # the magic transforms its body and runs it in the kernel
            theirs = _ipython(body)
        else:
            assert ours.code == ""
            return
    else:
        assert ours.kind == "kernel"
    assert len(ours.code.splitlines()) == expected_lines
    assert _compiles(ours.code) == _compiles(theirs)
    assert _lines(ours.code) == _lines(theirs)


def test_the_kinds_of_cell_magics():
    """%%time runs Python in the kernel, %%writefile x.py writes a Python script, %%bash and a
    %%writefile of another file hold no Python."""
    cells = ["%%time\nx\n", "%%bash\nls\n", "%%writefile t.py\nx\n", "%%writefile t.sh\nls\n"]
    assert [(transform_cell(c).kind, transform_cell(c).magic) for c in cells] == [
        ("kernel", "time"),
        ("other", "bash"),
        ("script", "writefile"),
        ("other", "writefile"),
    ]
    assert transform_cell("%%writefile -a 'train.py'\nx\n").kind == "script"


def test_shifts_are_the_columns_the_dedent_took():
    ours = transform_cell("\n    x = 1\n    if x:\n        y = 2\n")
    assert ours.code == "\nx = 1\nif x:\n    y = 2\n"
    assert ours.shifts == (0, 4, 4, 4)
    magic = transform_cell("  %%time\n    a = 1\n    b = 2\n")
    assert magic.code == "\na = 1\nb = 2\n" and magic.shifts == (2, 4, 4)


# Lines that mix IPython syntax, Python and the traps between them (strings, brackets, stray
# closers, continuation lines, help marks), put together at random into cells.
POOL = [
    "!pip install x \\", "  -q", "x = 1", "if x:", "    y = !ls", "    %time f()", "x?", "a.b??",
    "?", "print(a)?", "s = '''", "!inside", "'''", "f(1,", "  2)", "%%time", "  z = 3", "# c?",
    "x = %env", "d = {", "'a': 1}", "/f a", ",g b c", "!echo 'q", "x = 'it?'", "", "   ",
    "\tt = 1", "w = !!ls", "lambda a=1: a", "x == 2", "%cd a\\", "b",
]  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(POOL), min_size=1, max_size=7),
    st.sampled_from(["", "    "]),
    st.booleans(),
)
def test_random_cells_run_as_ipython_runs_them(lines, indent, newline):
    """Where IPython's Python compiles, ours compiles and has the same lines; where IPython
    raises or its Python does not compile, ours does not compile either (XLA000)."""
    cell = "\n".join(indent + line if line else line for line in lines) + ("\n" if newline else "")
    _agree(cell)


def _agree(cell: str) -> None:
    ours = transform_cell(cell)
    try:
        theirs = _ipython(cell)
    except SyntaxError:  # IndentationError too: the kernel runs none of the cell
        assert not _compiles(ours.code)
        return
    if ours.magic:
        (statement,) = ast.parse(theirs).body
        name, _, body = (ast.literal_eval(a) for a in statement.value.args)
        assert name == ours.magic
        if ours.kind == "kernel":
            inner = transform_cell(body)
            assert _lines(inner.code) == _lines(ours.code)
            _agree(body)
        return
    assert _compiles(ours.code) == _compiles(theirs)
    if _compiles(theirs):
        assert _lines(ours.code) == _lines(theirs)


@pytest.mark.parametrize(
    "cell",
    [
        "pip install -Uqq fastai\n",
        "ls -la\n",
        "cd /tmp\n",
        "conda install x\n",
        "pwd\n",
        "cd = 3\n",
        "ls(1)\n",
        "pip.main(['install', 'x'])\n",
        "wget http://x\n",
        "pip install a\nimport os\n",
    ],
)
def test_a_one_line_cell_gets_the_shell_s_automagic(cell):
    """A kernel prefilters a one-line cell (``InteractiveShell.run_cell``): ``pip install x``
    runs as ``%pip``. Held against the shell's own ``transform_cell``; a cell of several lines
    and a name that is not a magic are left as they are."""
    interactiveshell = pytest.importorskip("IPython.core.interactiveshell")
    shell = interactiveshell.InteractiveShell.instance()
    ours = run_cell(cell).code
    assert _lines(ours) == _lines(shell.transform_cell(cell))
    assert _compiles(ours) == _compiles(shell.transform_cell(cell))


def test_comments_above_a_cell_magic_are_read_as_older_ipython_read_them():
    """``#colab`` above ``%%bash`` (nbdev's flag): IPython 7 and later make the ``%%bash`` line a
    line magic and fail on the shell lines below it; IPython 5 and 6, which Colab ran, took the
    first ``%%`` line as the cell magic. A cell that compiles as IPython 9 reads it keeps that
    reading."""
    cell = "#colab\n%%bash\npip install -q foo\n"
    assert not _compiles(_ipython(cell))
    assert run_cell(cell).kind == "other" and run_cell(cell).magic == "bash"
    timed = run_cell("# timing\n%%time\nx = (1 +\n     2)\n")
    assert timed.kind == "kernel" and _compiles(timed.code)
    kept = "# note\n%%time\nx = 1\n"
    assert _lines(run_cell(kept).code) == _lines(transform_cell(kept).code)
