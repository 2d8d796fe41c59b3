"""Saving and loading the state of sharded programs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..analysis import apis
from ..analysis.context import find_arg
from ..analysis.devices import expects_error
from ..analysis.holds import may_hold_tensors
from ..analysis.values import CALL, Known, value_of
from ..diagnostics import Severity
from ..program.facts import Fact
from ..rule import Invalid, Rule, Valid

if TYPE_CHECKING:  # pragma: no cover
    pass

# A program that shards (for the examples).
_SHARDED = (
    "import torch\nimport torch_xla.distributed.spmd as xs\n"
    "from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
    "SpmdFullyShardedDataParallel as FSDPv2\nxs.set_global_mesh(mesh)\n"
)


class TorchSaveSharded(Rule):
    code = "XLA003"
    name = "torch-save-sharded"
    summary = "torch.save/xm.save in a sharded program loses the sharding; use torch.distributed.checkpoint."
    message = (
        "`{api}` in a program that shards tensors gathers them, drops their sharding and has "
        "every host write the same path; save with `torch.distributed.checkpoint` and "
        "`SPMDSavePlanner`"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `torch.save(...)` and `xm.save(...)` in a module that imports torch_xla, in a
program that shards (calls `mark_sharding`, builds a `Mesh`/`HybridMesh`, sets a global
mesh or wraps a model in FSDPv2), when the object saved can hold XLA tensors: a
`state_dict()` of a model or optimizer, a tensor, a name bound to one of those, a
container holding one, or an object whose origin the file does not show (a parameter,
the result of a call: plausible model state).

Not flagged, because nothing in them is sharded (`xla_lint/analysis/values.py` follows the names):
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
        Valid(
            "import torch\nimport torch_xla\nmodel = torch.nn.Linear(2, 2).to('xla')\n"
            "torch.save(model.state_dict(), 'm.pt')\n"
        ),
        # Objects without tensors, as real training scripts save them next to the model
        # (Hugging Face Trainer: `torch.save(self.args, TRAINING_ARGS_NAME)`,
        # `torch.save(self.lr_scheduler.state_dict(), ...)`; accelerate's checkpointing.py: the
        # scaler's, the data loader's and the RNG states).
        Valid(
            _SHARDED
            + "import argparse, random\nimport numpy as np\nimport torch_xla.core.xla_model as xm\n"
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
            "    states['xm_seed'] = xm.get_rng_state()\n    torch.save(states, 'rng.pkl')\n"
        ),
        # The model was moved to the host first (a forked Hugging Face Trainer's TPU save).
        Valid(
            _SHARDED + "import torch_xla.core.xla_model as xm\n"
            "def save(self, model, path):\n    xm.mark_step()\n    model.to('cpu')\n"
            "    state_dict = model.state_dict()\n    xm.save(state_dict, path)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch\nimport torch_xla.runtime as xr\nimport torch_xla.distributed.spmd as xs\n"
            "xr.use_spmd()\nxs.mark_sharding(w, mesh, ('fsdp', None))\n"
            "torch.save(model.state_dict(), 'ckpt.pt')\n",
            (6,),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\n"
            "from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
            "SpmdFullyShardedDataParallel as FSDPv2\n"
            "model = FSDPv2(net)\nxm.save(model.state_dict(), 'ckpt.pt')\n",
            (4,),
        ),
        # Moved to the host only after the save (or another module moved): still sharded state.
        Invalid(
            _SHARDED + "def save(model, other, path):\n    other.to('cpu')\n"
            "    torch.save(model.state_dict(), path)\n    model.to('cpu')\n",
            (_SHARDED.count("\n") + 3,),
        ),
        # Model state reached through names, containers, loops and unknown origins.
        Invalid(
            _SHARDED + "model = FSDPv2(net)\noptimizer = torch.optim.AdamW(model.parameters())\n"
            "ckpt = {'model': model.state_dict(), 'step': 3}\ntorch.save(ckpt, 'a.pt')\n"
            "state = {'args': args}\nstate['optimizer'] = optimizer.state_dict()\ntorch.save(state, 'b.pt')\n"
            "def save_all(model_states, scheduler, path):\n"
            "    for i, state in enumerate(model_states):\n        torch.save(state, path)\n"
            "    state = scheduler.state_dict()\n    state = model.module.state_dict()\n"
            "    torch.save(state, path)\n    torch.save([optimizer], path)\n"
            "    torch.save(get_state(), path)\n",
            (8, 11, 14, 17, 18, 19),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if (
            not ctx.imports_torch_xla
            or ctx.module_name == "torch_xla"
            or ctx.module_name.startswith("torch_xla.")
        ):
            return
        names = ctx.qnames(node.func)
        for api, short, keyword in (
            (apis.TORCH_SAVE, "torch.save", "obj"),
            (apis.XM_SAVE, "xm.save", "data"),
        ):
            if api in names:
                saved = find_arg(node, keyword, 0)
                if saved is None or may_hold_tensors(self.ctx, saved.value):
                    self.report(
                        node, self.message.format(api=short), requires=[(Fact.SHARDS, True)]
                    )
                return


# torch.distributed.checkpoint's entry points (torch 2.9.0 torch/distributed/checkpoint/__init__.py
# re-exports them from state_dict_saver.py and state_dict_loader.py): name -> (what it does, the
# position of `planner` when it may be passed positionally; `save`, `load` and `async_save` take
# it as a keyword only).
_DCP = "torch.distributed.checkpoint"
_DCP_ENTRIES: dict[str, dict[str, tuple[str, int | None]]] = {
    "state_dict_saver": {
        "save": ("save", None),
        "save_state_dict": ("save", 5),
        "async_save": ("async", None),
    },
    "state_dict_loader": {"load": ("load", None), "load_state_dict": ("load", 5)},
}
_DCP_CALLS = {
    f"{_DCP}{module}.{name}": entry
    for source, entries in _DCP_ENTRIES.items()
    for name, entry in entries.items()
    for module in ("", f".{source}")
}
# torch's own planners, which treat a sharded XLA tensor as a plain tensor (default_planner.py).
_DEFAULT_PLANNERS = frozenset(
    f"{_DCP}.{module}{cls}"
    for module in ("", "default_planner.")
    for cls in ("DefaultSavePlanner", "DefaultLoadPlanner")
)
_SPMD_PLANNER = {"save": "SPMDSavePlanner", "load": "SPMDLoadPlanner", "async": "SPMDSavePlanner"}

# An SPMD program that shards a model (for the examples).
_SPMD_SHARDED = (
    "import numpy as np\nimport torch\nimport torch_xla.runtime as xr\n"
    "import torch_xla.distributed.spmd as xs\nimport torch.distributed.checkpoint as dist_cp\n"
    "xr.use_spmd()\nmesh = xs.Mesh(np.arange(8), (8, 1), ('fsdp', 'model'))\n"
    "model = torch.nn.Linear(16, 8).to('xla')\nxs.mark_sharding(model.weight, mesh, ('fsdp', None))\n"
)
_SPMD_LINES = _SPMD_SHARDED.count("\n")
_PLANNERS = (
    "from torch_xla.experimental.distributed_checkpoint import SPMDLoadPlanner, SPMDSavePlanner\n"
)


class SpmdCheckpointPlanner(Rule):
    code = "XLA024"
    name = "spmd-checkpoint-planner"
    summary = (
        "torch.distributed.checkpoint save/load of sharded state without SPMDSavePlanner/SPMDLoadPlanner; "
        "async_save of XLA tensors."
    )
    message = "{detail}"
    severity = Severity.WARNING
    preview = True
    explanation = """\
