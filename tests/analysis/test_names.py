"""Name resolution through imports: aliases, full paths, shadowing, relative and star imports, shims."""

from __future__ import annotations

import libcst as cst
import pytest

from xla_lint.analysis.context import Dispatcher, FileContext

HYBRID = "torch_xla.distributed.spmd.HybridMesh"


def resolved_calls(
    code: str, module: str = "pkg.mod", is_package: bool = False
) -> dict[int, frozenset[str]]:
    """Line -> qualified names of the first call on that line."""
    tree = cst.parse_module(code)
    ctx = FileContext(tree, module, is_package)
    out: dict[int, frozenset[str]] = {}

    class Recorder:
        def visit_Call(self, node: cst.Call) -> None:
            out.setdefault(len(out), ctx.qnames(node))

    tree.visit(Dispatcher(ctx, [Recorder()]))
    return out


@pytest.mark.parametrize(
    "code",
    [
        "import torch_xla.distributed.spmd as xs\nxs.HybridMesh()\n",
        "from torch_xla.distributed.spmd import HybridMesh as HM\nHM()\n",
        "import torch_xla\ntorch_xla.distributed.spmd.HybridMesh()\n",
        "import torch_xla.distributed.spmd\ntorch_xla.distributed.spmd.HybridMesh()\n",
        "from torch_xla.distributed.spmd.xla_sharding import HybridMesh\nHybridMesh()\n",
        "from torch_xla.distributed import spmd\nspmd.HybridMesh()\n",
        "from torch_xla.distributed.spmd import *\nHybridMesh()\n",
        "def f():\n    import torch_xla.distributed.spmd as xs\n    return xs.HybridMesh()\n",
        "try:\n    from torch_xla.distributed.spmd import HybridMesh\nexcept ImportError:\n    HybridMesh = None\nHybridMesh()\n",
    ],
)
def test_aliases_resolve_to_one_api(code):
    assert HYBRID in resolved_calls(code)[0]


@pytest.mark.parametrize(
    "code",
    [
        "from mesh_utils import HybridMesh\nHybridMesh()\n",
        "import torch_xla.distributed.spmd as xs\ndef f(xs):\n    return xs.HybridMesh()\n",
        "from torch_xla.distributed.spmd import HybridMesh\ndef f():\n    HybridMesh = make()\n    return HybridMesh()\n",
        "HybridMesh()\n",
        "import torch_xla.distributed.spmd as xs\nself.xs.HybridMesh()\n",
    ],
)
def test_shadowing_and_unrelated_names_do_not_resolve_to_torch_xla(code):
    assert HYBRID not in resolved_calls(code)[0]


def test_class_scope_does_not_enclose_methods():
    code = (
        "import torch_xla.distributed.spmd as xs\n"
        "class Trainer:\n    xs = None\n    def build(self):\n        return xs.HybridMesh()\n"
    )
    assert HYBRID in resolved_calls(code)[0]


def test_global_declaration_reads_module_binding():
    code = (
        "import torch_xla.runtime as xr\n"
        "def f():\n    global xr\n    xr = reload()\n    return xr.use_spmd()\n"
    )
    calls = resolved_calls(code)
    assert any("torch_xla.runtime.use_spmd" in names for names in calls.values())


def test_relative_import_resolves_against_the_package():
    code = "from . import helpers\nhelpers.run()\n"
    assert "mypkg.helpers.run" in resolved_calls(code, module="mypkg.model")[0]
    code = "from .. import util\nutil.go()\n"
    assert "top.util.go" in resolved_calls(code, module="top.sub", is_package=True)[0]


def test_builtins_resolve_unless_shadowed():
    assert "builtins.print" in resolved_calls("print(1)\n")[0]
    assert "builtins.print" not in resolved_calls("from rich import print\nprint(1)\n")[0]


def test_old_and_private_paths_map_to_the_public_name():
    code = "import torch_xla.experimental.xla_sharding as xs\nxs.Mesh()\n"
    names = resolved_calls(code)[0]
    assert "torch_xla.distributed.spmd.Mesh" in names
    assert "torch_xla.experimental.xla_sharding.Mesh" in names


@pytest.mark.parametrize(
    "pattern", ["xs", "[1, xs]", "[*xs]", "{'k': xs}", "{**xs}", "C(a=xs)", "1 | xs", "(1 as xs)"]
)
def test_a_case_pattern_capture_binds_its_name(pattern):
    """`case` captures bind like assignments: the import and the captured value are both possible."""
    from xla_lint.analysis.names import LOCAL, BindingCollector

    code = f"import torch_xla.distributed.spmd as xs\nmatch v:\n    case {pattern}:\n        pass\n"
    bindings = BindingCollector().collect(cst.parse_module(code)).bindings
    assert bindings["xs"] == {"torch_xla.distributed.spmd", LOCAL}


def test_names_bound_in_expressions_or_rebound():
    from xla_lint.analysis.names import names_bound_in_expressions_or_rebound

    code = (
        "import torch_xla\n[a for b, (c, *d) in x]\nf = lambda e, *g, h=1, **i: 0\n(j := 1)\n"
        "def k():\n    global l\n    nonlocal_m = 1\ndel n, o.p\nq = 1\n"
    )
    found = names_bound_in_expressions_or_rebound(cst.parse_module(code))
    assert {"b", "c", "d", "e", "g", "h", "i", "j", "l", "n", "o", "p"} <= found
    assert not {"torch_xla", "q", "k", "nonlocal_m"} & found  # the collector's own bindings


def test_top_level_imports_are_in_order_and_only_unconditional():
    from xla_lint.analysis.names import top_level_imports

    code = (
        "import torch_xla.core.xla_model as xm, os\nx = 1\ntry:\n    import torch_xla.runtime as xr\n"
        "except ImportError:\n    pass\nfrom torch_xla.distributed import spmd as xs\nfrom . import sibling\n"
    )
    table = [(names, modules) for _, names, modules in top_level_imports(cst.parse_module(code))]
    assert table == [
        (frozenset({"xm", "os"}), frozenset({"torch_xla.core.xla_model", "os"})),
        (frozenset(), frozenset()),
        (frozenset(), frozenset()),  # under try: not unconditional
        (frozenset({"xs"}), frozenset({"torch_xla.distributed"})),
        (frozenset(), frozenset()),  # relative: not a torch_xla import
    ]
