"""XLA204 adam-scalar-recompile: Adam/AdamW without `capturable=True`, beyond the rule's own
examples: the predicted step (tied to CPU measurements in tests/runtime/test_adam_recompile.py),
the dtype and `foreach` it depends on (casts, `from_pretrained(torch_dtype=...)`,
`torch.set_default_dtype`), the traps, training that never reaches the step (literal loop
counts), steps under `torch.compile`, and optimizers built in modules without torch_xla."""

from __future__ import annotations

import random

import libcst as cst
import pytest
from helpers import lint_tree, write_tree

from xla_lint.analysis.context import FileContext
from xla_lint.analysis.walk import iter_nodes
from xla_lint.pipeline.run import PROGRAM_RULES, PROGRAM_RULES_NEED
from xla_lint.rules.recompilation.adam_scalar import literal_iterations
from xla_lint.scalars import recompile_step, round_to

HEAD = "import torch\nimport torch_xla\n"


def _found(tmp_path, files, select=("XLA204",)):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=list(select), preview=True)
    return [(d.path, d.line, d.message) for d in result.diagnostics]


# -- the predicted step -------------------------------------------------------------------


@pytest.mark.parametrize(
    "beta2,step", [(0.9, 158), (0.95, 325), (0.98, 824), (0.99, 1656), (0.999, 16628)]
)
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
    for beta2, dtype in [
        (0.95, "float32"),
        (0.999, "bfloat16"),
        (0.9, "float64"),
        (0.9999, "float32"),
    ]:
        step = recompile_step(beta2, dtype)
        assert round_to((1 - beta2 ** float(step)) ** 0.5, dtype) == 1.0
        assert round_to((1 - beta2 ** float(step - 1)) ** 0.5, dtype) < 1.0


def test_values_torch_rejects_or_that_never_change_the_graph():
    assert recompile_step(0.0) == 1  # the correction is 1.0 from the first step: one graph
    assert (
        recompile_step(1.0) is None
        and recompile_step(-0.1) is None
        and recompile_step(True) is None
    )
    assert recompile_step("0.95") is None


def test_rounding_matches_torch():
    torch = pytest.importorskip("torch")
    rng = random.Random(0)
    values = [1 - rng.random() * 10 ** -rng.uniform(1, 9) for _ in range(2000)] + [
        1 - 2**-25,
        1 - 2**-9,
    ]
    for name in ("float32", "bfloat16", "float16"):
        dtype = getattr(torch, name)
        for v in values:  # a wrapped Python number is a float64 tensor, converted with .to(dtype)
            assert round_to(v, name) == torch.tensor(v, dtype=torch.float64).to(dtype).item(), (
                name,
                v,
            )


# -- messages ------------------------------------------------------------------------------


def test_message_names_the_step_the_dtype_and_the_fix(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": HEAD
            + (
                "model = Net().to(torch_xla.device())\n"
                "a = torch.optim.AdamW(model.parameters(), lr=1e-4)\n"  # 4: default betas
                "b = torch.optim.Adam(model.parameters(), betas=(beta1, 0.95))\n"  # 5: beta2 known
                "c = torch.optim.Adam(model.parameters(), betas=config.betas)\n"  # 6: unknown
                "d = torch.optim.AdamW(model.parameters(), betas=(0.9, 0.95), foreach=True)\n"  # 7
                "e = torch.optim.AdamW(model.parameters(), **{'betas': (0.9, 0.98), 'lr': 1e-3})\n"
            )
        },
    )  # 8
    messages = {line: m for _, line, m in found}
    assert sorted(messages) == [4, 5, 6, 7, 8]
    assert "at optimizer step 16628 (beta2=0.999, float32 parameters)" in messages[4]
    assert messages[4].startswith("`torch.optim.AdamW` without `capturable=True`")
    assert (
        "pass `capturable=True` to keep it on the device, or accept the one extra compilation"
        in messages[4]
    )
    assert "at optimizer step 325 (beta2=0.95, float32 parameters)" in messages[5]
    assert "depends on beta2 (not known here)" in messages[6]
    assert "at optimizer step 709 (beta2=0.95, `foreach=True`)" in messages[7]
    assert "pass `capturable=True` without `foreach=True`" in messages[7]
    assert "at optimizer step 824 (beta2=0.98, float32 parameters)" in messages[8]


