"""XLA205 eval-loop-without-step-boundary: an evaluation loop that keeps a forward's tensors with no step boundary."""

from __future__ import annotations

import libcst as cst

from ...analysis import apis
from ...analysis.context import FileContext, find_arg, literal_string
from ...analysis.holds import name_words, plain_name
from ...analysis.loops import LoopFacts, _Assignment, _last_name, model_names, model_word
from ...analysis.names import Scope, bound_names, dotted_name
from ...analysis.values import definition
from ...analysis.walk import iter_nodes
from ...diagnostics import Severity
from ...program.facts import Fact
from ...rule import Invalid, Valid
from .common import HOST_METHODS, TENSOR_FACTORIES, LoopRule, chain_root, is_literal_loop

# Context managers and decorators that turn autograd off: code under them evaluates.
NO_GRAD = frozenset(
    {
        "torch.no_grad",
        "torch.autograd.no_grad",
        "torch.autograd.grad_mode.no_grad",
        "torch.inference_mode",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.inference_mode",
    }
)


SET_GRAD_ENABLED = frozenset(
    {
        "torch.set_grad_enabled",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.grad_mode.set_grad_enabled",
    }
)


# Words of a function name (holds.name_words) that say the function evaluates.
EVAL_WORDS = frozenset(
    {
        "eval",
        "evaluate",
        "evaluation",
        "validate",
        "validation",
        "val",
        "valid",
        "test",
        "testing",
        "predict",
        "prediction",
        "inference",
    }
)


# A tensor's attributes and methods that give Python values (`out.shape`, `out.size(0)`), and
# methods that read it on the host (`.item()`, `tokenizer.batch_decode(ids)` reads the ids).
PYTHON_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad"})


PYTHON_METHODS = frozenset(
    {
        *HOST_METHODS,
        "size",
        "dim",
        "ndimension",
        "numel",
        "nelement",
        "element_size",
        "stride",
        "is_contiguous",
        "get_device",
        "data_ptr",
        "batch_decode",
    }
)


# Words of an iterable's names that say it is a dataset (holds.name_words splits the names).
DATA_WORDS = frozenset(
    {
        "loader",
        "loaders",
        "dataloader",
        "dataloaders",
        "dataset",
        "datasets",
        "data",
        "ds",
        "batches",
        "iterator",
        "samples",
        "examples",
        "split",
        "test",
        "val",
        "valid",
        "validation",
        "eval",
        "evaluation",
    }
)


_FUNCTIONS_AND_CALLS = frozenset({cst.FunctionDef, cst.Call})


# Tensor factories that build on the CPU unless given `device=`.
CPU_FACTORIES = TENSOR_FACTORIES | {"torch.tensor", "torch.as_tensor", "torch.Tensor"}


HOST_FUNCTIONS = apis.HOST_RESULT_FUNCTIONS  # reduces `.cpu()` copies on the host


# Reads that replace a tensor's pending graph with its data (measured, torch_xla 2.9.0 on CPU):
# `.cpu()`, `.tolist()`, `.numpy()`, `.to("cpu")`, `str()`/`print()`. `.item()` and `float()`
# run the graph but leave the tensor pending: its graph keeps growing.
MATERIALIZING_METHODS = frozenset({"cpu", "tolist", "numpy"})


MATERIALIZING_CALLS = frozenset(
    {"builtins.print", "builtins.str", "builtins.repr", f"{apis.XM}.master_print"}
)


# An assignment in a loop, its value and the names it binds.
_Binding = tuple[_Assignment, cst.BaseExpression, set[str]]


# Methods that keep a value across iterations: `outputs.append(logits)`.
COLLECTING_METHODS = frozenset({"append", "extend", "insert", "appendleft"})


def _read_names(node: cst.CSTNode) -> set[str]:
    """The names an expression reads: ``out`` and ``y`` in ``(out.argmax(1) == y).sum()``, not
    attribute names or keywords."""
    skip: set[int] = set()
    found: set[str] = set()
    for sub in iter_nodes(node):
        kind = type(sub)
        if kind is cst.Attribute:
            skip.add(id(sub.attr))
        elif kind is cst.Arg and sub.keyword is not None:
            skip.add(id(sub.keyword))
        elif kind is cst.Name and id(sub) not in skip:
            found.add(sub.value)
    return found


