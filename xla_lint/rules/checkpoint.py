"""Saving and loading the state of sharded programs."""

from __future__ import annotations

import libcst as cst

from .. import apis
from ..context import find_arg, literal_string
from ..diagnostics import Severity
from ..rule import Invalid, Rule, Valid
from ..values import (ATTRIBUTE, CALL, CONTAINER, COUNTER, ELEMENT, ENVIRONMENT, NAMESPACE, OPTION, PARAMETER,
                      SEVERAL, Known, Site, Unknown, value_of)
from ..walk import iter_nodes
from .multiprocess import _words

# Words of names that stand for objects holding no XLA tensor: argparse namespaces and
# configuration (`args`, `self.args`, `opts`, `training_args`, `model.config`, `cfg`,
# `hparams`), tokenizers, and objects whose `state_dict()` is plain Python data: LR
# schedulers (torch/optim/lr_scheduler.py `state_dict`: the `__dict__` without the
# optimizer), GradScalers (torch/amp/grad_scaler.py `state_dict`: `get_scale()`, a float),
# samplers and data loaders (positions and seeds).
_PLAIN_WORDS = frozenset({"args", "argv", "opts", "options", "flags", "hparams", "hyperparameters",
                          "config", "configs", "cfg", "conf", "configuration", "tokenizer", "tokenizers",
                          "scaler", "scalers", "sampler", "samplers", "loader", "loaders", "dataloader",
                          "dataloaders"})
# Calls whose result holds no XLA tensor: conversions to Python values, and the host RNG
# states checkpoints store (`random.getstate()`, `np.random.get_state()`, `torch.get_rng_state()`
# and `torch.cuda.get_rng_state_all()`: CPU ByteTensors; `xm.get_rng_state()`: an int,
# torch_xla 2.9.0 torch_xla/core/xla_model.py).
_PLAIN_CALLS = frozenset({"builtins.int", "builtins.float", "builtins.str", "builtins.bool", "builtins.len",
                          "builtins.repr", "builtins.range", "builtins.hash", "builtins.id", "builtins.vars",
                          "random.getstate", "numpy.random.get_state", "os.getpid", "time.time"})
_RNG_STATE = frozenset({"get_rng_state", "get_rng_state_all"})
# Calls that hold what their arguments hold.
_WRAPPERS = frozenset({"builtins.dict", "builtins.list", "builtins.tuple", "builtins.set", "builtins.sorted",
                       "copy.copy", "copy.deepcopy", "collections.OrderedDict"})
# Methods whose result is plain Python data whatever the receiver.
_PLAIN_METHODS = frozenset({"item", "tolist", "numpy", "keys", "__len__", "format", "to_dict", "to_json_string"})

# A program that shards (for the examples).
_SHARDED = ("import torch\nimport torch_xla.distributed.spmd as xs\n"
            "from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
            "SpmdFullyShardedDataParallel as FSDPv2\nxs.set_global_mesh(mesh)\n")


class TorchSaveSharded(Rule):
    code = "XLA003"
    name = "torch-save-sharded"
    summary = "torch.save/xm.save in a sharded program loses the sharding; use torch.distributed.checkpoint."
    message = ("`{api}` in a program that shards tensors gathers them, drops their sharding and has "
               "every host write the same path; save with `torch.distributed.checkpoint` and "
               "`SPMDSavePlanner`")
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `torch.save(...)` and `xm.save(...)` in a module that imports torch_xla, in a
program that shards (calls `mark_sharding`, builds a `Mesh`/`HybridMesh`, sets a global
mesh or wraps a model in FSDPv2), when the object saved can hold XLA tensors: a
`state_dict()` of a model or optimizer, a tensor, a name bound to one of those, a
container holding one, or an object whose origin the file does not show (a parameter,
the result of a call: plausible model state).

Not flagged, because nothing in them is sharded (`xla_lint/values.py` follows the names):
argparse namespaces (`args`, `self.args`, anything from `parse_args()`, `vars(args)`),
literals and containers of numbers, strings and options (`{"step": step, "lr":
args.lr}`), configuration and tokenizer objects (`config`, `model.config`, `tokenizer`),
the state of LR schedulers, GradScalers, samplers and data loaders
(`scheduler.state_dict()`: plain Python values), host RNG states (`torch.get_rng_state()`,
`xm.get_rng_state()`), the state dict of a module moved to the host earlier in the same
function (`model.to("cpu")` ... `xm.save(model.state_dict(), path)`), and torch_xla's own
modules (`xm.save` and `mesh_reduce` are implemented with `torch.save`).

