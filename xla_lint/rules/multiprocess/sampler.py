"""XLA017: a DataLoader without a DistributedSampler in a one-process-per-device program, and the
hand-offs (accelerate, Lightning, Fabric) that give it one.
"""

from __future__ import annotations

import libcst as cst

from ...analysis.context import find_arg
from ...analysis.devices import (
    function_key,
)
from ...analysis.holds import name_words
from ...analysis.names import dotted_name
from ...analysis.walk import TRIVIA, iter_nodes, walk
from ...diagnostics import Severity
from ...rule import Invalid, Rule, Valid
from .common import _LAUNCH, LIGHTNING_ROOTS, MULTIPROCESS, TRAINER_METHODS

EVAL_WORDS = frozenset(
    {"test", "eval", "evaluation", "val", "valid", "validation", "dev", "holdout"}
)


def _target_names(node: cst.BaseExpression) -> str:
    """The identifiers of a Name/Attribute chain joined with ``_`` (``self.test_loader`` -> ``self_test_loader``)."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
    return "_".join(reversed(parts))


# Calls that take a DataLoader over and give it a distributed sampler themselves (XLA017):
# accelerate's `Accelerator.prepare`/`prepare_data_loader` (accelerate/data_loader.py,
# `prepare_data_loader`: a `BatchSamplerShard` over `num_processes`/`process_index`), Lightning's
# `Trainer.fit/validate/test/predict` (lightning/pytorch/trainer/connectors/data_connector.py,
# `_prepare_dataloader` injects a `DistributedSampler` when `use_distributed_sampler`) and
# `Fabric.setup_dataloaders` (lightning/fabric/fabric.py, `use_distributed_sampler=True`).
ACCELERATE_METHODS = frozenset({"prepare", "prepare_data_loader"})


FABRIC_METHODS = frozenset({"setup_dataloaders"})


# LightningModule / LightningDataModule hooks whose loaders the Trainer prepares the same way.
LIGHTNING_HOOKS = frozenset(
    {"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"}
)


# What a loader may sit in on its way to an assignment, a return or an argument: `[dl1, dl2]`.
_CONTAINERS = (cst.Element, cst.List, cst.Tuple, cst.DictElement, cst.Dict, cst.StarredElement)


def _keys(node: cst.CSTNode) -> set[str]:
    """The names and attribute chains ``node`` (a target or a returned value) binds or holds:
    ``a, (b, self.c)`` -> ``{"a", "b", "self.c"}``."""
    key = dotted_name(node)
    if key is not None:
        return {key}
    out: set[str] = set()
    if isinstance(node, (cst.Tuple, cst.List)):
        for el in node.elements:
            out |= _keys(el.value)
    elif isinstance(node, cst.StarredElement):
        out |= _keys(node.value)
    return out


class LoaderHandoffs:
    """Where a file hands DataLoaders to code that installs the distributed sampler itself.

    One walk of the module (``ctx.memo``) records, per hand-off call
    (:data:`ACCELERATE_METHODS`, :data:`TRAINER_METHODS`, :data:`FABRIC_METHODS`; method calls
    count only in files that import that library, a module function only when it resolves to
    ``accelerate...prepare_data_loader``), every node inside its arguments and the names and
    attribute chains they mention, by the function (or module) the call is in; the call sites
    of the file's functions, with the names their results are assigned to; the names each
    function returns; and which classes derive from a Lightning class. A Lightning hand-off
    is ignored when the file passes ``use_distributed_sampler=False`` anywhere.
    """

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        roots = {m.split(".")[0] for m in ctx.imported_modules}
        self.accelerate = "accelerate" in roots
        self.trainer = bool(roots & {"lightning", "pytorch_lightning"})
        self.fabric = bool(roots & {"lightning", "lightning_fabric"})
        self.handed_nodes: set[int] = set()  # ids of nodes inside a hand-off's arguments
        self.handed_keys: dict[
            int, set[str]
        ] = {}  # id(function or module) -> keys handed over there
        self.class_keys: dict[
            int, set[str]
        ] = {}  # id(class) -> `self.*` keys handed over in its methods
        self.returned: dict[int, set[str]] = {}  # id(function) -> keys it returns
        self.call_sites: dict[str, list[tuple[cst.Call, cst.CSTNode, set[str]]]] = {}
        self.lightning_classes: set[str] = set()
        self.class_of: dict[
            int, cst.ClassDef | None
        ] = {}  # id(function) -> the class it is a method of
        self._sampler_off = False
        lightning_calls: list[
            tuple[cst.Call, cst.CSTNode]
        ] = []  # recorded once the whole file is read
        self._scan(lightning_calls)
        if not self._sampler_off:
            for call, owner in lightning_calls:
                self._record(call, owner)

    def _scan(self, lightning_calls) -> None:
        ctx = self.ctx
        facts = self
        scopes = [ctx.root_scope]
        owners: list[cst.CSTNode] = [ctx.module]
        classes: list[cst.ClassDef | None] = [None]
        pushed: list[tuple[cst.CSTNode, str]] = []

        class Scan:
            def on_visit(self, node: cst.CSTNode) -> bool:
                if type(node) is cst.ClassDef:  # bases are read in the enclosing scope
                    for base in node.bases:
                        names = ctx.qnames(base.value, scopes[-1])
                        if (
                            any(n.split(".")[0] in LIGHTNING_ROOTS for n in names)
                            or dotted_name(base.value) in facts.lightning_classes
                        ):
                            facts.lightning_classes.add(node.name.value)
                scope = ctx.scopes.get(node)
                if scope is not None and node is not ctx.module:
                    scopes.append(scope)
                    pushed.append((node, "scope"))
                if type(node) is cst.ClassDef:
                    classes.append(node)
                    pushed.append((node, "class"))
                elif type(node) is cst.FunctionDef:
                    facts.class_of[id(node)] = classes[-1]  # None unless directly in a class body
                    owners.append(node)
                    classes.append(None)
                    pushed.append((node, "function"))
                elif (
                    type(node) is cst.Return
                    and node.value is not None
                    and owners[-1] is not ctx.module
                ):
                    facts.returned.setdefault(id(owners[-1]), set()).update(_keys(node.value))
                elif type(node) is cst.Call:
                    facts._call(node, scopes[-1], owners[-1], lightning_calls)
                elif type(node) is cst.Assign and type(node.value) is cst.Call:
                    targets: set[str] = set()
                    for t in node.targets:
                        targets |= _keys(t.target)
                    facts._site(node.value, owners[-1], targets)
                return True

            def on_leave(self, node: cst.CSTNode) -> None:
                while pushed and pushed[-1][0] is node:
                    _, what = pushed.pop()
                    if what == "scope":
                        scopes.pop()
                    elif what == "class":
                        classes.pop()
                    else:
                        owners.pop()
                        classes.pop()

        walk(ctx.module, Scan(), TRIVIA)

    def _site(self, call: cst.Call, owner: cst.CSTNode, targets: set[str]) -> None:
        func = call.func
        if isinstance(func, cst.Name) or (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            name = func.value if isinstance(func, cst.Name) else func.attr.value
            self.call_sites.setdefault(name, []).append((call, owner, targets))

    def _call(self, call: cst.Call, scope, owner: cst.CSTNode, lightning_calls) -> None:
        ctx = self.ctx
        off = find_arg(call, "use_distributed_sampler")
        if off is not None and isinstance(off.value, cst.Name) and off.value.value == "False":
            self._sampler_off = True
        self._site(call, owner, set())
        names = ctx.qnames(call, scope)
        func = call.func
        if any(n.startswith("accelerate.") and n.endswith(".prepare_data_loader") for n in names):
            self._record(call, owner)
            return
        if names or not isinstance(func, cst.Attribute):
            return
        attr = func.attr.value
        if attr in ACCELERATE_METHODS and self.accelerate:
            self._record(call, owner)
        elif attr in TRAINER_METHODS and self.trainer or attr in FABRIC_METHODS and self.fabric:
            lightning_calls.append((call, owner))

    def _record(self, call: cst.Call, owner: cst.CSTNode) -> None:
        """Note everything ``call`` (a hand-off in ``owner``) is given."""
        keys = self.handed_keys.setdefault(id(owner), set())
        for arg in call.args:
            for node in iter_nodes(arg.value):
                self.handed_nodes.add(id(node))
                key = dotted_name(node)
                if key is not None:
                    keys.add(key)
                    if key.startswith("self.") and isinstance(owner, cst.FunctionDef):
                        cls = self.class_of.get(id(owner))
                        if cls is not None:
                            self.class_keys.setdefault(id(cls), set()).add(key)

    # -- questions ------------------------------------------------------------------
    def handed(self, keys: set[str], owner: cst.CSTNode) -> bool:
        """True when one of ``keys`` is handed over in ``owner`` (or, for ``self.*``, in its class)."""
        if keys & self.handed_keys.get(id(owner), set()):
            return True
        cls = self.class_of.get(id(owner))
        return cls is not None and bool(keys & self.class_keys.get(id(cls), set()))

    def lightning_hook(self, function: cst.FunctionDef) -> bool:
        """True for a ``train_dataloader``/``val_dataloader``/... method of a class deriving from a
        Lightning class (``LightningModule``, ``LightningDataModule``, ``BoringModel``, or a class of
        this file that derives from one), in a file that imports Lightning's Trainer package."""
        cls = self.class_of.get(id(function))
        return (
            function.name.value in LIGHTNING_HOOKS
            and cls is not None
            and cls.name.value in self.lightning_classes
            and self.trainer
            and not self._sampler_off
        )

    def result_handed(self, function: cst.FunctionDef) -> bool:
        """True when what ``function`` returns is handed over: it is a Lightning ``*_dataloader``
        hook, or a call of it in this file is a hand-off's argument or is assigned to names
        that are handed over."""
        if self.lightning_hook(function):
            return True
        for call, owner, targets in self.call_sites.get(function.name.value, ()):
            if id(call) in self.handed_nodes or (targets and self.handed(targets, owner)):
                return True
        return False


