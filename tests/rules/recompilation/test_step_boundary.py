"""XLA203 (missing step boundary) on loops fed by device loaders through the program's flow
(issue 21 items 1 and 4; shared case c23): each test lints a small tree through the real
engine, so the per-file flow, the program join and ``finalize`` all take part."""

from __future__ import annotations

from pathlib import Path

from helpers import lint_tree, write_tree

CASE = Path("/work/shared/cases-flow/c23-device-loader-through-flow")

HEAD = (
    "import itertools\nimport torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"
    "import torch_xla.distributed.parallel_loader as pl\n"
    "from torch.utils.data import DataLoader\n"
)
STEP = "        loss = model(x).sum()\n        loss.backward()\n        opt.step()\n"  # a training step with no boundary, 8 spaces in (inside a loop inside a function)


def _xla203(tmp_path: Path, files: dict[str, str]) -> set[tuple[str, int]]:
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA203"], preview=True)  # a preview rule
    return {(d.path, d.line) for d in result.diagnostics if d.code == "XLA203"}


def test_shared_case_c23_reports_only_the_plain_dataloader_loop(tmp_path):
    files = {p.name: p.read_text() for p in CASE.glob("*.py")}
    if not files:  # the shared case as it stands (kept in this test when /work/shared is absent)
        files = {
            "loop.py": (
                "import torch\nimport torch_xla.core.xla_model as xm\n\n\n"
                "def run_epoch(model, opt, loader):\n    for x, y in loader:\n"
                "        loss = model(x).sum()\n        loss.backward()\n"
                "        xm.optimizer_step(opt)\n"
            ),
        }
    assert _xla203(tmp_path, files) == ({("finetune.py", 15)} if "finetune.py" in files else set())


def test_or_and_if_else_with_a_loader_operand(tmp_path):
    code = HEAD + (
        "def main(skip, cpu_loader, device):\n"
        "    loader = pl.MpDeviceLoader(cpu_loader, device)\n"
        "    resumed = itertools.islice(loader, skip, None) if skip else None\n"
        "    for x in (resumed or loader):\n"
        + STEP
        + "    for x in (loader if skip else None):\n"
        + STEP
        + "    plain = DataLoader(data)\n"
        "    for x in (None or plain):\n" + STEP + "main(0, DataLoader(data), torch_xla.device())\n"
    )
    assert _xla203(tmp_path, {"train.py": code}) == {("train.py", 19)}


def test_islice_iter_and_enumerate_of_a_loader(tmp_path):
    code = HEAD + (
        "def main(cpu_loader, device):\n"
        "    it = iter(pl.MpDeviceLoader(cpu_loader, device))\n"
        "    for step, x in enumerate(itertools.islice(it, 3, None)):\n"
        + STEP
        + "main(DataLoader(data), torch_xla.device())\n"
    )
    assert _xla203(tmp_path, {"train.py": code}) == set()


def test_parameter_in_the_same_module(tmp_path):
    code = HEAD + (
        "def run(model, opt, loader):\n    for x in loader:\n"
        + STEP
        + "def main(cpu_loader, device):\n"
        "    run(model, opt, loader=pl.MpDeviceLoader(cpu_loader, device))\n"
        "if __name__ == '__main__':\n    main(DataLoader(data), torch_xla.device())\n"
    )
    assert _xla203(tmp_path, {"train.py": code}) == set()


def test_parameter_of_another_module(tmp_path):
    loop = HEAD + "def run_epoch(model, opt, loader):\n    for x in loader:\n" + STEP
    train = HEAD + (
        "from loop import run_epoch\n"
        "def main(cpu_loader, device):\n    device_loader = pl.MpDeviceLoader(cpu_loader, device)\n"
        "    for epoch in range(3):\n        run_epoch(model, opt, device_loader)\n"
        "if __name__ == '__main__':\n    main(DataLoader(data), torch_xla.device())\n"
    )
    assert _xla203(tmp_path, {"loop.py": loop, "train.py": train}) == set()


def test_method_called_on_an_object_of_another_module(tmp_path):
    trainer = HEAD + (
        "class Trainer:\n    def fit(self, loader, epochs=1):\n        for x in loader:\n"
        "            loss = model(x).sum()\n            loss.backward()\n            opt.step()\n"
    )
    train = HEAD + (
        "from trainer import Trainer\n"
        "def main(cpu_loader, device):\n"
        "    Trainer().fit(pl.ParallelLoader(cpu_loader, [device]).per_device_loader(device))\n"
        "if __name__ == '__main__':\n    main(DataLoader(data), torch_xla.device())\n"
    )
    assert _xla203(tmp_path, {"trainer.py": trainer, "train.py": train}) == set()


def test_return_value_of_a_function_of_another_module(tmp_path):
    data = (
        HEAD
        + "def get_loader(cpu_loader, device):\n    return pl.MpDeviceLoader(cpu_loader, device)\n"
    )
    train = HEAD + (
        "import data\n"
        "def main(cpu_loader, device):\n    loader = data.get_loader(cpu_loader, device)\n"
        "    for x in loader:\n"
        + STEP
        + "if __name__ == '__main__':\n    main(DataLoader(d), torch_xla.device())\n"
    )
    assert _xla203(tmp_path, {"data.py": data, "train.py": train}) == set()


