"""xla_lint.analysis.values: what an expression holds, asked from inside the traversal as rules ask it.

Each source marks the expressions to ask about with ``probe(expr)``; the probe visitor asks
:func:`value_of` while the real dispatcher is visiting that call, so the answer depends on where
the read is (replica tests: tests/analysis/test_ranks.py).
"""

from __future__ import annotations

import libcst as cst
import pytest

from xla_lint.analysis import values
from xla_lint.analysis.context import Dispatcher, FileContext
from xla_lint.analysis.values import Known, Unknown
from xla_lint.analysis.walk import walk


def ask(source: str) -> list:
    """The answers for every ``probe(x)`` (a Value), in source order."""
    ctx = FileContext(cst.parse_module(source))
    out: list = []

    class Probe:
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "probe":
                out.append(values.value_of(ctx, node.args[0].value))

    walk(ctx.module, Dispatcher(ctx, [Probe()]))
    return out


def known(value) -> tuple:
    assert isinstance(value, Known), value
    return value.value, value.origin


def unknown(value) -> tuple:
    assert isinstance(value, Unknown), value
    return value.kind, value.origin


# -- literals and module constants ------------------------------------------------------------
def test_literals_and_arithmetic():
    got = ask(
        "probe(8)\nprobe(-2.5)\nprobe('x' 'y')\nprobe(None)\nprobe((1, [True, None], {'a': 1}))\n"
        "probe(3 * 4 - 1)\nprobe(f'{x}')\nprobe(1 if c else 1)\n"
    )
    assert [known(v)[0] for v in got[:6]] == [8, -2.5, "xy", None, (1, [True, None], {"a": 1}), 11]
    assert known(got[0])[1] == "a literal"
    assert unknown(got[6])[0] == values.OTHER and got[6].type == "str"
    assert known(got[7])[0] == 1  # both arms agree


def test_module_constant_read_in_a_function():
    got = ask(
        "NPROCS = 8\nCORES = (1, 2)\ndef main():\n    probe(NPROCS)\n    probe(CORES)\n    probe(NPROCS // 2)\n"
    )
    assert known(got[0]) == (8, "the module constant `NPROCS`")
    assert known(got[1]) == ((1, 2), "the module constant `CORES`")
    assert known(got[2])[0] == 4


@pytest.mark.parametrize(
    "source",
    [
        "N = 8\nN = 4\ndef f():\n    probe(N)\n",  # assigned twice
        "for i in range(2):\n    N = 8\ndef f():\n    probe(N)\n",  # assigned in a loop
        "N = 8\ndef g():\n    global N\n    N = 1\ndef f():\n    probe(N)\n",  # reassigned through `global`
        "N = 8\nN += 1\ndef f():\n    probe(N)\n",  # augmented
        "N = [8]\nN.append(1)\ndef f():\n    probe(N)\n",  # changed in place
        "N = {'a': 8}\nN['b'] = 1\ndef f():\n    probe(N)\n",
    ],
)
def test_not_a_constant(source):
    assert isinstance(ask(source)[0], Unknown)


def test_container_filled_in_place_keeps_its_parts():
    (got,) = ask(
        "states = {}\nstates['step'] = step\nstates['rng'] = rng()\nstates.update(x=seed)\nprobe(states)\n"
    )
    assert got.kind == values.CONTAINER
    parts = [cst.Module([]).code_for_node(expr) for expr, _ in got.parts]
    assert parts == ["step", "rng()", "seed"]


# -- names read in a function: the assignment that reaches the read ----------------------------
def test_reaching_assignment():
    got = ask(
        "def f(c):\n    y = 1\n    y = 5\n    probe(y)\n"
        "    x = 1\n    if c:\n        x = 2\n    probe(x)\n"
        "    z = 3\n    if c:\n        z = 4\n        probe(z)\n"
        "    for i in range(3):\n        probe(w)\n        w = 1\n"
    )
    assert known(got[0]) == (5, "the variable `y`")
    assert unknown(got[1])[0] == values.SEVERAL and len(got[1].parts) == 2  # one of the two
    assert known(got[2])[0] == 4  # the assignment just before, in the same block
    assert isinstance(got[3], Unknown)  # the previous iteration's value, or unbound


