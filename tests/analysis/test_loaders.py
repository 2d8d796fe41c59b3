"""LoaderFlow: where a value that may be a device loader comes from and goes, in one file."""

from __future__ import annotations

import libcst as cst

from xla_lint.analysis.context import FileContext
from xla_lint.analysis.loaders import LOADER, UNKNOWN, LoaderFlow, param_key, parse_param
from xla_lint.analysis.loops import LoopFacts, LoopKind
from xla_lint.analysis.walk import iter_nodes

HEAD = (
    "import itertools\nimport torch_xla.distributed.parallel_loader as pl\n"
    "from torch.utils.data import DataLoader\nfrom loop import run_epoch\nimport data\n"
)


def _flow(code: str, module: str = "train") -> tuple[FileContext, LoaderFlow]:
    ctx = FileContext(cst.parse_module(code), module)
    return ctx, LoaderFlow.of(ctx)


def _loop_iters(ctx: FileContext) -> list[tuple[cst.For, str]]:
    """Each ``for`` loop of the module with the source of its iterable."""
    out = []
    for node in iter_nodes(ctx.module, frozenset()):
        if isinstance(node, cst.For):
            out.append((node, ctx.module.code_for_node(node.iter)))
    return out


def _sources_of_loops(code: str) -> dict[str, frozenset[str]]:
    ctx, flow = _flow(code)
    out = {}
    for node, text in _loop_iters(ctx):
        scope = ctx.root_scope
        for fn in iter_nodes(ctx.module, frozenset()):
            if isinstance(fn, cst.FunctionDef) and any(
                n is node for n in iter_nodes(fn, frozenset())
            ):
                scope = ctx.scopes[fn]  # the innermost function holding the loop (last found)
        out[text] = flow.sources(node.iter, scope)
    return out


def test_or_and_if_else_may_be_a_loader_when_an_operand_may_be():
    found = _sources_of_loops(
        HEAD + "def main(skip, cpu, device):\n    loader = pl.MpDeviceLoader(cpu, device)\n"
        "    resumed = itertools.islice(loader, skip, None) if skip else None\n"
        "    for x in (resumed or loader): pass\n"
        "    for x in (None if skip else loader): pass\n"
        "    plain = DataLoader(cpu)\n    for x in (None or plain): pass\n"
    )
    assert LOADER in found["(resumed or loader)"]
    assert LOADER in found["(None if skip else loader)"]
    assert found["(None or plain)"] == frozenset()


def test_iter_islice_enumerate_and_per_device_loader():
    found = _sources_of_loops(
        HEAD + "def main(cpu, device):\n"
        "    it = iter(pl.ParallelLoader(cpu, [device]).per_device_loader(device))\n"
        "    for i, x in enumerate(itertools.islice(it, 2, None)): pass\n"
        "    for x in next(it): pass\n"
    )
    assert LOADER in found["enumerate(itertools.islice(it, 2, None))"]
    assert LOADER not in found["next(it)"]  # a batch, not the loader


def test_parameters_and_returns_are_keys_for_the_program():
    found = _sources_of_loops(
        HEAD + "def local_loader(cpu, device):\n    return pl.MpDeviceLoader(cpu, device)\n"
        "def run(model, loader, *, eval_loader=None):\n    for x in loader: pass\n"
        "    for x in eval_loader: pass\n    for x in data.get_loader(): pass\n"
        "    for x in local_loader(model, None): pass\n"
    )
    assert found["loader"] == {"train.run#1:loader"}
    assert found["eval_loader"] == {"train.run#:eval_loader"}
    assert found["data.get_loader()"] == {"ret:data.get_loader"}
    assert LOADER in found["local_loader(model, None)"]


def test_records_slots_returns_methods_and_forwarding():
    ctx, flow = _flow(
        HEAD + "def get(cpu, device):\n    return pl.MpDeviceLoader(cpu, device)\n"
        "def ident(x):\n    return x\n"
        "class Trainer:\n    def __init__(self, cfg, loader):\n        self.loader = loader\n"
        "    def fit(self, loader):\n        run_epoch(None, None, loader)\n"
        "def main(args, cpu, device):\n    run_epoch(None, None, get(cpu, device))\n"
        "    Trainer(args, loader=get(cpu, device)).fit(pl.MpDeviceLoader(cpu, device))\n"
        "    run_epoch(*args)\n    run_epoch(None, None, DataLoader(cpu))\n"
    )
    records = flow.records()
    assert records["ret:train.get"] == [LOADER]
    assert records["ret:train.ident"] == ["train.ident#0:x"]
    assert records["train.Trainer#loader"] == [LOADER, "ret:train.get"]
    assert records["*.fit#0"] == [LOADER]
    assert records["loop.run_epoch#2"] == ["*.fit#0:loader", LOADER, "ret:train.get"]
    assert records["loop.run_epoch#*"] == [UNKNOWN]
    assert "builtins.len#0" not in records  # no flow into the standard library
    assert flow.defined == {"train.get", "train.ident", "train.Trainer", "*.fit", "train.main"}
    assert flow.makes_loader