@pytest.mark.parametrize(
    "cast",
    [
        "model = Net().to(torch_xla.device()).to(torch.bfloat16)",
        "model = Net()\nmodel.to(device, dtype=torch.bfloat16)",
        "model = Net()\nmodel.bfloat16()",
    ],
)
def test_a_visible_cast_of_the_optimized_model_sets_the_dtype(tmp_path, cast):
    found = _found(
        tmp_path,
        {
            "train.py": HEAD + cast + "\n"
            "params = [p for p in model.parameters() if p.requires_grad]\n"
            "opt = torch.optim.AdamW(params, betas=(0.9, 0.95))\n"
        },
    )
    [(_, _, message)] = found
    assert "at optimizer step 109 (beta2=0.95, bfloat16 parameters)" in message


def test_casts_of_other_tensors_or_conflicting_casts_keep_float32(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": HEAD
            + (
                "model = Net()\nx = batch.to(torch.bfloat16)\n"
                "opt = torch.optim.AdamW(model.parameters(), betas=(0.9, 0.95))\n"
                "other = Net().half()\nother.float()\n"
                "opt2 = torch.optim.AdamW(other.parameters(), betas=(0.9, 0.95))\n"
            )
        },
    )
    assert [m.count("325 (beta2=0.95, float32 parameters)") for _, _, m in found] == [1, 1]


# -- what is not flagged ----------------------------------------------------------------------


def test_traps(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": HEAD
            + (
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
                "j.step(found_inf=found_inf)\n"
            )
        },
    )
    assert found == []


def test_syncfree_without_found_inf_is_flagged(tmp_path):
    found = _found(
        tmp_path,
        {
            "train.py": HEAD
            + (
                "import torch_xla.amp.syncfree as sf\n"
                "opt = sf.Adam(model.parameters(), betas=(0.9, 0.95))\n"
                "for x in loader:\n    opt.step()\n"
            )
        },
    )
    assert [(line, "`torch_xla.amp.syncfree.Adam`" in m) for _, line, m in found] == [(4, True)]


def test_syncfree_stepped_with_found_inf_through_optimizer_step_is_not_flagged(tmp_path):
    # pytorch/xla v2.9.0 test/test_syncfree_optimizers.py steps it this way.
    found = _found(
        tmp_path,
        {
            "a.py": HEAD
            + "import torch_xla.core.xla_model as xm\nfrom torch_xla.amp import syncfree\n"
            "opt = syncfree.AdamW(model.parameters())\n"
            "def step(found_inf):\n    xm.optimizer_step(opt, optimizer_args={'found_inf': found_inf})\n",
            "b.py": HEAD
            + "import torch_xla.core.xla_model as xm\nfrom torch_xla.amp import syncfree\n"
            "opt = syncfree.Adam(model.parameters())\n"
            "def step(found_inf):\n    args = dict(found_inf=found_inf)\n"
            "    xm.optimizer_step(opt, False, args)\n",
            "c.py": HEAD
            + "import torch_xla.core.xla_model as xm\nfrom torch_xla.amp import syncfree\n"
            "opt = syncfree.AdamW(model.parameters())\n"
            "def step():\n    xm.optimizer_step(opt, optimizer_args={'closure': None})\n",
        },
    )
    assert [(path, line) for path, line, _ in found] == [("c.py", 5)]


def test_test_programs_are_not_flagged(tmp_path):
    code = HEAD + "def test_step():\n    opt = torch.optim.AdamW(model.parameters())\n"
    assert _found(tmp_path, {"tests/test_opt.py": code}) == []


# -- optimizers built in modules without torch_xla -----------------------------------------


def test_each_program_rule_has_its_own_needle():
    assert (
        PROGRAM_RULES == frozenset(PROGRAM_RULES_NEED) and PROGRAM_RULES_NEED["XLA204"] == b"Adam"
    )
    assert PROGRAM_RULES_NEED["XLA202"] == b"DataLoader"


