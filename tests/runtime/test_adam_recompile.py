"""XLA204 adam-scalar-recompile against torch_xla itself, on CPU.

A tiny model trains with each optimizer for a dozen steps around the predicted step (the
optimizer's ``state["step"]`` is set just below it), one ``torch_xla.sync()`` per step, and
``torch_xla.debug.metrics`` counts the compilations of each step. Non-capturable Adam/AdamW
compile exactly once more, at the step :func:`xla_lint.scalars.recompile_step`
predicts (the number the rule's message names); ``capturable=True`` and the sync-free
``step(found_inf=...)`` update never do, and turning torch_xla's special scalars off
(what ``XLA_NO_SPECIAL_SCALARS=1`` does) does not remove it. Each scenario uses its own layer
width so that no two share a cached graph. One process with ``PJRT_DEVICE=CPU``: 10-30 s,
most of it importing torch_xla.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch_xla")

from helpers import lint_tree, write_tree

from xla_lint.scalars import recompile_step

pytestmark = pytest.mark.runtime

BETA2 = 0.95
SCRIPT = r"""
import json, sys
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla.amp import syncfree

KINDS = {"Adam": torch.optim.Adam, "AdamW": torch.optim.AdamW, "syncfree.AdamW": syncfree.AdamW}


def compiles():
    data = met.metric_data("CompileTime")
    return data[0] if data else 0


def run(kind, width, start, steps, dtype="float32", found_inf=False, special_scalars=True, **options):
    # XLA_NO_SPECIAL_SCALARS=1 sets this flag when torch_xla starts (MapXlaEnvVarsToLazy in
    # torch_xla/csrc/init_python_bindings.cpp, v2.9.0); the setter does the same in this process.
    torch_xla._XLAC._set_xla_handle_special_scalars(special_scalars)
    dev = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(width, width).to(dev).to(getattr(torch, dtype))
    opt = KINDS[kind](model.parameters(), betas=(0.9, BETA2), **options)
    x = torch.randn(8, width).to(dev).to(getattr(torch, dtype))
    flag = torch.zeros((), device=dev)

    def step():
        opt.zero_grad()
        model(x).float().pow(2).mean().backward()
        opt.step(found_inf=flag) if found_inf else opt.step()
        torch_xla.sync()
        xm.wait_device_ops()

    step()
    step()
    if start is not None:  # just below the step under test: the host-side count is a CPU tensor
        for p in model.parameters():
            assert opt.state[p]["step"].device.type == "cpu", opt.state[p]["step"].device
            opt.state[p]["step"] = torch.tensor(float(start))
    found = []
    for _ in range(steps):
        before = compiles()
        step()
        if compiles() > before:
            count = opt.state[next(model.parameters())]["step"]
            found.append(int(count.item()))
    torch_xla._XLAC._set_xla_handle_special_scalars(True)
    return found


BETA2 = float(sys.argv[1])
results = {name: run(**scenario) for name, scenario in json.loads(sys.argv[2]).items()}
print(json.dumps(results))
"""


def _run(scenarios: dict) -> dict:
    full_env = {**os.environ, "PJRT_DEVICE": "CPU"}
    for var in ("CPU_NUM_DEVICES", "XLA_FLAGS", "XLA_USE_SPMD", "XLA_NO_SPECIAL_SCALARS"):
        full_env.pop(var, None)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(BETA2), json.dumps(scenarios)],
        capture_output=True,
        text=True,
        timeout=300,
        env=full_env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


F32, BF16, F64 = (
    recompile_step(BETA2),
    recompile_step(BETA2, "bfloat16"),
    recompile_step(BETA2, "float64"),
)


@pytest.fixture(scope="module")
def measured() -> dict:
    return _run(
        {
            "Adam": {"kind": "Adam", "width": 4, "start": F32 - 6, "steps": 12},
            "AdamW": {"kind": "AdamW", "width": 5, "start": F32 - 6, "steps": 12},
            # syncfree.AdamW.step() without found_inf is torch.optim.AdamW.step (torch_xla/amp/syncfree/adamw.py)
            "syncfree.AdamW": {"kind": "syncfree.AdamW", "width": 6, "start": F32 - 6, "steps": 12},
            "foreach": {
                "kind": "AdamW",
                "width": 7,
                "start": F64 - 6,
                "steps": 12,
                "foreach": True,
            },
            "bfloat16": {
                "kind": "AdamW",
                "width": 8,
                "start": BF16 - 6,
                "steps": 12,
                "dtype": "bfloat16",
            },
            "float64": {
                "kind": "Adam",
                "width": 9,
                "start": F64 - 6,
                "steps": 12,
                "dtype": "float64",
            },
            # The step count lives on the device: started at 0 and run past the float32 step.
            "capturable": {
                "kind": "AdamW",
                "width": 10,
                "start": None,
                "steps": F32 + 3,
                "capturable": True,
            },
            "found_inf": {
                "kind": "syncfree.AdamW",
                "width": 11,
                "start": None,
                "steps": F32 + 3,
                "found_inf": True,
            },
            "no_special_scalars": {
                "kind": "Adam",
                "width": 12,
                "start": F32 - 6,
                "steps": 12,
                "special_scalars": False,
            },
        }
    )


def test_the_predicted_steps_are_the_ones_the_issue_reports():
    assert (F32, BF16, F64) == (325, 109, 709)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "syncfree.AdamW"])
def test_one_extra_compilation_at_the_predicted_float32_step(measured, name):
    assert measured[name] == [F32]


def test_foreach_and_float64_parameters_reach_the_float64_step(measured):
    assert measured["foreach"] == [F64]
    assert measured["float64"] == [F64]


def test_bfloat16_parameters_reach_the_bfloat16_step(measured):
    assert measured["bfloat16"] == [BF16]


def test_capturable_and_the_found_inf_update_never_recompile(measured):
    assert measured["capturable"] == []
    assert measured["found_inf"] == []


def test_turning_special_scalars_off_alone_does_not_remove_it(measured):
    # The 1.0 is then a graph input, but it shares its device buffer with another 1.0 input of
    # the step: the graph still changes (one input fewer).
    assert measured["no_special_scalars"] == [F32]


def test_the_rule_names_the_measured_step(tmp_path, measured):
    write_tree(
        tmp_path,
        {
            "train.py": "import torch\nimport torch_xla\n"
            f"opt = torch.optim.AdamW(model.parameters(), betas=(0.9, {BETA2}))\n"
        },
    )
    result, _, _ = lint_tree(tmp_path, select=["XLA204"], preview=True)
    [d] = result.diagnostics
    assert (
        f"at optimizer step {measured['AdamW'][0]} (beta2={BETA2}, float32 parameters)" in d.message
    )