## What it does
In a program that enables SPMD and shards tensors, flags calls of
`torch.distributed.checkpoint` (`save`, `save_state_dict`, `load`, `load_state_dict`,
under any import spelling: `import torch.distributed.checkpoint as dist_cp`,
`from torch.distributed.checkpoint import save`...) that pass no `planner=`, or pass torch's
own `DefaultSavePlanner()`/`DefaultLoadPlanner()` or `None`, when the state may hold XLA
tensors (what XLA003 follows: a `state_dict()`, a model, a container of them, an object of
unknown origin; not argparse namespaces, numbers, scheduler states or a model moved to the
host). It also flags `async_save` of such state, with or without a planner (an error: it
raises).

Not flagged: a planner passed in any other form (a name, an attribute, a call of your own:
`planner=planner`), calls that pass `**kwargs` (or `*args` for the positional forms), calls
under `if not xr.is_spmd():` or `pytest.raises(...)`, an `async_save` given its own
`async_stager=`, programs that never enable SPMD (one process per device with
`torch_xla.launch`, where each process saves its own unsharded copy), and building a
`FileSystemWriter`/`FileSystemReader` alone.

## Why is this bad
Without a planner, `torch.distributed.checkpoint` uses `DefaultSavePlanner` /
`DefaultLoadPlanner` (torch 2.9.0 `state_dict_saver.py` `_save_state_dict`,
`state_dict_loader.py` `_load_state_dict`), which see a sharded XLA tensor as one plain
tensor: saving copies it whole to the host, which for a sharded tensor runs an extra XLA
program that gathers every shard (`ReplicateShardedData`), and loading reads every tensor
whole on every host and uploads it whole. Measured on CPU with 8 devices (torch_xla 2.9.0):
saving eight sharded 1024x1024 weights without a planner ran 8 `ReplicateShardedData`
gathers and 8 extra compilations (0.42 s); with `SPMDSavePlanner()` none (0.14 s). The
checkpoint itself was right on one host, which is why this is a warning, but the whole
model passes through one host's memory, as with `torch.save` (XLA003). On a pod it is
worse (read from the source, not measured): the default planner's global plan gives each
plain tensor to one rank only (`_dedup_save_plans.py` `dedup_save_plans`), so each host
gathers different tensors alone, while a gather of a sharded tensor is an XLA computation
that every host has to run. `SPMDSavePlanner` writes each host's own shards
(`XLAShardedTensor.local_shards`) with their offsets, and `SPMDLoadPlanner` reads only the
shards a host holds (torch_xla 2.9.0 `torch_xla/experimental/distributed_checkpoint/planners.py`).