## Why is this bad
`torch.save` and `xm.save` write ordinary tensors. A sharded XLA tensor is first
gathered to the host as a whole tensor (every shard copied to one host's memory: for a
large model it does not fit), the partition spec is not recorded, and in an SPMD job
every host runs the same line and writes the same path, so the hosts overwrite each
other on shared storage. `xm.save` only picks a "master ordinal", which in SPMD is true
on every host (`torch_xla/core/xla_model.py`, `save` and `is_master_ordinal`, 2.9.0).
The right tool is `torch.distributed.checkpoint` with torch_xla's SPMD planners, which
write each host's shards and the sharding metadata, and reshard on load
(`torch_xla/experimental/distributed_checkpoint/planners.py`).

## Example
```python
model = FSDPv2(model)
torch.save(model.state_dict(), "ckpt.pt")
```

## Use instead
```python
import torch.distributed.checkpoint as dist_cp
from torch_xla.experimental.distributed_checkpoint import SPMDLoadPlanner, SPMDSavePlanner

dist_cp.save(state_dict={"model": model.state_dict()},
             storage_writer=dist_cp.FileSystemWriter(ckpt_dir),
             planner=SPMDSavePlanner())
state = {"model": model.state_dict()}
dist_cp.load(state_dict=state, storage_reader=dist_cp.FileSystemReader(ckpt_dir),
             planner=SPMDLoadPlanner())
model.load_state_dict(state["model"])
```
On a pod, `ckpt_dir` must be storage every host can reach, and the hosts need a CPU
process group (`dist.init_process_group("gloo", init_method="xla://")`).
`torch_xla.experimental.distributed_checkpoint.CheckpointManager` wraps the same for
periodic checkpoints. `python -m xla_lint.runtime` checks a save/load round trip.