def test_loop_targets():
    got = ask(
        "for step in range(10):\n    pass\nprobe(step)\n"
        "for i, batch in enumerate(loader):\n    probe(i)\n    probe(batch)\n"
        "for i, (a, b) in enumerate(pairs):\n    probe(a)\n"
    )
    assert unknown(got[0]) == (values.COUNTER, "the loop counter `step`") and got[0].type == "int"
    assert unknown(got[1])[0] == values.COUNTER
    assert unknown(got[2])[0] == values.ELEMENT
    assert cst.Module([]).code_for_node(got[2].parts[0][0]) == "loader"
    assert unknown(got[3])[0] == values.OTHER  # a position inside the item: not the counter


# -- unknown origins -------------------------------------------------------------------------
def test_unknown_origins_are_named():
    got = ask(
        "import os\nfrom os import environ\n"
        "def main(n, k: int, m: 'Optional[int]' = None, j: int | None = None):\n"
        "    probe(n)\n    probe(k)\n    probe(j)\n"
        "    probe(os.environ['NPROCS'])\n    probe(environ.get('NPROCS', '8'))\n"
        "    probe(int(os.getenv('NPROCS', 8)))\n    probe(count())\n    probe(self.cores)\n"
    )
    assert (
        unknown(got[0]) == (values.PARAMETER, "the parameter `n` of `main`") and got[0].type is None
    )
    assert got[1].type == "int" and got[2].type == "int"
    assert unknown(got[3]) == (values.ENVIRONMENT, "the environment variable `NPROCS`")
    assert unknown(got[4]) == (values.ENVIRONMENT, "the environment variable `NPROCS`")
    assert (
        unknown(got[5])[0] == values.ENVIRONMENT and got[5].type == "int"
    )  # int() keeps the origin
    assert unknown(got[6]) == (values.CALL, "the result of `count()`")
    assert unknown(got[7]) == (values.ATTRIBUTE, "the attribute `self.cores`")


# -- argparse ---------------------------------------------------------------------------------
PARSER = """\
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--num_cores", type=int, default=8, help="1 or 8")
parser.add_argument("-n", "--num-devices", type=int, default="4")
parser.add_argument("-w", dest="workers", default=2)
parser.add_argument("-b")
parser.add_argument("--fast", action="store_true")
parser.add_argument("--lr", type=float)
parser.add_argument("--late", default=1)
parser.set_defaults(late=3)
parser.add_argument("--must", required=True)
parser.add_argument("script")
parser.add_argument("--twice", default=1)
parser.add_argument("--twice", default=2)
"""


def test_argparse_defaults():
    got = ask(
        PARSER + "args = parser.parse_args()\n"
        "probe(args.num_cores)\nprobe(args.num_devices)\nprobe(args.workers)\nprobe(args.b)\n"
        "probe(args.fast)\nprobe(args.lr)\nprobe(args.late)\nprobe(args.must)\nprobe(args.script)\n"
        "probe(args.twice)\nprobe(args.nowhere)\nprobe(args)\n"
    )
    assert known(got[0]) == (8, "the argparse default of --num_cores")
    assert known(got[1]) == (4, "the argparse default of --num-devices")  # "4" through type=int
    assert known(got[2])[0] == 2
    assert unknown(got[3]) == (values.OPTION, "an option the user sets (-b, no default)")
    assert known(got[4]) == (False, "the argparse default of --fast")
    assert unknown(got[5])[0] == values.OPTION and got[5].type == "float"
    assert known(got[6])[0] == 3  # set_defaults after add_argument wins
    assert unknown(got[7]) == (values.OPTION, "an option the user sets (--must, required)")
    assert unknown(got[8])[0] == values.OPTION  # a positional: always given
    assert unknown(got[9])[0] == values.OPTION  # two definitions, two defaults
    assert unknown(got[10])[0] == values.OPTION
    assert unknown(got[11])[0] == values.NAMESPACE


