"""XLA017 does not report loaders handed to accelerate or Lightning, which install the distributed
sampler themselves; loaders those libraries never see are still reported."""

from __future__ import annotations

from helpers import lint_tree, write_tree

HEAD = "import torch_xla\nfrom torch.utils.data import DataLoader\n"


def _lines(tmp_path, code: str) -> list[int]:
    write_tree(tmp_path, {"train.py": code})
    result, _, _ = lint_tree(
        tmp_path, select=["XLA017"], preview=True, entry_points={"train.py": "single"}
    )
    return [d.line for d in result.diagnostics if d.code == "XLA017"]


def test_self_attribute_prepared_in_another_method_of_the_same_class(tmp_path):
    code = HEAD + (
        "from accelerate import Accelerator\n"
        "class Prepared:\n"
        "    def __init__(self):\n"
        "        self.train_dl = DataLoader(ds, batch_size=8)\n"  # 6: prepared in fit()
        "    def fit(self):\n"
        "        self.train_dl = self.accelerator.prepare(self.train_dl)\n"
        "class Plain:\n"
        "    def __init__(self):\n"
        "        self.train_dl = DataLoader(ds, batch_size=8)\n"  # 11: never prepared
        "    def fit(self):\n"
        "        for batch in self.train_dl:\n            pass\n"
        "def _mp_fn(i):\n    Prepared().fit()\n    Plain().fit()\n"
        "torch_xla.launch(_mp_fn)\n"
    )
    assert _lines(tmp_path, code) == [11]


def test_a_helper_s_loader_counts_only_where_its_result_is_handed_over(tmp_path):
    code = HEAD + (
        "from accelerate import Accelerator\n"
        "def make_loaders():\n"
        "    train_dl = DataLoader(ds, batch_size=8)\n"  # 5: its caller prepares it
        "    return train_dl, None\n"
        "def make_raw():\n"
        "    return DataLoader(ds, batch_size=8)\n"  # 8: iterated as it is
        "def _mp_fn(i):\n"
        "    accelerator = Accelerator()\n"
        "    train_dl, extra = make_loaders()\n"
        "    model, train_dl = accelerator.prepare(model, train_dl)\n"
        "    for batch in make_raw():\n        pass\n"
        "torch_xla.launch(_mp_fn)\n"
    )
    assert _lines(tmp_path, code) == [8]


def test_use_distributed_sampler_false_turns_off_lightning_hand_offs_only(tmp_path):
    code = HEAD + (
        "from lightning.pytorch import LightningModule, Trainer\n"
        "from accelerate import Accelerator\n"
        "class Model(LightningModule):\n"
        "    def train_dataloader(self):\n"
        "        return DataLoader(ds, batch_size=8)\n"  # 7: the Trainer keeps its sampler
        "def _mp_fn(i):\n"
        "    trainer = Trainer(use_distributed_sampler=False)\n"
        "    trainer.fit(Model(), DataLoader(ds, batch_size=8))\n"  # 10
        "    Accelerator().prepare(DataLoader(ds, batch_size=8))\n"  # 11: accelerate still shards
        "torch_xla.launch(_mp_fn)\n"
    )
    assert _lines(tmp_path, code) == [7, 10]


def test_a_hook_method_of_a_class_that_is_not_lightning_s_is_reported(tmp_path):
    code = HEAD + (
        "import lightning\n"
        "class LocalBase:\n    pass\n"
        "class Data(LocalBase):\n"
        "    def train_dataloader(self):\n"
        "        return DataLoader(ds, batch_size=8)\n"  # 8
        "def _mp_fn(i):\n    Data().train_dataloader()\n"
        "torch_xla.launch(_mp_fn)\n"
    )
    assert _lines(tmp_path, code) == [8]
