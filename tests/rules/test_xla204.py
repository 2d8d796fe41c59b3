"""XLA204 adam-scalar-recompile: Adam/AdamW without `capturable=True`, beyond the rule's own
examples: the predicted step (tied to CPU measurements in tests/runtime/test_adam_recompile.py),
the dtype and `foreach` it depends on, the traps, and optimizers built in modules without torch_xla."""

from __future__ import annotations

import random

import pytest
from helpers import lint_tree, write_tree

from xla_lint.engine import PROGRAM_RULES, PROGRAM_RULES_NEED
from xla_lint.rules.recompilation import recompile_step, round_to

HEAD = "import torch\nimport torch_xla\n"


def _found(tmp_path, files, select=("XLA204",)):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=list(select), preview=True)
    return [(d.path, d.line, d.message) for d in result.diagnostics]


# -- the predicted step -------------------------------------------------------------------

@pytest.mark.parametrize("beta2,step", [(0.9, 158), (0.95, 325), (0.98, 824), (0.99, 1656), (0.999, 16628)])
def test_float32_steps(beta2, step):
    assert recompile_step(beta2) == step == recompile_step(beta2, "float32")


def test_other_dtypes_and_the_foreach_path():
    # Measured on CPU with torch_xla 2.9.0 for beta2=0.95: bfloat16 parameters 109, foreach=True 709
    # (float64 parameters too); see tests/runtime/test_adam_recompile.py.
    assert recompile_step(0.95, "bfloat16") == 109
    assert recompile_step(0.95, "float64") == 709
    assert recompile_step(0.999, "bfloat16") == 5544
    assert recompile_step(0.999, "float64") == 36314
    assert recompile_step(0.999, "float16") < recompile_step(0.999, "float32")


def test_the_step_is_the_first_whose_rounded_correction_is_one():
    for beta2, dtype in [(0.95, "float32"), (0.999, "bfloat16"), (0.9, "float64"), (0.9999, "float32")]:
        step = recompile_step(beta2, dtype)
        assert round_to((1 - beta2 ** float(step)) ** 0.5, dtype) == 1.0
        assert round_to((1 - beta2 ** float(step - 1)) ** 0.5, dtype) < 1.0


def test_values_torch_rejects_or_that_never_change_the_graph():
    assert recompile_step(0.0) == 1  # the correction is 1.0 from the first step: one graph
    assert recompile_step(1.0) is None and recompile_step(-0.1) is None and recompile_step(True) is None
    assert recompile_step("0.95") is None


def test_rounding_matches_torch():
    torch = pytest.importorskip("torch")
    rng = random.Random(0)
    values = [1 - rng.random() * 10 ** -rng.uniform(1, 9) for _ in range(2000)] + [1 - 2 ** -25, 1 - 2 ** -9]
    for name in ("float32", "bfloat16", "float16"):
        dtype = getattr(torch, name)
        for v in values:  # a wrapped Python number is a float64 tensor, converted with .to(dtype)
            assert round_to(v, name) == torch.tensor(v, dtype=torch.float64).to(dtype).item(), (name, v)


# -- messages ------------------------------------------------------------------------------

def test_message_names_the_step_the_dtype_and_the_fix(tmp_path):
    found = _found(tmp_path, {"train.py": HEAD + (
        "model = Net().to(torch_xla.device())\n"
        "a = torch.optim.AdamW(model.parameters(), lr=1e-4)\n"                        # 4: default betas
        "b = torch.optim.Adam(model.parameters(), betas=(beta1, 0.95))\n"             # 5: beta2 known
        "c = torch.optim.Adam(model.parameters(), betas=config.betas)\n"              # 6: unknown
        "d = torch.optim.AdamW(model.parameters(), betas=(0.9, 0.95), foreach=True)\n"  # 7
        "e = torch.optim.AdamW(model.parameters(), **{'betas': (0.9, 0.98), 'lr': 1e-3})\n")})  # 8
    messages = {line: m for _, line, m in found}
    assert sorted(messages) == [4, 5, 6, 7, 8]
    assert "at optimizer step 16628 (beta2=0.999, float32 parameters)" in messages[4]
    assert messages[4].startswith("`torch.optim.AdamW` without `capturable=True`")
    assert "pass `capturable=True` to keep it on the device, or accept the one extra compilation" in messages[4]
    assert "at optimizer step 325 (beta2=0.95, float32 parameters)" in messages[5]
    assert "depends on beta2 (not known here)" in messages[6]
    assert "at optimizer step 709 (beta2=0.95, `foreach=True`)" in messages[7]
    assert "pass `capturable=True` without `foreach=True`" in messages[7]
    assert "at optimizer step 824 (beta2=0.98, float32 parameters)" in messages[8]


@pytest.mark.parametrize("cast", [
    "model = Net().to(torch_xla.device()).to(torch.bfloat16)",
    "model = Net()\nmodel.to(device, dtype=torch.bfloat16)",
    "model = Net()\nmodel.bfloat16()",
])
def test_a_visible_cast_of_the_optimized_model_sets_the_dtype(tmp_path, cast):
    found = _found(tmp_path, {"train.py": HEAD + cast + "\n"
                              "params = [p for p in model.parameters() if p.requires_grad]\n"
                              "opt = torch.optim.AdamW(params, betas=(0.9, 0.95))\n"})
    [(_, _, message)] = found
    assert "at optimizer step 109 (beta2=0.95, bfloat16 parameters)" in message