def test_a_plain_trainer_module_is_linted_when_an_xla_script_imports_it(tmp_path):
    trainer = (
        "import torch\n\n"
        "def build(model):\n"
        "    return torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95))\n"
    )
    data = (
        "from torch.utils.data import DataLoader\n\n"
        "def loader(ds):\n    return DataLoader(ds, batch_size=64, shuffle=True)\n"
    )
    found = _found(
        tmp_path,
        {
            "train.py": "import torch_xla\nfrom trainer import build\nfrom data import loader\n\n"
            "opt = build(model)\nfor x in loader(ds):\n    pass\n",
            "trainer.py": trainer,
            "data.py": data,
            # The same modules reached only by a program without torch_xla: not XLA code.
            "gpu.py": "from gputrainer import build\nfrom gpudata import loader\n\nopt = build(model)\n",
            "gputrainer.py": trainer,
            "gpudata.py": data,
        },
        select=("XLA204", "XLA202"),
    )
    assert [(path, line) for path, line, _ in found] == [("data.py", 4), ("trainer.py", 4)]
    assert "at optimizer step 325" in found[1][2]


# -- how far the training goes: loops with a literal count ----------------------------------


def _loop_of(code):
    """The first `for`/`while` loop of ``code`` with its file context."""
    module = cst.parse_module(code)
    ctx = FileContext(module)
    loop = next(n for n in iter_nodes(module) if type(n) in (cst.For, cst.While))
    return ctx, loop


@pytest.mark.parametrize(
    "code,count",
    [
        ("for i in range(100):\n    pass\n", 100),
        ("for i in range(1, 11):\n    pass\n", 10),
        ("for i in range(0, 100, 10):\n    pass\n", 10),
        ("for i in [2048]:\n    pass\n", 1),
        ("for lr, wd in ((1e-3, 0.1), (1e-4, 0.0)):\n    pass\n", 2),
        ("for step in tqdm(range(100)):\n    pass\n", 100),
        ("for i, x in enumerate(tqdm([1, 2, 3])):\n    pass\n", 3),
        ("for i in trange(50):\n    pass\n", 50),
        ("STEPS = 200\nfor i in range(STEPS):\n    pass\n", 200),
        ("STEPS = 200\nfor i in range(STEPS * 2):\n    pass\n", 400),
        ("for i in range(10, 0):\n    pass\n", 0),
        # Not fixed by the file: a loader, an option (even with a default), a call, a while loop.
        ("for x in loader:\n    pass\n", None),
        (
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('--steps', type=int, default=10)\n"
            "args = p.parse_args()\nfor i in range(args.steps):\n    pass\n",
            None,
        ),
        ("for i in range(len(loader)):\n    pass\n", None),
        ("for i in range(n):\n    pass\n", None),
        ("for i in [*a, 1]:\n    pass\n", None),
        ("for i in range(0, 10, 0):\n    pass\n", None),
        ("while True:\n    pass\n", None),
        ("while step < 100:\n    pass\n", None),
    ],
)
def test_literal_iterations(code, count):
    ctx, loop = _loop_of(code)
    assert literal_iterations(ctx, loop, ctx.root_scope) == count


TRAIN = (
    HEAD
    + "model = Net().to(torch_xla.device())\nopt = torch.optim.AdamW(model.parameters(), lr=1e-4)\n"
)


@pytest.mark.parametrize(
    "loop",
    [
        # shard_simple.py: one step, not in a loop.
        "opt.step()\nxm.mark_step()\n",
        # fsdp.py: a loop over a one-element list.
        "for i in [2048]:\n    opt.step()\n",
        # shard_cnn1d.py, train_with_spmd.py: short literal ranges, in a function called once.
        "for i in tqdm(range(100)):\n    opt.step()\n",
        "def train():\n    for epoch in range(10):\n        opt.step()\n\nif __name__ == '__main__':\n    train()\n",
        # 100 x 100 = 10000 steps < 16628.
        "for epoch in range(100):\n    for i, x in enumerate(range(100)):\n        opt.step()\n",
        "STEPS = 1000\nfor i in range(STEPS):\n    xm.optimizer_step(opt)\n",
        # A step function called from a literal loop; a method called from one.
        "def train_step(x):\n    loss(x).backward()\n    opt.step()\n\nfor i in range(500):\n    train_step(i)\n",
        "class T:\n    def update(self):\n        opt.step()\n    def fit(self):\n        for i in range(10):\n"
        "            self.update()\n\nT().fit()\n",
        # The spawned function runs once in each process.
        "import torch_xla.distributed.xla_multiprocessing as xmp\n"
        "def main(index):\n    for i in [128, 256]:\n        opt.step()\n\nxmp.spawn(main, args=())\n",
    ],
)
def test_training_that_never_reaches_the_step_is_not_flagged(tmp_path, loop):
    code = TRAIN.replace(
        "import torch_xla\n",
        "import torch_xla\nimport torch_xla.core.xla_model as xm\nfrom tqdm import tqdm\n",
    )
    assert _found(tmp_path, {"train.py": code + loop}) == []


