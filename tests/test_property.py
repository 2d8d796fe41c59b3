"""Property tests: on generated programs the rules never crash, and fixed output always parses.

Programs come from hypothesmith (``from_grammar()``: any text Python's grammar allows;
``from_node()``: LibCST-built modules), with torch_xla imports prepended so the prefilter
lets them through and names resolve to torch_xla APIs, plus programs stitched from
snippets of real torch_xla calls (the ones the fixable rules rewrite).
"""

from __future__ import annotations

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xla_lint.config import build_settings
from xla_lint.pipeline.fixes import fix_loop, parses
from xla_lint.pipeline.run import lint_file
from xla_lint.sources.target import Target

PRELUDE = (
    "import torch_xla\nimport torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
    "import torch_xla.distributed.spmd as xs\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
)

SNIPPETS = [
    "print('loss', loss)\n",
    "print(x, y, sep='')\n",
    "device = xm.xla_device()\n",
    "xm.mark_step()\n",
    "n = xm.xrt_world_size()\n",
    "r = xm.get_ordinal()\n",
    "mesh = xs.Mesh(ids, (4, 2), ('data', 'model'))\n",
    "xs.mark_sharding(t, mesh, ('data', None))\n",
    "hm = xs.HybridMesh((4, 1), (2, 1), ('fsdp', 'model'))\n",
    "xr.use_spmd()\n",
    "xm.save(model.state_dict(), 'm.pt')\n",
    "xmp.spawn(fn, args=())\n",
    "for x in loader:\n    loss = model(x)\n    loss.backward()\n    xm.optimizer_step(opt)\n    print(loss.item())\n",
    "if xr.is_spmd():\n    xs.mark_sharding(t, mesh, (0, 1))\nelse:\n    print('no')\n",
    "def f(a, *b, c=1, **d):\n    return xm.xla_device(a)\n",
    "class M:\n    def forward(self, x):\n        print(x)  # noqa: XLA004\n        return x\n",
]

SETTINGS = build_settings(cwd=__import__("pathlib").Path("."), isolated=True, select=["XLA"])
TARGET = Target("generated.py", "python")


def check(source: str) -> None:
    """Lint ``source`` with every rule and fix it to a fixed point: no exception, fixed text parses."""
    result = lint_file(TARGET, SETTINGS, text=source)  # raises on a rule crash
    outcome = fix_loop(
        TARGET.path, source, lambda text: lint_file(TARGET, SETTINGS, text=text).diagnostics
    )
    if result.parsed:
        assert parses(outcome.fixed), outcome.fixed
        again = fix_loop(
            TARGET.path,
            outcome.fixed,
            lambda text: lint_file(TARGET, SETTINGS, text=text).diagnostics,
        )
        assert again.fixed == outcome.fixed  # --fix twice equals --fix once


COMMON = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)


@COMMON
@given(hypothesmith.from_grammar())
def test_grammar_programs(program):
    check(PRELUDE + program)


@COMMON
@given(hypothesmith.from_node())
def test_libcst_programs(program):
    check(PRELUDE + program)


@COMMON
@given(
    st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=8),
    st.sampled_from(["", "    ", "\t"]),
    st.booleans(),
)
def test_torch_xla_snippets(parts, indent, wrap):
    body = "".join(parts)
    if wrap:  # the same code one level down, in a function
        body = "def train(model, loader, opt, t, ids, mesh, fn, x, y, loss):\n" + "".join(
            (indent or "    ") + line + "\n" for line in body.splitlines()
        )
    check(PRELUDE + body)