def test_casts_of_other_tensors_or_conflicting_casts_keep_float32(tmp_path):
    found = _found(tmp_path, {"train.py": HEAD + (
        "model = Net()\nx = batch.to(torch.bfloat16)\n"
        "opt = torch.optim.AdamW(model.parameters(), betas=(0.9, 0.95))\n"
        "other = Net().half()\nother.float()\n"
        "opt2 = torch.optim.AdamW(other.parameters(), betas=(0.9, 0.95))\n")})
    assert [m.count("325 (beta2=0.95, float32 parameters)") for _, _, m in found] == [1, 1]


# -- what is not flagged ----------------------------------------------------------------------

def test_traps(tmp_path):
    found = _found(tmp_path, {"train.py": HEAD + (
        "from torch_xla.amp import syncfree\n"
        "a = torch.optim.AdamW(model.parameters(), capturable=True)\n"
        "b = torch.optim.AdamW(model.parameters(), **{'capturable': True})\n"
        "c = torch.optim.AdamW(model.parameters(), **kwargs)\n"
        "d = torch.optim.AdamW(model.parameters(), capturable=cfg.capturable)\n"
        "e = getattr(torch.optim, 'AdamW')(model.parameters())\n"
        "f = torch.optim.AdamW(model.parameters(), fused=True)\n"
        "g = torch.optim.Adam(model.parameters(), betas=(0.9, 0.0))\n"
        "h = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "if torch.cuda.is_available():\n"
        "    i = torch.optim.AdamW(model.parameters())\n"
        "j = syncfree.AdamW(model.parameters())\n"
        "j.step(found_inf=found_inf)\n")})
    assert found == []


def test_syncfree_without_found_inf_is_flagged(tmp_path):
    found = _found(tmp_path, {"train.py": HEAD + (
        "import torch_xla.amp.syncfree as sf\n"
        "opt = sf.Adam(model.parameters(), betas=(0.9, 0.95))\n"
        "opt.step()\n")})
    assert [(line, "`torch_xla.amp.syncfree.Adam`" in m) for _, line, m in found] == [(4, True)]


def test_syncfree_stepped_with_found_inf_through_optimizer_step_is_not_flagged(tmp_path):
    # pytorch/xla v2.9.0 test/test_syncfree_optimizers.py steps it this way.
    found = _found(tmp_path, {
        "a.py": HEAD + "import torch_xla.core.xla_model as xm\nfrom torch_xla.amp import syncfree\n"
                "opt = syncfree.AdamW(model.parameters())\n"
                "def step(found_inf):\n    xm.optimizer_step(opt, optimizer_args={'found_inf': found_inf})\n",
        "b.py": HEAD + "import torch_xla.core.xla_model as xm\nfrom torch_xla.amp import syncfree\n"
                "opt = syncfree.Adam(model.parameters())\n"
                "def step(found_inf):\n    args = dict(found_inf=found_inf)\n"
                "    xm.optimizer_step(opt, False, args)\n",
        "c.py": HEAD + "import torch_xla.core.xla_model as xm\nfrom torch_xla.amp import syncfree\n"
                "opt = syncfree.AdamW(model.parameters())\n"
                "def step():\n    xm.optimizer_step(opt, optimizer_args={'closure': None})\n",
    })
    assert [(path, line) for path, line, _ in found] == [("c.py", 5)]


def test_test_programs_are_not_flagged(tmp_path):
    code = HEAD + "def test_step():\n    opt = torch.optim.AdamW(model.parameters())\n"
    assert _found(tmp_path, {"tests/test_opt.py": code}) == []


# -- optimizers built in modules without torch_xla -----------------------------------------

def test_each_program_rule_has_its_own_needle():
    assert PROGRAM_RULES == frozenset(PROGRAM_RULES_NEED) and PROGRAM_RULES_NEED["XLA204"] == b"Adam"
    assert PROGRAM_RULES_NEED["XLA202"] == b"DataLoader"


def test_a_plain_trainer_module_is_linted_when_an_xla_script_imports_it(tmp_path):
    trainer = ("import torch\n\n"
               "def build(model):\n"
               "    return torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95))\n")
    data = ("from torch.utils.data import DataLoader\n\n"
            "def loader(ds):\n    return DataLoader(ds, batch_size=64, shuffle=True)\n")
    found = _found(tmp_path, {
        "train.py": "import torch_xla\nfrom trainer import build\nfrom data import loader\n\n"
                    "opt = build(model)\nfor x in loader(ds):\n    pass\n",
        "trainer.py": trainer,
        "data.py": data,
        # The same modules reached only by a program without torch_xla: not XLA code.
        "gpu.py": "from gputrainer import build\nfrom gpudata import loader\n\nopt = build(model)\n",
        "gputrainer.py": trainer,
        "gpudata.py": data,
    }, select=("XLA204", "XLA202"))
    assert [(path, line) for path, line, _ in found] == [("data.py", 4), ("trainer.py", 4)]
    assert "at optimizer step 325" in found[1][2]