@pytest.mark.parametrize(
    "loop",
    [
        "for x in loader:\n    opt.step()\n",
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--steps', type=int, default=10)\n"
        "args = parser.parse_args()\nfor i in range(args.steps):\n    opt.step()\n",
        "while True:\n    opt.step()\n",
        "for i in range(20000):\n    opt.step()\n",
        "for epoch in range(200):\n    for i in range(100):\n        opt.step()\n",  # 20000 steps
        "for i in range(10000):\n    opt.step()\nfor i in range(10000):\n    opt.step()\n",  # two loops: 20000
        # A step function called from a loader loop, or handed to code the file does not show.
        "def train_step(x):\n    opt.step()\n\nfor x in loader:\n    train_step(x)\n",
        "def train_step(x):\n    opt.step()\n\ntrainer = Trainer(step_fn=train_step)\n",
        "def train_step(x):\n    opt.step()\n",
        "class T:\n    def update(self):\n        self.opt.step()\n    def fit(self, loader):\n        for x in loader:\n"
        "            self.update()\n",
        "for x in loader:\n    scaler.step(opt)\n",
        "for x in loader:\n    fn = lambda: opt.step()\n    fn()\n",
        # A step the file does not show (the optimizer is handed to a trainer): today's finding.
        "trainer = Trainer(model, optimizers=(opt, None))\n",
    ],
)
def test_training_that_may_reach_the_step_is_flagged(tmp_path, loop):
    assert [line for _, line, _ in _found(tmp_path, {"train.py": TRAIN + loop})] == [4]


def test_the_bound_is_compared_with_the_step_of_the_dtype_and_beta2(tmp_path):
    loop = "for epoch in range(100):\n    for i in range(100):\n        opt.step()\n"  # 10000 steps
    assert _found(tmp_path, {"a.py": TRAIN + loop}) == []  # float32: 16628
    bf16 = TRAIN.replace(".to(torch_xla.device())", ".to(torch_xla.device()).bfloat16()")
    [(_, _, message)] = _found(tmp_path, {"a.py": bf16 + loop})
    assert "at optimizer step 5544 (beta2=0.999, bfloat16 parameters)" in message
    beta = TRAIN.replace("lr=1e-4", "lr=1e-4, betas=(0.9, 0.95)")
    assert len(_found(tmp_path, {"a.py": beta + "for i in range(325):\n    opt.step()\n"})) == 1
    assert _found(tmp_path, {"a.py": beta + "for i in range(324):\n    opt.step()\n"}) == []


def test_unknown_beta2_is_silent_only_for_a_single_step(tmp_path):
    code = HEAD + "opt = torch.optim.AdamW(model.parameters(), betas=cfg.betas)\n"
    assert _found(tmp_path, {"a.py": code + "opt.step()\n"}) == []
    assert len(_found(tmp_path, {"a.py": code + "for i in range(100):\n    opt.step()\n"})) == 1


def test_an_optimizer_not_assigned_to_a_name_keeps_the_finding(tmp_path):
    code = HEAD + (
        "def build(model):\n    return torch.optim.AdamW(model.parameters())\n"
        "opt = build(model)\nopt.step()\n"
    )
    assert [line for _, line, _ in _found(tmp_path, {"a.py": code})] == [4]