## References
- https://docs.pytorch.org/xla/master/perf/spmd_distributed_checkpoint.html
- torch_xla 2.9.0 `torch_xla/experimental/distributed_checkpoint/`
"""
    valid = (
        Valid("import torch\n\ndef save_table(table, path):\n    torch.save(table, path)\n"),
        Valid("import torch\nimport torch_xla\nmodel = torch.nn.Linear(2, 2).to('xla')\n"
              "torch.save(model.state_dict(), 'm.pt')\n"),
        # Objects without tensors, as real training scripts save them next to the model
        # (Hugging Face Trainer: `torch.save(self.args, TRAINING_ARGS_NAME)`,
        # `torch.save(self.lr_scheduler.state_dict(), ...)`; accelerate's checkpointing.py: the
        # scaler's, the data loader's and the RNG states).
        Valid(_SHARDED + "import argparse, random\nimport numpy as np\nimport torch_xla.core.xla_model as xm\n"
              "parser = argparse.ArgumentParser()\nparser.add_argument('--lr', type=float, default=1e-3)\n"
              "args = parser.parse_args()\nfor step in range(10):\n    pass\n"
              "torch.save({'step': step, 'lr': args.lr, 'name': 'run'}, 'meta.pt')\n"
              "torch.save(args, 'args.bin')\ntorch.save(vars(args), 'args.pt')\n"
              "def save(self, scheduler, scaler, dataloader, step: int):\n"
              "    torch.save(self.args, 'training_args.bin')\n"
              "    torch.save(self.lr_scheduler.state_dict(), 'scheduler.pt')\n"
              "    state = scheduler.state_dict()\n    torch.save(state, 'sched.bin')\n"
              "    state = scaler.state_dict()\n    torch.save(state, 'scaler.pt')\n"
              "    torch.save(dataloader.state_dict(), 'dl.bin')\n"
              "    torch.save(self.model.config, 'config.pt')\n    torch.save(self.tokenizer, 'tok.pt')\n"
              "    states = {}\n    states['step'] = step\n    states['random_state'] = random.getstate()\n"
              "    states['numpy_random_seed'] = np.random.get_state()\n"
              "    states['torch_manual_seed'] = torch.get_rng_state()\n"
              "    states['torch_cuda_manual_seed'] = torch.cuda.get_rng_state_all()\n"
              "    states['xm_seed'] = xm.get_rng_state()\n    torch.save(states, 'rng.pkl')\n"),
        # The model was moved to the host first (a forked Hugging Face Trainer's TPU save).
        Valid(_SHARDED + "import torch_xla.core.xla_model as xm\n"
              "def save(self, model, path):\n    xm.mark_step()\n    model.to('cpu')\n"
              "    state_dict = model.state_dict()\n    xm.save(state_dict, path)\n"),
    )
    invalid = (
        Invalid("import torch\nimport torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
                "xr.use_spmd()\nxs.mark_sharding(w, mesh, ('fsdp', None))\n"
                "torch.save(model.state_dict(), 'ckpt.pt')\n", (6,)),
        Invalid("import torch_xla.core.xla_model as xm\n"
                "from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
                "SpmdFullyShardedDataParallel as FSDPv2\n"
                "model = FSDPv2(net)\nxm.save(model.state_dict(), 'ckpt.pt')\n", (4,)),
        # Moved to the host only after the save (or another module moved): still sharded state.
        Invalid(_SHARDED + "def save(model, other, path):\n    other.to('cpu')\n"
                "    torch.save(model.state_dict(), path)\n    model.to('cpu')\n",
                (_SHARDED.count("\n") + 3,)),
        # Model state reached through names, containers, loops and unknown origins.
        Invalid(_SHARDED + "model = FSDPv2(net)\noptimizer = torch.optim.AdamW(model.parameters())\n"
                "ckpt = {'model': model.state_dict(), 'step': 3}\ntorch.save(ckpt, 'a.pt')\n"
                "state = {'args': args}\nstate['optimizer'] = optimizer.state_dict()\ntorch.save(state, 'b.pt')\n"
                "def save_all(model_states, scheduler, path):\n"
                "    for i, state in enumerate(model_states):\n        torch.save(state, path)\n"
                "    state = scheduler.state_dict()\n    state = model.module.state_dict()\n"
                "    torch.save(state, path)\n    torch.save([optimizer], path)\n"
                "    torch.save(get_state(), path)\n", (8, 11, 14, 17, 18, 19)),
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if not ctx.imports_torch_xla or ctx.module_name == "torch_xla" or ctx.module_name.startswith("torch_xla."):
            return
        names = ctx.qnames(node.func)
        for api, short, keyword in ((apis.TORCH_SAVE, "torch.save", "obj"), (apis.XM_SAVE, "xm.save", "data")):
            if api in names:
                saved = find_arg(node, keyword, 0)
                if saved is None or self._may_hold_tensors(saved.value, None, 0):
                    self.report(node, self.message.format(api=short), requires=[("shards", True)])
                return

    def _may_hold_tensors(self, node: cst.BaseExpression, site: Site | None, depth: int) -> bool:
        """False when ``node`` (read at ``site``, default: the call visited) provably holds no
        XLA tensor: see the explanation's "Not flagged" list."""
        if depth > 6:
            return True
        if _plain_name(node):
            return False
        return self._value_may_hold(value_of(self.ctx, node, site), depth)

    def _value_may_hold(self, value: Known | Unknown, depth: int) -> bool:
        if isinstance(value, Known):
            return False  # literals: numbers, strings, None and containers of them
        kind = value.kind
        if kind in (NAMESPACE, OPTION, ENVIRONMENT, COUNTER) or value.type is not None:
            return False
        if kind in (CONTAINER, ELEMENT, SEVERAL):
            return any(self._may_hold_tensors(expr, where, depth + 1) for expr, where in value.parts)
        if kind in (ATTRIBUTE, PARAMETER) and value.node is not None:
            return not _plain_name(value.node.name if isinstance(value.node, cst.Param) else value.node)
        if kind == CALL and isinstance(value.node, cst.Call) and value.site is not None:
            return self._call_may_hold(value.node, value.site, depth)
        return True

    def _call_may_hold(self, call: cst.Call, site: Site, depth: int) -> bool:
        names = self.ctx.qnames(call.func, site.scope)
        if names & _PLAIN_CALLS or any(n.rsplit(".", 1)[-1] in _RNG_STATE for n in names):
            return False
        if names & _WRAPPERS:
            return any(self._may_hold_tensors(a.value, site, depth + 1) for a in call.args)
        func = call.func
        if not names and isinstance(func, cst.Attribute):  # a method of a value: `model.state_dict()`
            if func.attr.value in _PLAIN_METHODS:
                return False
            if isinstance(func.value, cst.Name) and self._moved_to_cpu(func.value.value):
                return False
            return self._may_hold_tensors(func.value, site, depth + 1)
        return True

    def _moved_to_cpu(self, name: str) -> bool:
        """True when, earlier in the enclosing function, ``name.to("cpu")`` or ``name.cpu()`` was
        called (a module moved to the host: its state dict holds CPU tensors, nothing to gather)."""
        function = next(iter(self.ctx.enclosing(cst.FunctionDef)), None)
        current = self.ctx.stack[-1] if self.ctx.stack else None
        if function is None:
            return False
        for node in iter_nodes(function.body):
            if node is current:
                return False
            if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
                continue
            target = node.func.value
            if type(target) is not cst.Name or target.value != name:
                continue
            method = node.func.attr.value
            first = find_arg(node, None, 0)
            if method == "cpu" or (method == "to" and first is not None and literal_string(first.value) == "cpu"):
                return True
        return False


def _plain_name(node: cst.CSTNode) -> bool:
    """A Name or attribute whose own name says it holds no tensor (``args``, ``self.args``,
    ``model.config``, ``lr_scheduler``, ``schedulers``...)."""
    if isinstance(node, cst.Attribute):
        name = node.attr.value
    elif isinstance(node, cst.Name):
        name = node.value
    else:
        return False
    return any(w in _PLAIN_WORDS or w.startswith("sched") for w in _words(name))