def _mentions(node: cst.CSTNode, key: str) -> bool:
    """``node`` reads the name or attribute chain ``key`` (``total``, ``self.total``)."""
    return any(
        (type(sub) is cst.Name or type(sub) is cst.Attribute) and dotted_name(sub) == key
        for sub in iter_nodes(node)
    )


def _kept_key(target: cst.CSTNode) -> str | None:
    """What an assignment to ``target`` keeps a value in: ``total`` for ``total``, ``self.total``
    for ``self.total``, ``stats`` for ``stats["loss"]``."""
    if type(target) is cst.Subscript:
        target = target.value
    return dotted_name(target)


def _targets(node: _Assignment) -> list[cst.BaseExpression]:
    """What an assignment assigns to: every target of ``a = b = ...``, the one of ``+=``."""
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    return [node.target]


def _unpacked(targets: list[cst.BaseExpression]) -> list[cst.BaseExpression]:
    """The targets of an assignment with tuples and lists unpacked: ``latents``, ``x0`` for
    ``latents, x0 = ...``."""
    out: list[cst.BaseExpression] = []
    for target in targets:
        if type(target) is cst.Tuple or type(target) is cst.List:
            out += _unpacked([e.value for e in target.elements])
        elif type(target) is cst.StarredElement:
            out += _unpacked([target.value])
        else:
            out.append(target)
    return out


def _next_batch(ctx: FileContext, value: cst.CSTNode, scope: Scope) -> bool:
    """``next(it)``, ``next(self.train_iter)``, ``next(iter(loader))``: the next item of an
    iterator (not ``next(i for i in ... if ...)``, a search)."""
    if type(value) is not cst.Call or "builtins.next" not in ctx.qnames(value, scope):
        return False
    first = find_arg(value, None, 0)
    return first is not None and type(first.value) in (cst.Name, cst.Attribute, cst.Call)


def _to_cpu(call: cst.Call) -> bool:
    """``t.to("cpu")``."""
    return any(literal_string(a.value) == "cpu" for a in call.args if a.keyword is None)