`dist_cp.async_save` first copies the state to CPU with torch's default stager, which
cannot copy XLA tensors: measured on CPU (torch 2.9.0, torch_xla 2.9.0), `async_save` of an
XLA model's `state_dict()` raised `CheckpointException ... RuntimeError: Attempted to
access the data pointer on an invalid python storage`, with and without
`SPMDSavePlanner()`, with and without a process group (the same call on CPU tensors
works). torch_xla's `CheckpointManager.save_async` copies the shards to the host itself
(`_sharded_cpu_state_dict`) before saving in the background.

## Example
```python
xr.use_spmd()
model = FSDPv2(model, mesh=mesh)
dist_cp.save({"model": model.state_dict()}, storage_writer=dist_cp.FileSystemWriter(path))
```

## Use instead
```python
import torch.distributed as dist
import torch_xla.distributed.xla_backend  # registers the xla:// init method
from torch_xla.experimental.distributed_checkpoint import SPMDLoadPlanner, SPMDSavePlanner

dist.init_process_group("gloo", init_method="xla://")  # once, at start-up
dist_cp.save({"model": model.state_dict()}, storage_writer=dist_cp.FileSystemWriter(path),
             planner=SPMDSavePlanner())
state = {"model": model.state_dict()}
dist_cp.load(state, storage_reader=dist_cp.FileSystemReader(path), planner=SPMDLoadPlanner())
model.load_state_dict(state["model"])
```
On a pod the hosts need that CPU process group: without one, `torch.distributed.checkpoint`
falls back to single-process mode (torch 2.9.0 `state_dict_saver.py` `save`: "assuming the
intent is to save in a single process"), where every host is rank 0 and coordinator
(`utils.py` `_DistWrapper`) and writes its own shards to `__0_0.distcp` and its own
`.metadata` under the same path, over the other hosts' files. `CheckpointManager` checks
for the group (`assert dist.is_initialized(), "A process group is required."`, measured) and
wraps save, async save and restore with the SPMD planners. `path` must be storage every host
can write (pytorch/xla#7919).

## References
- https://docs.pytorch.org/xla/master/perf/spmd_distributed_checkpoint.html
- torch_xla 2.9.0 `torch_xla/experimental/distributed_checkpoint/planners.py`, `manager.py`
- torch 2.9.0 `torch/distributed/checkpoint/state_dict_saver.py`, `default_planner.py`
- https://github.com/pytorch/xla/issues/7919, https://github.com/pytorch/xla/issues/7215
"""
    valid = (
        Valid(
            _SPMD_SHARDED
            + _PLANNERS
            + "dist_cp.save({'model': model.state_dict()}, storage_writer=dist_cp.FileSystemWriter('ckpt'),\n"
            "             planner=SPMDSavePlanner())\nstate = {'model': model.state_dict()}\n"
            "dist_cp.load(state, storage_reader=dist_cp.FileSystemReader('ckpt'), planner=SPMDLoadPlanner())\n"
            "dist_cp.save_state_dict(state, dist_cp.FileSystemWriter('c2'), None, 0, False, SPMDSavePlanner())\n"
        ),
        # The planner through a name, an attribute or **kwargs; state without tensors; a writer alone.
        Valid(
            _SPMD_SHARDED + _PLANNERS + "def save(state, path, planner, **kwargs):\n"
            "    dist_cp.save(state, storage_writer=dist_cp.FileSystemWriter(path), planner=planner)\n"
            "    dist_cp.save(state, checkpoint_id=path, planner=self.save_planner)\n"
            "    dist_cp.load(state, checkpoint_id=path, **kwargs)\n"
            "def save_meta(args, step: int):\n"
            "    dist_cp.save({'step': step, 'args': vars(args)}, checkpoint_id='meta')\n"
            "    writer = dist_cp.FileSystemWriter('ckpt')\n"
        ),
        # Only the branch that runs without SPMD saves without a planner.
        Valid(
            _SPMD_SHARDED
            + _PLANNERS
            + "if not xr.is_spmd():\n    dist_cp.save({'model': model.state_dict()}, checkpoint_id='c')\n"
            "else:\n    dist_cp.save({'model': model.state_dict()}, checkpoint_id='c', planner=SPMDSavePlanner())\n"
        ),
        # One process per device (no SPMD): every process saves its own unsharded copy.
        Valid(
            "import torch\nimport torch_xla\nimport torch.distributed as dist\n"
            "import torch.distributed.checkpoint as dcp\nimport torch_xla.distributed.xla_backend\n"
            "def _mp_fn(index):\n    dist.init_process_group('xla', init_method='xla://')\n"
            "    model = torch.nn.Linear(4, 4).to('xla')\n"
            "    dcp.save({'model': model.state_dict()}, checkpoint_id='ckpt')\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n"
        ),
        # A project function called save.
        Valid(
            _SPMD_SHARDED
            + "from checkpointing import save\nsave({'model': model.state_dict()}, 'ckpt')\n",
            files=(("checkpointing.py", "def save(state, path):\n    pass\n"),),
        ),
    )
    invalid = (
        Invalid(
            _SPMD_SHARDED + "dist_cp.save(state_dict={'model': model.state_dict()},\n"
            "             storage_writer=dist_cp.FileSystemWriter('ckpt'))\n"
            "state = {'model': model.state_dict()}\n"
            "dist_cp.load(state_dict=state, storage_reader=dist_cp.FileSystemReader('ckpt'))\n",
            (_SPMD_LINES + 1, _SPMD_LINES + 4),
        ),
        Invalid(
            _SPMD_SHARDED
            + "from torch.distributed.checkpoint import DefaultSavePlanner, load_state_dict, save_state_dict\n"
            "from torch.distributed.checkpoint.state_dict_saver import save as dcp_save\n"
            "def checkpoint(model, optimizer, path):\n"
            "    state = {'model': model.state_dict(), 'optim': optimizer.state_dict()}\n"
            "    save_state_dict(state, dist_cp.FileSystemWriter(path))\n"
            "    dcp_save(state, checkpoint_id=path, planner=DefaultSavePlanner())\n"
            "    dcp_save({'model': model}, checkpoint_id=path, planner=None)\n"
            "    load_state_dict(state, dist_cp.FileSystemReader(path))\n",
            tuple(_SPMD_LINES + n for n in (5, 6, 7, 8)),
        ),
        # async_save raises on XLA tensors, planner or not.
        Invalid(
            _SPMD_SHARDED
            + _PLANNERS
            + "future = dist_cp.async_save({'model': model.state_dict()}, checkpoint_id='ckpt',\n"
            "                            planner=SPMDSavePlanner())\n",
            (_SPMD_LINES + 2,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        names = ctx.qnames(node.func)
        entry = next((_DCP_CALLS[n] for n in names if n in _DCP_CALLS), None)
        if (
            entry is None
            or ctx.module_name.startswith(("torch_xla.", "torch."))
            or expects_error(ctx)
        ):
            return
        kind, position = entry
        if any(a.star == "**" or (a.star and position is not None) for a in node.args):
            return  # the planner may be among them
        state = find_arg(node, "state_dict", 0)
        if state is not None and not may_hold_tensors(self.ctx, state.value):
            return
        api = " ".join(ctx.module.code_for_node(node.func).split())
        if kind == "async":
            if find_arg(node, "async_stager") is None:
                self.report(
                    node,
                    self.message.format(
                        detail=f"`{api}` copies the state to the host with torch's default stager, which cannot copy "
                        "XLA tensors: it raises CheckpointException ('invalid python storage') with or without "
                        "a planner; use torch_xla's `CheckpointManager.save_async`, or `dist_cp.save` with "
                        "`planner=SPMDSavePlanner()`"
                    ),
                    requires=[(Fact.SPMD, True)],
                    severity=Severity.ERROR,
                )
            return
        planner = find_arg(node, "planner", position)
        if planner is not None and not self._default_planner(planner.value):
            return
        what = (
            f"`{api}` without `planner=`"
            if planner is None
            else f"`{api}` with torch's default planner"
        )
        effect = (
            "gathers each sharded XLA tensor whole to the host (an extra XLA program per tensor) instead of "
            "having each host write its own shards"
            if kind == "save"
            else "reads each tensor whole on every host and uploads it whole instead of reading each host's shards"
        )
        self.report(
            node,
            self.message.format(
                detail=f"{what} {effect}; pass `planner={_SPMD_PLANNER[kind]}()` "
                "(torch_xla.experimental.distributed_checkpoint)"
            ),
            requires=[(Fact.SPMD, True), (Fact.SHARDS, True)],
        )

    def _default_planner(self, expr: cst.BaseExpression) -> bool:
        """True for ``None``, ``DefaultSavePlanner()``/``DefaultLoadPlanner()``, or a name assigned one."""
        value = value_of(self.ctx, expr)
        if isinstance(value, Known):
            return value.value is None
        if value.kind == CALL and isinstance(value.node, cst.Call) and value.site is not None:
            return bool(self.ctx.qnames(value.node.func, value.site.scope) & _DEFAULT_PLANNERS)
        return False