def test_plain_dataloaders_record_nothing():
    _, flow = _flow(HEAD + "def main(cpu):\n    run_epoch(None, None, DataLoader(cpu))\n")
    assert flow.records() == {}
    assert not flow.makes_loader


def test_a_data_parallel_call_gives_its_loop_function_a_device_loader():
    """unseen7 pytorch-camvid: `net = dp.DataParallel(...)`, `net(train_loop_fn, loader)` runs
    `train_loop_fn(model, per_device_loader, device, context)` (data_parallel.py
    `_module_runner`); a plain call of the same function records nothing of the kind."""
    code = (
        "import torch_xla.distributed.data_parallel as dp\n"
        "def train_loop_fn(net, loader, device, context):\n    for x in loader:\n        pass\n"
        "def test_loop_fn(net, loader, device, context):\n    pass\n"
        "class T:\n    def __init__(self, m, d):\n        self.net = dp.DataParallel(m, device_ids=d)\n"
        "    def fit(self, cpu):\n        self.net(test_loop_fn, cpu)\n"
        "def main(model, devices, cpu):\n    net = dp.DataParallel(model, device_ids=devices)\n"
        "    net(train_loop_fn, cpu)\n    train_loop_fn(None, cpu, None, None)\n"
    )
    _, flow = _flow(code)
    records = flow.records()
    assert LOADER in records["train.train_loop_fn#1"]  # and main's `cpu`, from the plain call
    assert records["train.test_loop_fn#1"] == [LOADER]
    assert flow.makes_loader
    _, plain = _flow(code.replace("dp.DataParallel", "Wrapper"))
    assert LOADER not in plain.records()["train.train_loop_fn#1"]


def test_a_call_handed_a_device_loader_and_a_dict_of_them_may_be_loaders():
    """unseen8: `metric_logger.log_every(pl.MpDeviceLoader(...), 10)` (DETR/DINO's generator of
    what it is given), `loaders["train"]` of a dict display; a module function whose returns
    are known is followed instead, and a call handed a plain loader is nothing."""
    ctx, flow = _flow(
        HEAD + "def count(loader):\n    return 3\n"
        "def main(dl, dev, logger):\n"
        "    a = logger.log_every(pl.MpDeviceLoader(dl, dev), 10)\n"
        "    its = {'train': iter(pl.MpDeviceLoader(dl, dev)), 'n': 3}\n"
        "    b = its['train']\n    c = count(pl.MpDeviceLoader(dl, dev))\n"
        "    d = logger.log_every(dl, 10)\n"
    )
    main = next(
        n
        for n in iter_nodes(ctx.module)
        if isinstance(n, cst.FunctionDef) and n.name.value == "main"
    )
    inner = ctx.scopes[main]
    values = {
        t.targets[0].target.value: t.value
        for t in iter_nodes(main)
        if isinstance(t, cst.Assign) and isinstance(t.targets[0].target, cst.Name)
    }
    assert flow.is_loader(values["a"], inner) and flow.is_loader(cst.Name("b"), inner)
    assert not flow.is_loader(values["c"], inner) and not flow.is_loader(values["d"], inner)


def test_accelerate_prepare_makes_a_device_loader_in_an_xla_file():
    """On XLA accelerate wraps each prepared DataLoader in MpDeviceLoaderWrapper (unseen8
    ultralytics fork); a `prepare` of another library, or in a file without torch_xla, is not."""
    code = (
        "import torch_xla.core.xla_model as xm\nfrom accelerate import Accelerator\n"
        "def main(dl):\n    acc = Accelerator()\n    loader = acc.prepare(dl)\n"
    )
    assert _flow(code)[1].makes_loader
    assert not _flow(code.replace("from accelerate", "from mylib"))[1].makes_loader
    assert not _flow(code.replace("import torch_xla.core.xla_model as xm\n", ""))[1].makes_loader


def test_self_attribute_bound_to_a_torch_xla_module():
    code = (
        "class T:\n    def __init__(self):\n"
        "        import torch_xla.distributed.parallel_loader as pl\n"
        "        import torch_xla.core.xla_model as xm\n"
        "        self._pl, self._xm = pl, xm\n        self.pl2 = pl\n"
        "    def run(self, cpu, device):\n        for x in self.pl2.MpDeviceLoader(cpu, device):\n"
        "            pass\n"
    )
    ctx, flow = _flow(code)
    assert flow.makes_loader


