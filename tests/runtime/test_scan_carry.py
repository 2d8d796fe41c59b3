"""XLA030 scan-non-float-carry against torch_xla itself, on CPU.

Each snippet calls ``scan``/``scan_layers`` as a model would; one process runs them all
(``PJRT_DEVICE=CPU``), forward and backward, and records the error each raises. Each snippet
is also linted: XLA030 must flag exactly the ones that raise, naming the dtype. About 20 s.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch_xla")

from helpers import lint_tree, run_cpu_script, write_tree

pytestmark = pytest.mark.runtime

PRELUDE = """\
import torch
import torch_xla
from torch_xla.experimental.scan import scan
from torch_xla.experimental.scan_layers import scan_layers

dev = torch_xla.device()
h0 = torch.randn(2, 4, device=dev, requires_grad=True)
xs = torch.randn(3, 2, 4, device=dev, requires_grad=True)
ids = torch.tensor([[1, 0, 2, 3]] * 2, device=dev)


def step(carry, x):
    h, m = carry
    keep = m if m.dtype == torch.bool else m > 0.5
    return (torch.where(keep, torch.tanh(h + x), h), m), h.sum()


def step_xs(h, x):
    value, keep = x
    return torch.where(keep, torch.tanh(h + value), h), h.sum()


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, h, m):
        keep = m if m.dtype == torch.bool else m > 0.5
        return torch.where(keep, self.lin(h), h), m


layers = torch.nn.ModuleList([Layer() for _ in range(3)]).to(dev)
"""

# name -> (the snippet, the dtype XLA030 must name, or None when it runs)
SNIPPETS = {
    "bool_carry": ("mask = ids != 0\n(h, m), ys = scan(step, (h0, mask), xs)\n", "bool"),
    "int_carry": (
        "count = torch.tensor(0, device=dev)\n(h, n), ys = scan(step, (h0, count), xs)\n",
        "int64",
    ),
    "layers_bool": ("keep = ids > 0\nh, m = scan_layers(layers, (h0, keep))\n", "bool"),
    "float_mask": (
        "mask = (ids != 0).to(torch.float32)\n(h, m), ys = scan(step, (h0, mask), xs)\n",
        None,
    ),
    "layers_float": (
        "keep = (ids > 0).to(h0.dtype)\nh, m = scan_layers(layers, (h0, keep))\n",
        None,
    ),
    "bool_in_xs": (
        "keeps = (ids != 0).expand(3, 2, 4).contiguous()\nh, ys = scan(step_xs, h0, (xs, keeps))\n",
        None,
    ),
}

RUNNER = """
import json
results = {}
for name, code in json.loads(CASES).items():
    try:
        scope = dict(globals())
        exec(code, scope)
        result = scope.get("ys", scope.get("h"))
        result.sum().backward()
        torch_xla.sync()
        results[name] = None
    except Exception as exc:
        results[name] = f"{type(exc).__name__}: {exc}"
print("RESULT " + json.dumps(results), flush=True)
"""


@pytest.fixture(scope="module")
def outcomes() -> dict[str, str | None]:
    cases = {name: code for name, (code, _) in SNIPPETS.items()}
    return run_cpu_script(PRELUDE + f"CASES = {json.dumps(json.dumps(cases))}\n" + RUNNER)


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_xla030_reports_exactly_the_carries_that_raise(outcomes, tmp_path, name):
    code, dtype = SNIPPETS[name]
    error = outcomes[name]
    if dtype is None:
        assert error is None, error
    else:
        assert error == (
            "RuntimeError: Only Tensors of floating point and complex dtype can require gradients"
        )
    write_tree(tmp_path, {"model.py": PRELUDE + code})
    found, _, _ = lint_tree(tmp_path, select=["XLA030"], preview=True)
    messages = [d.message for d in found.diagnostics]
    if dtype is None:
        assert messages == []
    else:
        assert (
            len(messages) == 1
            and f"is {'an' if dtype[0] in 'iu' else 'a'} {dtype} tensor" in messages[0]
        ), messages