class EvalLoopWithoutStepBoundary(LoopRule):
    code = "XLA205"
    name = "eval-loop-without-step-boundary"
    summary = (
        "An evaluation loop keeps device tensors across iterations with no step boundary: one "
        "graph holds every iteration's forward."
    )
    message = (
        "evaluation loop keeps `{kept}` on the device across iterations with no step boundary: "
        "every iteration's forward stays in one pending graph, compiled when it is read after "
        "the loop (its size grows with the number of iterations); call `torch_xla.sync()` at "
        "the end of each iteration or iterate a `pl.MpDeviceLoader`"
    )
    severity = Severity.WARNING
    preview = True
    explanation = """\
## What it does
In a module that imports torch_xla, flags the innermost loop that evaluates and keeps
device tensors across its iterations with nothing that ends the graph per iteration.

- It *evaluates* when it is under `with torch.no_grad():`, `torch.inference_mode()` or
  `torch.set_grad_enabled(False)` (around it in its function, or inside its body), in a
  function decorated with one of them, or in a function whose name says so (eval,
  evaluate, validate, validation, val, test, predict, inference, ...). A loop that runs
  `backward()` or an optimizer step is a training loop (XLA203's).
- Its body runs a *forward*: a call of a model of the module (a name or attribute named
  like one, `model`, `self.net`, `text_encoder`, `unet`, or one the module calls `.eval()`,
  `.train()`, `.parameters()`... on; or its method: `model.generate(...)`) given the batch.
- It *keeps* a tensor computed from the forward in something that outlives the iteration:
  `correct += (out.argmax(1) == y).sum()`, `total = total + loss`, `outputs.append(logits)`,
  `all_preds = torch.cat([all_preds, p])`, `metric.update(out, y)`, `latents = step(latents)`.
- It iterates a dataset (an iterable named like one: `test_loader`,
  `enumerate(self.val_dataloader)`, `range(len(eval_data))`; a `while` loop taking
  `next(it)`), or its forward reads what the previous iteration computed (a sampling or
  decoding loop: `noise = self.unet(latents, t)`, `latents = scheduler.step(noise, t, latents)`).

Not flagged: a loop with `torch_xla.step()`, `torch_xla.sync()`, `xm.mark_step()`, a call
of a `torch_xla.compile`d/`torch.compile`d function or of a function of the module that
syncs anywhere in its body (a nested denoising loop), or inside a loop that syncs on each
of its own iterations (the tiles of one denoising step); a loop over a device loader
(`MpDeviceLoader`, `per_device_loader()`) however it arrives, or inside a loop over one:
through `enumerate`/`zip`/`islice`/a name, `a or b`, a parameter some caller of the program
gives one (in this module or another), another module's function returning one, an attribute
in a module that builds one, or a parameter nobody calls with in a program that makes one
(XLA203's logic; docs/programs.md, "Steps and device loaders"); values made Python numbers or host copies
before they are kept (`correct += (...).sum().item()`, `preds.append(out.argmax(1).cpu())`,
`texts += tokenizer.batch_decode(ids)`), shapes and counts (`total += y.size(0)`); an
accumulator reset in the loop, copied to the host each iteration (`acc.cpu()`,
`print(acc)`), or built on the CPU before the loop (`torch.tensor([0.0, 0.0])`, no
`device=`); a loop over a few items of a call (`for image in control_images:`); a loop over
a literal list or tuple; modules that turn eager mode on; test programs.

## Why is this bad
torch_xla records operations lazily and compiles the pending graph only at a step boundary
(`torch_xla.sync()`, `torch_xla/torch_xla.py`, 2.9.0; `torch_xla.step()` syncs on entry and
exit; `PerDeviceLoader.next`, `torch_xla/distributed/parallel_loader.py`, syncs before
each batch). An evaluation loop has no optimizer step to put one in, so an accumulated
tensor carries every iteration's forward: the graph read after the loop is compiled as one
program whose size, compile time and host memory grow with the dataset, and another
dataset length is another compilation. Measured on CPU, torch_xla 2.9.0, `Linear(32, 10)`,
batches of 16, `correct += (out.argmax(1) == y).sum()` under `no_grad`, read with
`.item()` after the loop: 10/40/160/320 iterations give one graph of 93/363/1443/2883 IR
nodes with 22/82/322/642 inputs, compiled in 0.16/0.21/0.73/2.18 s, one compilation per
length; with `torch_xla.sync()` per iteration: 2 compilations in all (the first iteration,
then the steady one), reused for every length, and a 1-node graph at the read.

A host read of *another* tensor in the loop does not help: `loss.item()`,
`out.argmax(1).cpu()` or `print(loss)` run (or materialize) that tensor's graph, but the
accumulator still holds every forward (measured: 363 IR nodes after 40 iterations with or
without them). `.item()` or `float()` of the accumulator itself is worse: it runs the graph
but leaves the tensor pending, so each iteration compiles a larger graph (measured: 20
compilations for 20 iterations).

## Example
```python
correct = 0
with torch.no_grad():
    for x, y in loader:                  # a torch DataLoader
        out = model(x.to(device))
        correct += (out.argmax(1) == y.to(device)).sum()
print(correct.item() / len(dataset))
```

## Use instead
```python
correct = 0
with torch.no_grad():
    for x, y in pl.MpDeviceLoader(loader, device):   # syncs before each batch
        out = model(x)
        correct += (out.argmax(1) == y).sum()
print(correct.item() / len(dataset))
```
or call `torch_xla.sync()` at the end of each iteration (or wrap the body in
`with torch_xla.step():`).

## References
- https://docs.pytorch.org/xla/master/learn/pytorch-on-xla-devices.html
- torch_xla 2.9.0 `torch_xla/torch_xla.py` (`sync`, `step`, `compile`), `torch_xla/distributed/parallel_loader.py` (`PerDeviceLoader.next`)
"""
    valid = (
        # The accumulated values are Python numbers: `.item()` per iteration.
        Valid(
            "import torch\nimport torch_xla\ndevice = torch_xla.device()\ncorrect = 0\n"
            "with torch.no_grad():\n    for x, y in loader:\n        out = model(x.to(device))\n"
            "        correct += (out.argmax(1) == y.to(device)).sum().item()\n"
            "        total += y.size(0)\n"
        ),
        # A device loader syncs before each batch: directly, or passed to the function.
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.distributed.parallel_loader as pl\n"
            "with torch.no_grad():\n    for x, y in pl.MpDeviceLoader(loader, device):\n"
            "        correct += (model(x).argmax(1) == y).sum()\n"
            "def evaluate(model, loader):\n    outputs = []\n    for i, (x, y) in enumerate(loader):\n"
            "        outputs.append(model(x))\n    return torch.cat(outputs)\n"
            "evaluate(model, pl.MpDeviceLoader(test_loader, device))\n"
        ),
        # The caller, in another module, passes a device loader.
        Valid(
            "import torch\nimport torch_xla\ndef evaluate(model, loader):\n    correct = 0\n"
            "    with torch.no_grad():\n        for x, y in loader:\n"
            "            correct += (model(x).argmax(1) == y).sum()\n    return correct\n",
            files=(
                (
                    "train.py",
                    "import torch_xla.distributed.parallel_loader as pl\nfrom example import evaluate\n"
                    "if __name__ == '__main__':\n"
                    "    evaluate(model, pl.MpDeviceLoader(test_loader, device))\n",
                ),
            ),
        ),
        Valid(
            "import torch\nimport torch_xla\nwith torch.no_grad():\n    for x, y in loader:\n"
            "        with torch_xla.step():\n            loss = criterion(model(x), y)\n"
            "            total_loss += loss\n"
        ),
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n@torch.no_grad()\n"
            "def validate(model, loader, device):\n    correct = 0\n    for x, y in loader:\n"
            "        out = model(x.to(device))\n        correct += out.argmax(1).eq(y.to(device)).sum()\n"
            "        xm.mark_step()\n    return correct\n"
        ),
        # Only host copies are kept; a counter; an accumulator reset every iteration.
        Valid(
            "import torch\nimport torch_xla\ndef predict(model, loader):\n    preds, texts = [], []\n"
            "    for batch in loader:\n        logits = model(**batch)\n"
            "        preds.append(logits.argmax(-1).cpu())\n"
            "        texts.extend(tokenizer.batch_decode(logits.argmax(-1)))\n"
            "        n = 0\n        n += logits.shape[0]\n    return preds\n"
        ),
        # A training loop is XLA203's.
        Valid(
            "import torch\nimport torch_xla\ndef train(model, loader):\n    for x, y in loader:\n"
            "        loss = criterion(model(x), y)\n        loss.backward()\n        optimizer.step()\n"
            "        total_loss += loss.detach()\n"
        ),
        # No torch_xla in the module: a CUDA script.
        Valid(
            "import torch\nwith torch.no_grad():\n    for x, y in loader:\n"
            "        out = model(x.cuda())\n        correct += (out.argmax(1) == y.cuda()).sum()\n"
        ),
        # A few configurations, not a dataset; eager mode.
        Valid(
            "import torch\nimport torch_xla\nwith torch.no_grad():\n    for x in [a, b]:\n"
            "        outputs.append(model(x))\n"
        ),
        Valid(
            "import torch\nimport torch_xla\ntorch_xla.experimental.eager_mode(True)\n"
            "with torch.no_grad():\n    for x, y in loader:\n        correct += (model(x).argmax(1) == y).sum()\n"
        ),
        # The forward's result is only printed; the accumulator is printed (materialized) each time.
        Valid(
            "import torch\nimport torch_xla\nwith torch.no_grad():\n    for x in loader:\n"
            "        out = model(x)\n        print(out)\n"
            "    for x in loader:\n        total = total + model(x).sum()\n        print(total)\n"
        ),
        # A compiled eval step runs its own graph per call.
        Valid(
            "import torch\nimport torch_xla\n"
            "def eval_step(model, x, y):\n    return (model(x).argmax(1) == y).sum()\n"
            "compiled = torch.compile(eval_step, backend='openxla')\n"
            "with torch.no_grad():\n    for x, y in loader:\n        correct += compiled(model, x, y)\n"
        ),
        # Not an evaluation (no no_grad, no evaluation name): left alone.
        Valid(
            "import torch_xla\ndef collect(model, loader):\n    feats = []\n    for x in loader:\n"
            "        feats.append(model(x))\n    return feats\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch\nimport torch_xla\ndevice = torch_xla.device()\ncorrect = 0\n"
            "with torch.no_grad():\n    for x, y in loader:\n        out = model(x.to(device))\n"
            "        correct += (out.argmax(1) == y.to(device)).sum()\n"
            "print(correct.item())\n",
            (6,),
        ),
        Invalid(
            "import torch\nimport torch_xla\ndef evaluate(model, loader):\n    logits_all = []\n"
            "    for x, _ in loader:\n        logits = model(x.to(torch_xla.device()))\n"
            "        logits_all.append(logits)\n    return torch.cat(logits_all)\n",
            (5,),
        ),
        # A synced training loop, then an unsynced validation loop: only the latter. The loss
        # read per iteration does not cut the accumulator's graph.
        Invalid(
            "import torch\nimport torch_xla\nclass Trainer:\n    def fit(self, epochs):\n"
            "        for epoch in range(epochs):\n            for x, y in self.train_loader:\n"
            "                self.criterion(self.model(x), y).backward()\n"
            "                self.optimizer.step()\n                torch_xla.sync()\n"
            "            with torch.no_grad():\n                for x, y in self.val_loader:\n"
            "                    loss = self.criterion(self.model(x), y)\n"
            "                    self.val_loss += loss\n                    print(loss.item())\n",
            (11,),
        ),
        # Greedy decoding: the generated ids feed the next forward.
        Invalid(
            "import torch\nimport torch_xla\n@torch.inference_mode()\n"
            "def generate(model, ids, steps):\n    for _ in range(steps):\n"
            "        logits = model(ids)[:, -1]\n"
            "        ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=-1)\n"
            "    return ids\n",
            (5,),
        ),
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._kept: dict[int, str | None] = {}  # id(loop) -> _kept_across

    def visit_For(self, node: cst.For) -> None:
        self._loop(node)

    def visit_While(self, node: cst.While) -> None:
        self._loop(node)

    def _loop(self, node: cst.For | cst.While) -> None:
        ctx = self.ctx
        if not ctx.imports_torch_xla or self.facts.eager:
            return
        kept = self._kept_across(node)
        if kept is None:
            return
        if any(self._kept_across(inner) is not None for inner in self.facts.inner_loops(node)):
            return  # an inner loop keeps them (and is checked itself)
        unless: set[str] = set()
        if isinstance(node, cst.For):
            keys = self.device_loader_keys(node.iter, ctx.scope)
            if keys is None:
                return
            unless |= keys
        outer = self._outer_boundary()
        if outer is None or not self._evaluates(node):
            return
        self.report(
            node,
            self.message.format(kept=kept),
            requires=[(Fact.TEST, False)],
            unless=unless | outer,
        )

    def _outer_boundary(self) -> frozenset[str] | None:
        """None when a loop around the one visited (in the same function) ends the graph on
        each of its iterations: the inner loop's graph is bounded by one outer iteration (the
        tiles of one denoising step). Otherwise the flow keys of the outer loops' iterables
        that other code decides (:meth:`device_loader_keys`): a loader there would end it too."""
        stack = self.ctx.stack
        keys: set[str] = set()
        for i in range(len(stack) - 2, -1, -1):
            ancestor, child = stack[i], stack[i + 1]
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
                if self.facts.loop(ancestor, self.ctx.scope)[0].boundary:  # not in its inner loops
                    return None
                if isinstance(ancestor, cst.For):
                    found = self.device_loader_keys(ancestor.iter, self.ctx.scope)
                    if found is None:
                        return None
                    keys |= found
        return frozenset(keys)

    # -- is it an evaluation? ----------------------------------------------------------------
    def _evaluates(self, node: cst.For | cst.While) -> bool:
        """Under ``no_grad``/``inference_mode`` (in the loop's body, around it in its function,
        or decorating the function), or in a function whose name says it evaluates."""
        if any(self._no_grad(call, scope) for call, scope in self.facts.calls(node)):
            return True
        stack = self.ctx.stack
        for ancestor in reversed(stack[:-1]):
            if isinstance(ancestor, cst.With):
                if any(self._no_grad(item.item, self.ctx.scope) for item in ancestor.items):
                    return True
            elif isinstance(ancestor, cst.FunctionDef):
                return any(
                    self._no_grad(d.decorator, self.ctx.scope) for d in ancestor.decorators
                ) or not EVAL_WORDS.isdisjoint(name_words(ancestor.name.value))
            elif isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return False
        return False

    def _no_grad(self, node: cst.CSTNode, scope: Scope) -> bool:
        names = self.ctx.qnames(node, scope)
        if names & NO_GRAD:
            return True
        if type(node) is cst.Call and names & SET_GRAD_ENABLED:
            arg = find_arg(node, "mode", 0)
            return arg is not None and type(arg.value) is cst.Name and arg.value.value == "False"
        return False

    # -- does it keep tensors? ---------------------------------------------------------------
    def _kept_across(self, loop: cst.For | cst.While) -> str | None:
        """What ``loop`` keeps a forward's tensor in from one iteration to the next (``correct``,
        ``outputs``), when nothing in it ends the graph; None otherwise. Memoised per loop."""
        key = id(loop)
        if key not in self._kept:
            self._kept[key] = self._find_kept(loop)
        return self._kept[key]

    def _find_kept(self, loop: cst.For | cst.While) -> str | None:
        facts, scope = self.facts, self.ctx.scope
        if is_literal_loop(loop):
            return None
        _, full = facts.loop(loop, scope)
        if full.backward or full.optimizer or full.boundary:
            return None
        assigns: list[_Binding] = []  # (assignment, its value, the names it binds)
        for node in facts.assignments(loop):
            if node.value is None:
                continue  # `x: int` binds nothing
            bound: set[str] = set()
            for target in _targets(node):
                bound |= bound_names(target)
            assigns.append((node, node.value, bound))
        syncing = self.ctx.memo(_syncing_functions, lambda: _syncing_functions(self.ctx, facts))
        for call, call_scope in facts.calls(loop):
            func = call.func
            if _last_name(func) in syncing and not self.ctx.qnames(func, call_scope):
                return None  # a function of the module that syncs (in its own loop, say)
        # The loop's data: its target or what `next()` gives, and names carried from one
        # iteration to the next (`ids = torch.cat([ids, new])`); then what its forward computes.
        inputs = bound_names(loop.target) if type(loop) is cst.For else set()
        data = self._iterates_data(loop)
        carried: set[str] = set()
        rebound = set(inputs)  # names given a fresh value every iteration
        for node, value, targets in assigns:
            if type(node) is cst.AugAssign:
                continue
            if _read_names(value) & targets:
                carried |= targets
            else:
                rebound |= targets
                if _next_batch(self.ctx, value, scope):
                    inputs |= targets  # `batch = next(it)` in a while loop
                    data = True
        carried -= rebound
        inputs |= carried
        if not data and not self._feeds_back(loop, assigns, carried):
            return None  # a few items (the control images of one call), not a dataset
        tensors: set[str] = set()
        for _ in range(3):
            for _, value, targets in assigns:
                if targets <= tensors:
                    continue
                if self._tensor(value, tensors, inputs, scope):
                    tensors |= targets
                elif _read_names(value) & inputs:
                    inputs |= targets  # `input_ids = batch["input_ids"].to(device)`
        resets = set(rebound)
        kept: list[tuple[str, str | None]] = []  # (where, the name of the value kept there)
        for node, value, _ in assigns:
            if isinstance(node, cst.AugAssign):
                where = _kept_key(node.target)
                if where is not None and self._tensor(value, tensors, inputs, scope):
                    kept.append((where, None))
                continue
            for target in _unpacked(_targets(node)):
                where = dotted_name(target)
                if where is None:
                    continue
                if not _mentions(value, where):
                    resets.add(where)
                elif self._tensor(value, tensors, inputs, scope):
                    kept.append((where, None))
        for call, call_scope in facts.calls(loop):
            func = call.func
            if type(func) is not cst.Attribute:
                continue
            where = dotted_name(func.value)
            method = func.attr.value
            if where is None or not (
                method in COLLECTING_METHODS or (method == "update" and "metric" in where.lower())
            ):
                continue
            for arg in call.args:
                if self._tensor(arg.value, tensors, inputs, call_scope):
                    value = arg.value
                    kept.append((where, value.value if type(value) is cst.Name else None))
                    break
        materialized = self._materialized(loop)
        for where, name in kept:
            if where in resets or where in materialized or name in materialized:
                continue
            if not self._on_host(where):
                return where
        return None

    def _iterates_data(self, loop: cst.For | cst.While) -> bool:
        """A ``for`` loop over something named like a dataset: ``test_loader``,
        ``enumerate(self.val_dataloader)``, ``tqdm(eval_ds)``, ``range(len(test_data))``."""
        if type(loop) is not cst.For:
            return False
        return any(
            type(n) is cst.Name and not DATA_WORDS.isdisjoint(name_words(n.value))
            for n in iter_nodes(loop.iter)
        )

    def _feeds_back(
        self,
        loop: cst.For | cst.While,
        assigns: list[_Binding],
        carried: set[str],
    ) -> bool:
        """A model call in ``loop`` reads a value carried from the previous iteration (or one
        computed from it): a sampling or decoding loop (``latents = step(unet(latents), ...)``,
        ``ids = torch.cat([ids, model(ids).argmax(-1)])``), whose graph deepens every iteration."""
        if not carried:
            return False
        derived = set(carried)
        for _ in range(3):
            for _, value, targets in assigns:
                if not targets <= derived and _read_names(value) & derived:
                    derived |= targets
        for call, _ in self.facts.calls(loop):
            func = call.func
            if (type(func) is cst.Name or type(func) is cst.Attribute) and self._is_model(func):
                if any(_read_names(a.value) & derived for a in call.args):
                    return True
        return False

    def _materialized(self, loop: cst.For | cst.While) -> set[str]:
        """Names and attribute chains the loop copies to the host each iteration in a way that
        replaces their pending graph with data: ``acc.cpu()``, ``.tolist()``, ``.numpy()``,
        ``.to("cpu")``, ``print(acc)``, ``str(acc)``, ``f"{acc}"`` in a print."""
        found: set[str] = set()
        for call, scope in self.facts.calls(loop):
            func = call.func
            if type(func) is cst.Attribute and (
                func.attr.value in MATERIALIZING_METHODS
                or (func.attr.value == "to" and _to_cpu(call))
            ):
                where = dotted_name(func.value)
                if where is not None:
                    found.add(where)
            elif self.ctx.qnames(func, scope) & MATERIALIZING_CALLS:
                for arg in call.args:
                    exprs = [arg.value] + [
                        sub.expression
                        for sub in iter_nodes(arg.value)
                        if type(sub) is cst.FormattedStringExpression
                    ]
                    found.update(n for n in map(dotted_name, exprs) if n is not None)
        return found

    def _tensor(self, node: cst.CSTNode, tensors: set[str], inputs: set[str], scope: Scope) -> bool:
        """True when ``node`` evaluates to a device tensor the loop computes: a name in
        ``tensors``; an attribute, item or tensor method of one (not ``.shape``, ``.size()`` or
        a host read); arithmetic or a comparison on one; a torch function of one; a container
        of one; or a call of a callable of the module (a model, ``self.model``, a loss function:
        no imported name, no plain name such as ``tokenizer``) given ``inputs`` or ``tensors``."""
        if isinstance(node, cst.Name):
            return node.value in tensors
        if isinstance(node, cst.Attribute):
            return node.attr.value not in PYTHON_ATTRIBUTES and self._tensor(
                node.value, tensors, inputs, scope
            )
        if isinstance(node, cst.Subscript):
            return self._tensor(node.value, tensors, inputs, scope)
        if isinstance(node, cst.BinaryOperation):
            return self._tensor(node.left, tensors, inputs, scope) or self._tensor(
                node.right, tensors, inputs, scope
            )
        if isinstance(node, cst.UnaryOperation):
            return not isinstance(node.operator, cst.Not) and self._tensor(
                node.expression, tensors, inputs, scope
            )
        if isinstance(node, cst.Comparison):
            return self._tensor(node.left, tensors, inputs, scope) or any(
                self._tensor(c.comparator, tensors, inputs, scope) for c in node.comparisons
            )
        if isinstance(node, cst.IfExp):
            return self._tensor(node.body, tensors, inputs, scope) or self._tensor(
                node.orelse, tensors, inputs, scope
            )
        if isinstance(node, (cst.List, cst.Tuple)):
            return any(self._tensor(e.value, tensors, inputs, scope) for e in node.elements)
        if isinstance(node, cst.Call):
            return self._tensor_call(node, tensors, inputs, scope)
        return False

    def _tensor_call(
        self, call: cst.Call, tensors: set[str], inputs: set[str], scope: Scope
    ) -> bool:
        func = call.func
        names = self.ctx.qnames(func, scope)
        if names:  # torch.cat(...), F.softmax(...); not float(), len(), numpy, mesh_reduce
            return (
                any(n.startswith(("torch.", "torch_xla.")) for n in names)
                and not names & HOST_FUNCTIONS
                and any(self._tensor(a.value, tensors, inputs, scope) for a in call.args)
            )
        if type(func) is cst.Attribute:
            method = func.attr.value
            if method in PYTHON_METHODS or (method == "to" and _to_cpu(call)):
                return False
            if self._tensor(func.value, tensors, inputs, scope):
                return True  # a tensor method: out.argmax(1), loss.detach()
            if chain_root(func) in inputs or plain_name(func.value):
                return False  # a method of the batch (x.to(device)) or a tokenizer's
        elif type(func) is not cst.Name:
            return False
        if plain_name(func):
            return False  # tokenizer(text), self.config(...)
        read: set[str] = set()
        for arg in call.args:
            read |= _read_names(arg.value)
        if read & tensors or any(self._tensor(a.value, tensors, inputs, scope) for a in call.args):
            return True  # criterion(out, y), criterion(model(x), y), model.test(logits, y)
        return bool(read & inputs) and self._is_model(func)

    def _is_model(self, func: cst.Name | cst.Attribute) -> bool:
        """``func`` (or, for a method, its receiver: ``model.generate``) is named like a model
        (``model``, ``self.net``, ``text_encoder``, ``unet``) or is a name the module calls
        ``.eval()``/``.train()``/``.parameters()``/... on."""
        names = [_last_name(func)]
        if type(func) is cst.Attribute:
            names.append(_last_name(func.value))
        models = model_names(self.ctx)
        return any(
            n is not None
            and n != "self"  # a method of the module itself: self.prepare_image(...)
            and (n in models or model_word(n))
            for n in names
        )

    def _on_host(self, where: str) -> bool:
        """The accumulator ``where`` (a name) is assigned once, before the loop, a tensor built
        on the CPU (``torch.tensor([0.0, 0.0])``, ``torch.zeros(4)``: no ``device=``): adding an
        XLA tensor to it in place would raise, so what the loop adds is on the CPU too."""
        if "." in where:
            return False
        found = definition(self.ctx, cst.Name(where))
        if found is None or type(found[0]) is not cst.Call:
            return False
        call = found[0]
        return (
            bool(self.ctx.qnames(call, found[1].scope) & CPU_FACTORIES)
            and find_arg(call, "device") is None
        )


