"""Whose torch_tpu a file uses (xla_lint/analysis/torchtpu.py), and where TorchTPU code runs."""

from __future__ import annotations

import libcst as cst
import pytest

from xla_lint.analysis import torchtpu
from xla_lint.analysis.context import FileContext
from xla_lint.sources.prefilter import PREFILTER, needs_parse


def ctx_of(source: str) -> FileContext:
    return FileContext(cst.parse_module(source))


@pytest.mark.parametrize(
    "source, expected",
    [
        # Google: 0.2.0-only torch.tpu names, its private modules, backends, meshes, variables
        ("import torch\nwith torch.tpu.set_eager_mode(m):\n    pass\n", "google"),
        ("from torch.tpu.ops import splash_sdpa\n", "google"),
        ("import torch_tpu._internal.execution_mode\n", "google"),
        ("import torch.distributed as dist\ndist.init_process_group(backend='tpu')\n", "google"),
        (
            "from torch.distributed.device_mesh import DeviceMesh\nm = DeviceMesh('tpu', [0])\n",
            "google",
        ),
        ("import torch\nf = torch.compile(g, backend='tpu')\n", "google"),
        ("import os\nos.environ['TORCH_TPU_TOPOLOGY'] = '2x2'\n", "google"),
        ("from torch_tpu import api\n", "google"),  # the older Google beta
        # SOPHGO
        ("import torch\nimport torch_tpu\ntorch.tpu.OpTimer_reset()\n", "sophgo"),
        ("import torch_tpu._C\n", "sophgo"),
        ("import torch.distributed as dist\ndist.init_process_group('sccl')\n", "sophgo"),
        ("import torch_tpu\nchip = run('BM1684X')\n", "sophgo"),
        # neither: the names both packages have
        (
            "import torch\nimport torch_tpu\nn = torch.tpu.device_count()\nx = torch.ones(1).to('tpu')\n",
            None,
        ),
        ("import torch\nt = torch.autocast('tpu')\ntorch.tpu.manual_seed(0)\n", None),
        # both: undecided
        ("import torch\ntorch.tpu.OpTimer_reset()\ntorch.tpu.set_eager_mode(m)\n", None),
        # a local name that only looks like it
        ("class torch:\n    pass\ntorch.tpu.ops.splash_sdpa(q, k, v)\n", None),
        ("import torch_xla\n", None),
    ],
)
def test_flavour(source, expected):
    assert torchtpu.flavour(ctx_of(source)) == expected


def test_signals_name_what_decided():
    google, sophgo = torchtpu.signals(
        ctx_of(
            "import torch\ndef f():\n    return torch.tpu.distributed.topology_aware_mesh((2,))\n"
        )
    )
    assert "torch.tpu.distributed.topology_aware_mesh" in google and not sophgo


def test_google_names_are_public_in_the_data_file_and_not_cuda_like():
    public = {n.split(".")[2] for n in torchtpu.torchtpu_api()["names"]}
    modules = {m.split(".")[2] for m in torchtpu.torchtpu_api()["modules"] if m.count(".") == 2}
    assert torchtpu.GOOGLE_TPU_ATTRS <= public | modules
    assert not torchtpu.GOOGLE_TPU_ATTRS & torchtpu.SOPHGO_TPU_ATTRS
    for shared in ("device_count", "is_available", "manual_seed", "Stream", "current_device"):
        assert torchtpu.name_flavour(f"torch.tpu.{shared}") is None


class _At(cst.CSTVisitor):
    """The answers of runs_on_torchtpu / caught / in_import_fallback at each call of `probe()`."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx, self.answers = ctx, []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.ctx.stack.append(node)
        if isinstance(node, cst.Call) and getattr(node.func, "value", None) == "probe":
            self.answers.append(
                (
                    torchtpu.runs_on_torchtpu(self.ctx),
                    torchtpu.caught(self.ctx, frozenset({"RuntimeError"})),
                    torchtpu.in_import_fallback(self.ctx),
                )
            )
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.ctx.stack.pop()


def answers(source: str) -> list[tuple[bool, bool, bool]]:
    ctx = ctx_of(source)
    visitor = _At(ctx)
    ctx.module.visit(visitor)
    return visitor.answers


def test_runs_on_torchtpu_drops_torch_xla_and_other_platform_branches():
    source = (
        "probe()\n"
        "if is_torch_xla_available():\n    probe()\nelse:\n    probe()\n"
        "if is_torch_tpu_available():\n    probe()\nelse:\n    probe()\n"
        "if torch.cuda.is_available():\n    probe()\n"
        "if not torch.cuda.is_available():\n    probe()\n"
        "if False:\n    probe()\n"
    )
    assert [a[0] for a in answers(source)] == [True, False, True, True, False, False, True, False]


def test_caught_and_import_fallbacks():
    source = (
        "try:\n    probe()\nexcept RuntimeError:\n    pass\n"
        "try:\n    probe()\nexcept ImportError:\n    probe()\n"
        "try:\n    def f():\n        probe()\nexcept Exception:\n    pass\n"
        "if TYPE_CHECKING:\n    probe()\n"
    )
    # (runs on TorchTPU, RuntimeError caught, an optional import or its fallback)
    assert answers(source) == [
        (True, True, False),  # `except RuntimeError` catches it, not an ImportError
        (True, False, True),  # the try body of an ImportError handler
        (True, False, True),  # the handler itself
        (True, False, False),  # a function defined in the try runs later, unguarded
        (True, False, True),  # never runs
    ]


def test_the_prefilter_lets_torchtpu_files_through():
    for text in (
        "import torch_tpu\n",
        "torch.tpu.ops.splash_sdpa(q, k, v)\n",
        "X = 'TORCH_TPU_TOPOLOGY'\n",
    ):
        assert PREFILTER.search(text) and needs_parse(text.encode())
    assert not needs_parse(b"import torch\nx = torch.ones(2)\n")
