"""XLA016 in the order a step runs its calls, through the file's own helpers (the class of shared
case c31: a clip in ``self._clip()`` called before ``xm.optimizer_step``), and never for a clip
bounded by infinity, which measures the norm and changes nothing."""

from __future__ import annotations

import pytest
from helpers import lint_tree, write_tree

HEAD = (
    "import math\nimport numpy as np\nimport torch\nimport torch_xla\n"
    "import torch_xla.core.xla_model as xm\n"
)
LAUNCH = "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"


def _found(tmp_path, files: dict[str, str]) -> list[tuple[str, int, str]]:
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA016"])
    return sorted((d.path, d.line, d.message) for d in result.diagnostics)


def _lines(tmp_path, code: str) -> list[int]:
    return [line for _, line, _ in _found(tmp_path, {"train.py": code})]


# Shared case c31, restated: a measuring clip (max_norm=inf) and a clipping helper, both before
# xm.optimizer_step in a method of a trainer that torch_xla.launch runs.
C31 = (
    "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"
    "import torch_xla.distributed.parallel_loader as pl\n"
    "from torch.utils.data import DataLoader, TensorDataset\n"
    "\n\n"
    "class Trainer:\n"  # 8
    "    def __init__(self, model, opt):\n"
    "        self.model = model\n"
    "        self.opt = opt\n"
    "\n"
    "    def _clip(self):\n"  # 13
    "        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=1.0)\n"  # 14
    "\n"
    "    def train_step(self, x, y):\n"
    "        self.opt.zero_grad()\n"
    "        loss = torch.nn.functional.mse_loss(self.model(x), y)\n"
    "        loss.backward()\n"
    "        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), "
    'max_norm=float("inf"))\n'  # 20
    "        self._clip()\n"
    "        xm.optimizer_step(self.opt)\n"
    "        return loss, grad_norm\n"
    "\n\n"
    "def _mp_fn(index):\n"
    "    device = torch_xla.device()\n"
    "    model = torch.nn.Linear(32, 1).to(device)\n"
    "    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.01))\n"
    "    data = TensorDataset(torch.randn(256, 32), torch.randn(256, 1))\n"
    "    for x, y in pl.MpDeviceLoader(DataLoader(data, batch_size=16, drop_last=True), device):\n"
    "        trainer.train_step(x, y)\n"
    "\n\n"
    'if __name__ == "__main__":\n'
    "    torch_xla.launch(_mp_fn, args=())\n"
)


def test_c31_the_clip_in_the_helper_is_reported_and_the_measuring_one_is_not(tmp_path):
    found = _found(tmp_path, {"train.py": C31})
    assert [(path, line) for path, line, _ in found] == [("train.py", 14)]
    assert "(`Trainer.train_step` calls `_clip()` before it)" in found[0][2]


def test_c31_without_the_launch_is_one_process_and_in_spmd_the_gradient_is_global(tmp_path):
    single = C31.replace("    torch_xla.launch(_mp_fn, args=())\n", "    _mp_fn(0)\n")
    assert _lines(tmp_path, single) == []
    spmd = C31.replace(
        "import torch_xla.core.xla_model as xm\n",
        "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\nxr.use_spmd()\n",
    )
    assert _lines(tmp_path, spmd) == []


@pytest.mark.parametrize(
    "launch, reported",
    [
        ("xmp.spawn(_mp_fn, nprocs=1)", False),
        ("xmp.spawn(_mp_fn, args=(), nprocs=NPROCS)", False),
        ("torch_xla.launch(_mp_fn, debug_single_process=True)", False),
        ("xmp.spawn(_mp_fn, nprocs=None)", True),
        ("xmp.spawn(_mp_fn, nprocs=args.nprocs)", True),
        ("xmp.spawn(_mp_fn, nprocs=1)\n    torch_xla.launch(_mp_fn)", True),
    ],
)
def test_a_file_whose_launches_all_run_one_process_reduces_nothing(tmp_path, launch, reported):
    code = HEAD + (
        "import torch_xla.distributed.xla_multiprocessing as xmp\nNPROCS = 1\n"
        "def _mp_fn(i):\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"  # 9
        "    xm.optimizer_step(opt)\n"
        f"if __name__ == '__main__':\n    {launch}\n"
    )
    assert _lines(tmp_path, code) == ([9] if reported else [])


def test_a_helper_in_another_module_of_a_multiprocess_program_is_reported_there(tmp_path):
    trainer = C31.split("\n\ndef _mp_fn")[0] + "\n"
    main = (
        "import torch_xla\nfrom trainer import Trainer\n"
        "def _mp_fn(index):\n    Trainer(model, opt).train_step(x, y)\n" + LAUNCH
    )
    found = _found(tmp_path, {"trainer.py": trainer, "main.py": main})
    assert [(path, line) for path, line, _ in found] == [("trainer.py", 14)]
    assert "main.py" in found[0][2]  # the program whose launch the finding rests on