# -- steps under torch.compile ----------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        # HeegyuKim/torch-xla-SPMD train_with_spmd.py `compiled_train`, with a loader loop.
        "def compiled_train():\n    optimizer = torch.optim.AdamW(model.parameters())\n"
        "    def train_model(model, x, optimizer):\n        model(x).sum().backward()\n        optimizer.step()\n"
        "    compiled_step = torch.compile(train_model, backend='openxla')\n"
        "    for x in loader:\n        compiled_step(model, x, optimizer)\n",
        "opt = torch.optim.AdamW(model.parameters())\n@torch.compile(backend='openxla')\n"
        "def step(x):\n    opt.step()\nfor x in loader:\n    step(x)\n",
        "from torch import compile\nopt = torch.optim.AdamW(model.parameters())\n@compile\n"
        "def step(x):\n    update()\ndef update():\n    opt.step()\nfor x in loader:\n    step(x)\n",
    ],
)
def test_steps_run_by_torch_compile_are_not_flagged(tmp_path, code):
    assert _found(tmp_path, {"a.py": HEAD + code}) == []


@pytest.mark.parametrize(
    "code",
    [
        # The same function also called eagerly.
        "opt = torch.optim.AdamW(model.parameters())\ndef step(x):\n    opt.step()\n"
        "compiled = torch.compile(step, backend='openxla')\nfor x in loader:\n    step(x)\n",
        # torch_xla.compile traces lazily, without dynamo: `_get_value` still calls `.item()`.
        "opt = torch.optim.AdamW(model.parameters())\ndef step(x):\n    opt.step()\n"
        "compiled = torch_xla.compile(step)\nfor x in loader:\n    compiled(x)\n",
        # Only the model is compiled; the step is eager.
        "opt = torch.optim.AdamW(model.parameters())\nmodel = torch.compile(model, backend='openxla')\n"
        "for x in loader:\n    model(x).sum().backward()\n    opt.step()\n",
    ],
)
def test_steps_outside_torch_compile_are_flagged(tmp_path, code):
    assert len(_found(tmp_path, {"a.py": HEAD + code})) == 1


# -- the dtype a model is built in ---------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        "model = AutoModelForCausalLM.from_pretrained('google/gemma-2b', torch_dtype=torch.bfloat16)",
        "model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16).to(torch_xla.device())",
        "model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)\nmodel = FSDP(model)",
        "from torch import bfloat16\nmodel = GemmaForCausalLM.from_pretrained(name, torch_dtype=bfloat16)",
        "torch.set_default_dtype(torch.bfloat16)\nmodel = Net()",
        "torch.set_default_dtype(torch.bfloat16)\ndef main():\n    model = Net().to(torch_xla.device())\n"
        "    return torch.optim.AdamW(model.parameters())",
    ],
)
def test_the_dtype_a_model_is_built_in(tmp_path, build):
    code = HEAD + build + "\n"
    if "return" not in build:
        code += "opt = torch.optim.AdamW(model.parameters())\n"
    [(_, _, message)] = _found(tmp_path, {"a.py": code})
    assert "at optimizer step 5544 (beta2=0.999, bfloat16 parameters)" in message


@pytest.mark.parametrize(
    "build",
    [
        "model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=args.dtype)",
        "model = AutoModelForCausalLM.from_pretrained(name, torch_dtype='auto')",
        "model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\nmodel.float()",
        "model = AutoModelForCausalLM.from_pretrained(name)",
        "model = Net()\ntorch.set_default_dtype(torch.bfloat16)",
        "torch.set_default_dtype(dtype)\nmodel = Net()",
        "torch.set_default_dtype(torch.bfloat16)\ntorch.set_default_dtype(torch.float32)\nmodel = Net()",
        "if bf16:\n    model = A.from_pretrained(n, torch_dtype=torch.bfloat16)\nelse:\n    model = A.from_pretrained(n)",
    ],
)
def test_dtypes_the_file_does_not_fix_keep_float32(tmp_path, build):
    code = HEAD + build + "\nopt = torch.optim.AdamW(model.parameters())\n"
    [(_, _, message)] = _found(tmp_path, {"a.py": code})
    assert "at optimizer step 16628 (beta2=0.999, float32 parameters)" in message