class MissingDistributedSampler(Rule):
    code = "XLA017"
    name = "missing-distributed-sampler"
    summary = "A map-style DataLoader without a sampler in a multi-process program: every replica reads the same batches."
    message = (
        "`DataLoader` without `sampler=` in a multi-process program: every replica iterates the whole "
        "dataset in the same order; pass `DistributedSampler(dataset, num_replicas=xr.world_size(), "
        "rank=xr.global_ordinal())`"
    )
    severity = Severity.WARNING
    # The precision gate (issue 22): 0 of 42 right on repositories nobody tuned on (ignite's
    # single-process examples; NeMo and fastai loaders whose library installs the sampler).
    preview = True
    explanation = """\
## What it does
In a multi-process program (`torch_xla.launch`, `xmp.spawn`, an `xla` process group)
that is not SPMD, flags `torch.utils.data.DataLoader(...)` calls without `sampler=` or
`batch_sampler=`. Loaders over an `IterableDataset` subclass defined in the same file,
calls passing `**kwargs`, loaders given a sampler positionally and evaluation loaders
(`test_loader = DataLoader(test_dataset, ...)`: a loader or dataset named test, eval, val,
valid, validation, dev or holdout; every replica evaluating the whole set repeats work but
the metric stays right) are not flagged.

Nor are loaders handed to a library that installs the distributed sampler itself: passed
(directly, through a name or `self.` attribute of the same function or class, or as the
result of a function of the same file) to Hugging Face accelerate's
`accelerator.prepare(...)`/`prepare_data_loader(...)`, to Lightning's
`trainer.fit/validate/test/predict(...)` or `fabric.setup_dataloaders(...)`, or built in
the `train_dataloader`/`val_dataloader`/`test_dataloader`/`predict_dataloader` method of a
class deriving from a Lightning class. Method calls count only in files that import that
library, and Lightning's only when the file never passes `use_distributed_sampler=False`.
accelerate shards the batches over `num_processes`/`process_index`
(`accelerate/data_loader.py`, `prepare_data_loader`); Lightning replaces the sampler with a
`DistributedSampler` over the strategy's world size and rank (`lightning/pytorch/trainer/
connectors/data_connector.py`, `_prepare_dataloader`; `lightning/fabric/fabric.py`,
`setup_dataloaders`).

## Why is this bad
Each replica is its own process with its own `DataLoader`. A map-style loader without a
sampler reads the whole dataset (shuffled with the same seed, or in order) in every
replica, so the N replicas train on the same batches: the gradient all-reduce in
`xm.optimizer_step` averages N copies of one gradient, an epoch does N times the work
of one replica, and the effective batch is the per-replica batch instead of N times it.
`torch_xla.launch` passes only the replica index to the function (torch_xla 2.9.0
`torch_xla/torch_xla.py`, `launch`; `torch_xla/_internal/pjrt.py`, `_SpawnFn`): the
split of the data is the program's job.

## Example
```python
def _mp_fn(index):
    loader = DataLoader(train_set, batch_size=64, shuffle=True)
```

## Use instead
```python
def _mp_fn(index):
    sampler = DistributedSampler(train_set, num_replicas=xr.world_size(),
                                 rank=xr.global_ordinal(), shuffle=True)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
```
Call `sampler.set_epoch(epoch)` each epoch to reshuffle.

## References
- https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler
- https://huggingface.co/docs/accelerate/basic_tutorials/migration,
  https://lightning.ai/docs/pytorch/stable/common/trainer.html#use-distributed-sampler
- torch_xla 2.9.0 `torch_xla/torch_xla.py` (`launch`)
"""
    valid = (
        Valid(
            _LAUNCH + "from torch.utils.data import DataLoader, DistributedSampler\n"
            "def _mp_fn(i):\n    s = DistributedSampler(ds)\n    loader = DataLoader(ds, batch_size=8, sampler=s)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH
            + "import torch.utils.data as data\nclass Stream(data.IterableDataset):\n    pass\n"
            "def _mp_fn(i):\n    loader = data.DataLoader(Stream(), batch_size=8)\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch_xla\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n"
        ),
        Valid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    loader = DataLoader(ds, batch_sampler=bs)\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    test_loader = DataLoader(test_dataset, batch_size=8, shuffle=False)\n"
            "    evalLoader = DataLoader(ds, batch_size=8)\ntorch_xla.launch(_mp_fn)\n"
        ),
        # Hand-offs that install the distributed sampler (huggingface/accelerate test_metrics.py,
        # test_accelerator.py; Lightning tests_pytorch/models/test_tpu.py, examples/fabric).
        Valid(
            _LAUNCH
            + "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    accelerator = Accelerator()\n    dataloader = DataLoader(dset, batch_size=16)\n"
            "    model, dataloader = accelerator.prepare(model, dataloader)\n"
            "    self.train_dl = DataLoader(ds, batch_size=2)\n    accelerator.prepare_data_loader(self.train_dl)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH
            + "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
            "def create_components():\n    train_dl = DataLoader(TensorDataset(t))\n    return model, opt, train_dl\n"
            "def get_dataloader(accelerator):\n    return DataLoader(tokenized, shuffle=False, batch_size=16)\n"
            "def _mp_fn(i):\n    accelerator = Accelerator()\n    model, opt, train_dl = create_components()\n"
            "    accelerator.prepare(model, opt, train_dl)\n    dataloader = get_dataloader(accelerator)\n"
            "    ddp_model, ddp_dataloader = accelerator.prepare(model, dataloader)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "from accelerate.data_loader import prepare_data_loader\n"
            "def _mp_fn(i):\n    dl = prepare_data_loader(DataLoader(range(32), batch_size=8), device)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH
            + "from torch.utils.data import DataLoader\nfrom lightning.pytorch import Trainer\n"
            "from lightning.pytorch.demos.boring_classes import BoringModel\n"
            "class SerialLoaderBoringModel(BoringModel):\n    def train_dataloader(self):\n"
            "        return DataLoader(RandomDataset(32, 2000), batch_size=32)\n"
            "    def predict_dataloader(self):\n"
            "        return apply_to_collection(self.sets, Dataset, lambda x: DataLoader(x))\n"
            "def _mp_fn(i):\n    trainer = Trainer(accelerator='tpu')\n"
            "    trainer.test(model, dataloaders=DataLoader(RandomDataset(32, 2000), batch_size=32))\n"
            "    train_data = DataLoader(RandomDataset(32, 64), batch_size=2)\n"
            "    trainer.fit(model, train_dataloaders=train_data)\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH
            + "from torch.utils.data import DataLoader\nfrom lightning.fabric import Fabric\n"
            "def _mp_fn(i):\n    fabric = Fabric(accelerator='tpu')\n"
            "    dataloader = DataLoader(RandomDataset(32, 64))\n"
            "    dataloader = fabric.setup_dataloaders(dataloader)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
    )
    invalid = (
        Invalid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    loader = DataLoader(ds, batch_size=8, shuffle=True)\n"
            "torch_xla.launch(_mp_fn)\n",
            (5,),
        ),
        Invalid(
            "import torch\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
            "def train(i):\n    loader = torch.utils.data.DataLoader(ds, 8)\nxmp.spawn(train)\n",
            (4,),
        ),
        Invalid(
            _LAUNCH + "import torch\ndef _mp_fn(i):\n    attest = make()\n"
            "    self.train_loader = torch.utils.data.DataLoader(latest_dataset, batch_size=8)\n"
            "torch_xla.launch(_mp_fn)\n",
            (6,),
        ),
        # Not handed over: another loader is prepared; `use_distributed_sampler=False` keeps the
        # loader as it is; a `train_dataloader` method of a class that is not a Lightning class;
        # `.prepare(...)` in a file that does not use accelerate.
        Invalid(
            _LAUNCH
            + "from accelerate import Accelerator\nfrom torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    dl = DataLoader(ds, batch_size=8)\n    other = accelerator.prepare(model)\n"
            "torch_xla.launch(_mp_fn)\n",
            (6,),
        ),
        Invalid(
            _LAUNCH + "from torch.utils.data import DataLoader\nimport lightning as L\n"
            "def _mp_fn(i):\n    trainer = L.Trainer(use_distributed_sampler=False)\n"
            "    trainer.fit(model, DataLoader(ds, batch_size=8))\ntorch_xla.launch(_mp_fn)\n",
            (7,),
        ),
        Invalid(
            _LAUNCH + "from torch.utils.data import DataLoader\nimport lightning\nclass Data:\n"
            "    def train_dataloader(self):\n        return DataLoader(ds, batch_size=8)\n"
            "def _mp_fn(i):\n    for batch in Data().train_dataloader():\n        pass\n"
            "torch_xla.launch(_mp_fn)\n",
            (7,),
        ),
        Invalid(
            _LAUNCH + "from torch.utils.data import DataLoader\n"
            "def _mp_fn(i):\n    dl = DataLoader(ds, batch_size=8)\n    dl = pipeline.prepare(dl)\n"
            "torch_xla.launch(_mp_fn)\n",
            (5,),
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._iterable: set[str] | None = None

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, "torch.utils.data.DataLoader"):
            return
        if any(a.star for a in node.args):
            return
        if (
            find_arg(node, "sampler", 3) is not None
            or find_arg(node, "batch_sampler", 4) is not None
        ):
            return
        dataset = find_arg(node, "dataset", 0)
        if dataset is not None and self._is_iterable(dataset.value):
            return
        if self._is_evaluation(node, dataset) or self._handed_over(node):
            return
        self.report(node, requires=MULTIPROCESS)

    def _handed_over(self, node: cst.Call) -> bool:
        """The loader goes to code that installs the distributed sampler itself (:class:`LoaderHandoffs`):
        it is a hand-off's argument, is assigned to a name (or ``self.`` attribute) handed over in
        the same function (class), or is returned by a function whose result is handed over."""
        ctx = self.ctx
        handoffs = ctx.memo(LoaderHandoffs, lambda: LoaderHandoffs(ctx))
        if id(node) in handoffs.handed_nodes:
            return True
        for function in ctx.enclosing(cst.FunctionDef):
            if handoffs.lightning_hook(function):
                return True  # anything a `train_dataloader` hook builds (`lambda x: DataLoader(x)`) is its result
        stack = ctx.stack
        i = len(stack) - 2
        while i >= 0 and isinstance(stack[i], _CONTAINERS):
            i -= 1
        holder = stack[i] if i >= 0 else None
        owner = function_key(ctx)
        if isinstance(holder, (cst.Assign, cst.AnnAssign)):
            targets: set[str] = set()
            for t in holder.targets if isinstance(holder, cst.Assign) else (holder,):
                targets |= _keys(t.target)
            if handoffs.handed(targets, owner):
                return True
            return (
                isinstance(owner, cst.FunctionDef)
                and bool(targets & handoffs.returned.get(id(owner), set()))
                and handoffs.result_handed(owner)
            )
        if isinstance(holder, cst.Return) and isinstance(owner, cst.FunctionDef):
            return handoffs.result_handed(owner)
        return False

    def _is_evaluation(self, node: cst.Call, dataset: cst.Arg | None) -> bool:
        """A loader named for evaluation (``test_loader = DataLoader(test_dataset, ...)``): every
        replica evaluating the whole set repeats work but the reduced metric is still right."""
        names: list[str] = []
        parent = self.ctx.parent()
        if isinstance(parent, cst.Assign):
            names.extend(_target_names(t.target) for t in parent.targets)
        if dataset is not None:
            names.append(_target_names(dataset.value))
        return any(EVAL_WORDS & set(name_words(n)) for n in names)

    def _is_iterable(self, node: cst.BaseExpression) -> bool:
        """An instance of an ``IterableDataset`` subclass defined in this file."""
        if self._iterable is None:
            self._iterable = set()
            for stmt in iter_nodes(self.ctx.module):
                if isinstance(stmt, cst.ClassDef) and any(
                    isinstance(b.value, (cst.Name, cst.Attribute))
                    and (b.value.value if isinstance(b.value, cst.Name) else b.value.attr.value)
                    in ("IterableDataset", *self._iterable)
                    for b in stmt.bases
                ):
                    self._iterable.add(stmt.name.value)
        if isinstance(node, cst.Call):
            node = node.func
        return isinstance(node, cst.Name) and node.value in self._iterable