def _syncing_functions(ctx: FileContext, facts: LoopFacts) -> frozenset[str]:
    """Names of the module's functions that end the graph somewhere in their body (in a loop
    too: ``def denoise(...): for t in timesteps: ...; xm.mark_step()``), or call one that does
    (by name, transitively)."""
    flat = ctx.flat
    nodes, ends = flat.nodes, flat.ends
    syncing: set[str] = set()
    callees: dict[str, set[str]] = {}
    opened: list[tuple[int, cst.FunctionDef, Scope]] = []
    for i in flat.of_types(_FUNCTIONS_AND_CALLS):
        while opened and opened[-1][0] <= i:
            opened.pop()
        node = nodes[i]
        if type(node) is cst.FunctionDef:
            scope = ctx.scopes.get(node, opened[-1][2] if opened else ctx.root_scope)
            opened.append((ends[i], node, scope))
            continue
        if not opened or type(node) is not cst.Call:
            continue
        _, function, scope = opened[-1]
        name = function.name.value
        found = facts.classify(node, scope, use_functions=False)
        if found is not None and found.boundary:
            syncing.add(name)
        else:
            callee = _last_name(node.func)
            if callee is not None:
                callees.setdefault(name, set()).add(callee)
    changed = True
    while changed:
        changed = False
        for name, called in callees.items():
            if name not in syncing and called & syncing:
                syncing.add(name)
                changed = True
    return frozenset(syncing)
