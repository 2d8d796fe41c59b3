"""Step closures (the model's StepClosures): code a file gives to ``xm.add_step_closure`` runs
after the step's graph on every replica, so a replica-only read there is no XLA015 (the class of
shared case c22: a master-only ``.cpu()``/``.item()`` in a logging closure)."""

from __future__ import annotations

from helpers import lint_tree, write_tree

HEAD = (
    "import torch_xla\nimport torch_xla.core.xla_model as xm\n"
    "import torch_xla.distributed.parallel_loader as pl\n"
)


def _xla015(tmp_path, code: str) -> list[int]:
    write_tree(tmp_path, {"train.py": code})
    result, _, _ = lint_tree(tmp_path, select=["XLA015"], preview=True)  # XLA015 is preview
    return [d.line for d in result.diagnostics]


def test_a_master_only_read_in_a_step_closure_is_not_reported(tmp_path):
    code = HEAD + (
        "def _report(step, loss, logits):\n"  # 4
        "    if xm.is_master_ordinal():\n"
        "        preds = logits.cpu().argmax(dim=-1)\n"
        "        print(step, loss.item(), preds, flush=True)\n"
        "def _mp_fn(index):\n"
        "    for step, (x, y) in enumerate(pl.MpDeviceLoader(loader, dev)):\n"
        "        loss = model(x).sum()\n        loss.backward()\n        xm.optimizer_step(opt)\n"
        "        if step % 10 == 0:\n"
        "            xm.add_step_closure(_report, args=(step, loss, model(x)))\n"
        "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"
    )
    assert _xla015(tmp_path, code) == []


def test_the_same_read_outside_a_closure_is_still_reported(tmp_path):
    code = HEAD + (
        "def _report(step, loss):\n"  # 4
        "    if xm.is_master_ordinal():\n"
        "        print(step, loss.item(), flush=True)\n"  # 6
        "def _mp_fn(index):\n"
        "    for step, (x, y) in enumerate(pl.MpDeviceLoader(loader, dev)):\n"
        "        loss = model(x).sum()\n        loss.backward()\n        xm.optimizer_step(opt)\n"
        "        _report(step, loss)\n"
        "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn, args=())\n"
    )
    assert _xla015(tmp_path, code) == [6]