@pytest.mark.parametrize(
    "bound",
    [
        'float("inf")',
        "float('Inf')",
        "float('infinity')",
        "math.inf",
        "torch.inf",
        "np.inf",
        "max_norm=np.inf",
        "max_norm=NO_CLIP",
        "max_norm=INF",
    ],
)
def test_an_infinite_bound_clips_nothing(tmp_path, bound):
    code = (
        HEAD
        + (
            "NO_CLIP = float('inf')\nINF = math.inf\n"
            "def _mp_fn(i):\n"
            "    loss.backward()\n"
            f"    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), {bound})\n"
            "    xm.optimizer_step(opt)\n"
        )
        + LAUNCH
    )
    assert _lines(tmp_path, code) == []
    value = code.replace("clip_grad_norm_", "clip_grad_value_").replace("max_norm=", "clip_value=")
    assert _lines(tmp_path, value) == []


@pytest.mark.parametrize("bound", ["1.0", "1e9", "max_norm=args.max_norm", "float('-inf')"])
def test_a_finite_or_unknown_bound_clips(tmp_path, bound):
    code = (
        HEAD
        + (
            "def _mp_fn(i):\n"
            "    loss.backward()\n"
            f"    torch.nn.utils.clip_grad_norm_(model.parameters(), {bound})\n"  # 8
            "    xm.optimizer_step(opt)\n"
        )
        + LAUNCH
    )
    assert _lines(tmp_path, code) == [8]


def test_the_step_in_a_helper_counts_and_the_message_names_both(tmp_path):
    code = (
        HEAD
        + (
            "class Trainer:\n"  # 6
            "    def _clip(self):\n"
            "        return torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)\n"  # 8
            "    def _xla_step(self):\n"
            "        xm.optimizer_step(self.optimizer)\n"
            "    def _do_step(self):\n"
            "        norm = self._clip()\n"
            "        self._xla_step()\n"
            "    def _direct(self):\n"
            "        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 2.0)\n"  # 15
            "        self._xla_step()\n"
            "def _mp_fn(i):\n    Trainer()._do_step()\n"
        )
        + LAUNCH
    )
    found = _found(tmp_path, {"train.py": code})
    assert [line for _, line, _ in found] == [8, 15]
    assert "(`Trainer._do_step` calls `_clip()`, then `_xla_step()`, which runs it)" in found[0][2]
    assert "(`Trainer._direct` clips, then calls `_xla_step()`, which runs it)" in found[1][2]


def test_order_decides_a_helper_called_after_the_step_or_after_the_reduction(tmp_path):
    code = (
        HEAD
        + (
            "def clip(model):\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"  # 7
            "def after_step():\n"
            "    loss.backward()\n    xm.optimizer_step(opt)\n    clip(model)\n"
            "def after_reduce():\n"
            "    loss.backward()\n    xm.reduce_gradients(opt)\n    clip(model)\n    opt.step()\n"
            "def _mp_fn(i):\n    after_step()\n    after_reduce()\n"
        )
        + LAUNCH
    )
    assert _lines(tmp_path, code) == []
    before = code.replace(
        "def _mp_fn(i):\n",
        "def before():\n    clip(model)\n    xm.optimizer_step(opt)\ndef _mp_fn(i):\n",
    )
    assert _lines(tmp_path, before) == [7]  # the one clip, reported once


def test_different_arms_of_an_if_never_run_together(tmp_path):
    code = (
        HEAD
        + (
            "def _mp_fn(i):\n"
            "    loss.backward()\n"
            "    if args.cpu:\n"
            "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "        opt.step()\n"
            "    else:\n"
            "        xm.optimizer_step(opt)\n"
            "def other(i):\n"
            "    if args.clip:\n"
            "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"  # 15
            "    xm.optimizer_step(opt)\n"
        )
        + LAUNCH
    )
    assert _lines(tmp_path, code) == [15]
    reduced_elsewhere = code.replace(
        "    if args.clip:\n",
        "    if args.reduce:\n        xm.reduce_gradients(opt)\n    if args.clip:\n",
    )
    # a reduction in an earlier if may have run: the clip may follow it, so it is not flagged
    assert _lines(tmp_path, reduced_elsewhere) == []


def test_recursive_helpers_end(tmp_path):
    code = (
        HEAD
        + (
            "def a(n):\n    b(n)\n    torch.nn.utils.clip_grad_value_(params, 0.5)\n"  # 8
            "def b(n):\n    a(n - 1)\n"
            "def _mp_fn(i):\n    a(3)\n    xm.optimizer_step(opt)\n"
        )
        + LAUNCH
    )
    assert _lines(tmp_path, code) == [8]


def test_a_clip_in_a_base_class_method_of_the_file_is_reported(tmp_path):
    code = (
        HEAD
        + (
            "class BaseTrainer:\n"  # 6
            "    def clip_gradients(self):\n"
            "        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)\n"  # 8
            "class XlaTrainer(BaseTrainer):\n"
            "    def step(self, loss):\n"
            "        loss.backward()\n"
            "        self.clip_gradients()\n"
            "        xm.optimizer_step(self.opt)\n"
            "class ReducingTrainer(BaseTrainer):\n"
            "    def step(self, loss):\n"
            "        loss.backward()\n"
            "        xm.reduce_gradients(self.opt)\n"
            "        self.clip_gradients()\n"
            "        self.opt.step()\n"
            "def _mp_fn(i):\n    XlaTrainer().step(loss)\n"
        )
        + LAUNCH
    )
    found = _found(tmp_path, {"train.py": code})
    assert [line for _, line, _ in found] == [8]
    assert "(`XlaTrainer.step` calls `clip_gradients()` before it)" in found[0][2]