def test_namespaces_reached_in_other_ways():
    got = ask(
        PARSER + "def parse():\n    return parser.parse_args()\n"
        "def main():\n    args = parse()\n    probe(args.num_cores)\n"
        "    known, rest = parser.parse_known_args()\n    probe(known.num_cores)\n"
        "    probe(parser.parse_known_args()[0].num_cores)\n    probe(vars(args))\n"
        "def _mp_fn(index, flags):\n    probe(flags.num_cores)\n"
    )
    assert [known(v)[0] for v in got[:3]] == [8, 8, 8]
    assert unknown(got[3])[0] == values.NAMESPACE
    assert known(got[4]) == (8, "the argparse default of --num_cores")  # a parameter named flags


def test_options_changed_in_the_code_or_absent():
    got = ask(
        PARSER
        + "args = parser.parse_args()\nargs.num_cores = 1 if debug else 8\nprobe(args.num_cores)\n"
    )
    assert unknown(got[0])[0] == values.OTHER
    # A parameter named args is no namespace in a file that defines no option.
    (got,) = ask("def run(args):\n    probe(args.num_cores)\n")
    assert unknown(got) == (values.ATTRIBUTE, "the attribute `args.num_cores`")


def test_option_default_from_a_call_is_unknown_and_says_so():
    (got,) = ask(
        "import argparse\ndef parse_args():\n    parser = argparse.ArgumentParser()\n"
        "    num_devices = device_count()\n"
        "    parser.add_argument('--num_cores', type=int, default=num_devices)\n"
        "    return parser.parse_args()\n"
        "def main():\n    args = parse_args()\n    probe(args.num_cores)\n"
    )
    assert unknown(got) == (
        values.OPTION,
        "the argparse default of --num_cores, the result of `device_count()`",
    )


# -- cost -------------------------------------------------------------------------------------
def test_the_table_is_built_once_per_file(monkeypatch):
    built = []
    original = values.FileValues.__init__

    def counting(self, ctx):
        built.append(ctx)
        original(self, ctx)

    monkeypatch.setattr(values.FileValues, "__init__", counting)
    got = ask("N = 8\n" + "def f():\n    probe(N)\n" * 20)
    assert len(got) == 20 and len(built) == 1


# -- what the file's calls pass to a parameter -------------------------------------------------
def passed(source: str) -> list | None:
    """For every ``probe(x)``: the values the file's calls pass to parameter ``x`` (or None)."""
    ctx = FileContext(cst.parse_module(source))
    out: list = []

    class Probe:
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "probe":
                found = values.arguments(ctx, node.args[0].value)
                out.append(
                    None if found is None else [values.value_of(ctx, e, s) for e, s in found]
                )

    walk(ctx.module, Dispatcher(ctx, [Probe()]))
    return out


def test_arguments_of_a_parameter_from_every_call_in_the_file():
    got = passed(
        "import argparse\n"
        "def loaders(train_bs, val_bs=500):\n    probe(val_bs)\n    probe(train_bs)\n"
        "parser = argparse.ArgumentParser()\nparser.add_argument('--bs', type=int, default=64)\n"
        "args = parser.parse_args()\nloaders(args.bs, val_bs=1000)\nloaders(32)\n"
        "trainer.loaders(7)\n"  # a method of that name is another function
    )
    assert [[known(v)[0] for v in vals] for vals in got] == [[1000, 500], [64, 32]]


@pytest.mark.parametrize(
    "tail",
    [
        "",  # nothing calls it: other code may
        "callbacks = [loaders]\nloaders(1)\n",  # passed on: called where the file cannot see
        "loaders(*sizes)\n",
        "loaders()\n",  # a required parameter left out: the call raises, nothing is passed
    ],
)
def test_arguments_unknown_when_not_every_caller_is_seen(tail):
    got = passed("def loaders(bs):\n    probe(bs)\n" + tail)
    assert got == [None]