def test_param_keys_round_trip():
    assert parse_param(param_key("loop.run_epoch", 2, "loader")) == (
        "loop.run_epoch",
        "2",
        "loader",
    )
    assert parse_param(param_key("*.fit", None, "loader")) == ("*.fit", "", "loader")
    assert parse_param("ret:loop.run_epoch") is None
    assert parse_param("loop.run_epoch#2") is None


def test_next_on_a_parameter_is_a_consumed_slot():
    ctx, flow = _flow("class T:\n    def collect(self, it, n):\n        return next(it)\n")
    fn = next(n for n in iter_nodes(ctx.module, frozenset()) if isinstance(n, cst.FunctionDef))
    assert flow.consumed(fn) == {"0", "it"}


def _kinds(code: str) -> list[LoopKind]:
    ctx = FileContext(cst.parse_module(code), "m")
    facts = LoopFacts(ctx)
    return [facts.kind(node) for node, _ in _loop_iters(ctx)]


def test_loop_kinds():
    code = (
        "import torch\nimport torch_xla\n"
        "for x in loader:\n    loss = model(x).sum()\n    loss.backward()\n"
        "for x in loader:\n    optimizer.step()\n"
        "with torch.no_grad():\n    for x in test_loader:\n        out = net(x)\n"
        "for x in loader:\n    preds.append(encoder.generate(x))\n"
        "clf.eval()\nfor x in loader:\n    clf(x)\n"
        "for f in files:\n    items.append(torch.load(f))\n"
        "for i in range(3):\n    self.prepare(i)\n"
    )
    assert _kinds(code) == [
        LoopKind.TRAINING,
        LoopKind.TRAINING,
        LoopKind.EVALUATION,
        LoopKind.EVALUATION,
        LoopKind.EVALUATION,
        LoopKind.SETUP,
        LoopKind.SETUP,
    ]


def test_a_step_function_makes_a_training_loop_and_a_compiled_forward_an_evaluation():
    code = (
        "import torch_xla\n"
        "def train_step(x):\n    loss = net(x).sum()\n    loss.backward()\n"
        "infer = torch_xla.compile(lambda x: f(x))\n"
        "for x in loader:\n    train_step(x)\n"
        "for x in loader:\n    infer(x)\n"
    )
    assert _kinds(code) == [LoopKind.TRAINING, LoopKind.EVALUATION]


def test_called_functions_are_calls_and_callbacks_not_methods():
    _, flow = _flow(
        HEAD + "import torch_xla\ndef _mp_fn(index):\n    pass\ndef main(trainer, loader):\n"
        "    run_epoch(None, None, loader)\n    trainer.fit(loader)\n    data.get_loader()\n"
        "    torch_xla.launch(_mp_fn, args=())\n    len(loader)\n    print(loader)\n"
    )
    assert flow.called() == {"loop.run_epoch", "data.get_loader", "train._mp_fn"}


# -- what step loops and functions call (LoopFacts.step_records) --------------------------------
def test_a_factory_returns_its_closure_and_a_call_of_the_result_names_the_factory():
    """``return train`` is the function value ``fn:``; ``train = f(...)`` then ``train(x)`` in a
    loop over a per-device loader records the factory's return as what the loop runs."""
    factory = (
        "def make(D):\n    def train(x):\n        for _ in range(3):\n"
        "            D(x).sum().backward()\n    return train\n"
    )
    _, flow = _flow(factory, "fns")
    assert flow.records()["ret:fns.make"] == ["fn:fns.train"]
    caller = (
        "import torch_xla.distributed.parallel_loader as pl\nimport fns\n"
        "def run(loader, device, D):\n    train = fns.make(D)\n"
        "    for x in pl.ParallelLoader(loader, [device]).per_device_loader(device):\n"
        "        train(x)\n        helper(x)\n"
        "    for epoch in range(2):\n        fns.report(epoch)\n"
        "def helper(x):\n    log(x)\n"
    )
    ctx, _ = _flow(caller)
    records = LoopFacts(ctx).step_records()
    assert records["run:batch"] == ["fn:train.helper", "ret:fns.make"]
    assert "run:sync" not in records  # the epoch loop neither syncs nor iterates a loader
    assert records["body:train.run"] == [
        "fn:train.helper",
        "fns.make",
        "fns.report",
        "ret:fns.make",
    ]


def test_a_loop_that_syncs_or_iterates_a_parameter_records_its_condition():
    code = (
        "import torch_xla.core.xla_model as xm\n"
        "def epoch(batches):\n    for b in batches:\n        step(b)\n"
        "for x in data:\n    step(x)\n    xm.mark_step()\n"
    )
    ctx, _ = _flow(code)
    records = LoopFacts(ctx).step_records()
    assert records["run:sync"] == ["train.step"]
    assert records["run:batch=train.epoch#0:batches"] == ["train.step"]