def test_forwarded_through_two_functions_of_two_modules(tmp_path):
    inner = HEAD + "def inner(model, loader):\n    for x in loader:\n" + STEP
    outer = (
        HEAD + "from inner import inner\ndef outer(model, batches):\n    inner(model, batches)\n"
    )
    train = HEAD + (
        "from outer import outer\n"
        "def main(cpu_loader, device):\n    outer(model, pl.MpDeviceLoader(cpu_loader, device))\n"
        "if __name__ == '__main__':\n    main(DataLoader(d), torch_xla.device())\n"
    )
    files = {"inner.py": inner, "outer.py": outer, "train.py": train}
    assert _xla203(tmp_path, files) == set()


def test_a_dataloader_passed_is_still_reported(tmp_path):
    loop = HEAD + "def run_epoch(model, opt, loader):\n    for x in loader:\n" + STEP
    train = HEAD + (
        "from loop import run_epoch\n"
        "def main():\n    run_epoch(model, opt, DataLoader(data, batch_size=8))\n"
        "def other(cpu_loader, device):\n    for x in pl.MpDeviceLoader(cpu_loader, device):\n"
        "        pass\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    assert _xla203(tmp_path, {"loop.py": loop, "train.py": train}) == {("loop.py", 8)}


def test_parameter_of_a_function_nobody_calls(tmp_path):
    # Unknown in a program that makes a device loader (its callers are elsewhere): not reported.
    # In a program that makes none it cannot be one: reported, as before.
    lib = HEAD + "def run_epoch(model, opt, loader):\n    for x in loader:\n" + STEP
    maker = HEAD + (
        "import lib\n"
        "def main(cpu_loader, device):\n    for x in pl.MpDeviceLoader(cpu_loader, device):\n"
        "        pass\n"
        "if __name__ == '__main__':\n    main(DataLoader(d), torch_xla.device())\n"
    )
    assert _xla203(tmp_path / "a", {"lib.py": lib, "main.py": maker}) == set()
    assert _xla203(tmp_path / "b", {"lib.py": lib}) == {("lib.py", 8)}


def test_a_parameter_called_with_star_args_is_unknown(tmp_path):
    code = HEAD + (
        "def run(model, loader):\n    for x in loader:\n"
        + STEP
        + "def main(args, cpu_loader, device):\n"
        "    run(*args)\n    for x in pl.MpDeviceLoader(cpu_loader, device):\n        pass\n"
        "if __name__ == '__main__':\n    main((), DataLoader(d), torch_xla.device())\n"
    )
    assert _xla203(tmp_path, {"train.py": code}) == set()


def test_a_batch_taken_by_a_helper_method_from_a_loader_iterator(tmp_path):
    # LatentReasoning's trainer: `self._collect(loader_iter, n)` calls next() on the device
    # loader's iterator, which syncs before each batch; the module reaches torch_xla through an
    # attribute (`self._pl = pl`).
    code = (
        "import torch\n\nclass Trainer:\n    def __init__(self):\n"
        "        import torch_xla.distributed.parallel_loader as pl\n        self._pl = pl\n"
        "    def _collect(self, it, count):\n        return [next(it) for _ in range(count)]\n"
        "    def train(self, loader, device):\n"
        "        it = iter(self._pl.MpDeviceLoader(loader, device))\n"
        "        while True:\n            batches = self._collect(it, 2)\n"
        "            for b in batches:\n                self.model(b).sum().backward()\n"
        "            self.optimizer.step()\n"
    )
    assert _xla203(tmp_path, {"trainer.py": code}) == set()


def test_an_attribute_set_from_a_constructor_parameter_of_another_module(tmp_path):
    trainer = HEAD.replace("import torch_xla.distributed.parallel_loader as pl\n", "") + (
        "class Trainer:\n    def __init__(self, model, loader):\n        self.loader = loader\n"
        "    def fit(self):\n        for x in self.loader:\n"
        "            loss = model(x).sum()\n            loss.backward()\n            opt.step()\n"
    )
    with_loader = HEAD + (
        "from trainer import Trainer\n"
        "def main(cpu_loader, device):\n"
        "    Trainer(None, pl.MpDeviceLoader(cpu_loader, device)).fit()\n"
        "if __name__ == '__main__':\n    main(DataLoader(d), torch_xla.device())\n"
    )
    with_dataloader = HEAD + (
        "from trainer import Trainer\n"
        "def main():\n    Trainer(None, loader=DataLoader(d)).fit()\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    assert _xla203(tmp_path / "a", {"trainer.py": trainer, "train.py": with_loader}) == set()
    assert _xla203(tmp_path / "b", {"trainer.py": trainer, "train.py": with_dataloader}) == {
        ("trainer.py", 10)
    }
