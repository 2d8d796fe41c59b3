"""XLA028 per-replica-seed: a seed that differs per replica before the model is built."""

from __future__ import annotations

import libcst as cst

from ...analysis import apis
from ...analysis.context import FileContext, find_arg
from ...analysis.devices import (
    PER_HOST_APIS,
    PER_HOST_VARIABLES,
)
from ...analysis.guards import runs_on_xla
from ...analysis.names import dotted_name
from ...analysis.seeds import (
    RNG_APIS,
    TORCH_SEEDS,
    SeedBeforeModel,
    calls_that_run,
    launched_functions,
    statements_after,
)
from ...analysis.values import (
    PARAMETER,
    Known,
    Site,
    Unknown,
    definition,
    value_of,
)
from ...analysis.walk import iter_nodes
from ...diagnostics import Severity
from ...rule import Invalid, Valid
from .common import _LAUNCH, LIGHTNING_ROOTS, MULTIPROCESS

# What tells the replicas of a one-process-per-device program apart: their ordinals
# (torch_xla/runtime.py `global_ordinal`, `local_ordinal`; torch_xla/core/xla_model.py
# `get_ordinal`, `get_local_ordinal`), the process index (one process per device), the rank of
# the process group, and what also tells hosts apart (XLA027's sources: replicas on different
# hosts differ by them).
PER_REPLICA_APIS = {
    f"{apis.XR}.global_ordinal": "`xr.global_ordinal()`",
    f"{apis.XR}.local_ordinal": "`xr.local_ordinal()`",
    f"{apis.XM}.get_ordinal": "`xm.get_ordinal()`",
    f"{apis.XM}.get_local_ordinal": "`xm.get_local_ordinal()`",
    "torch.distributed.get_node_local_rank": "`dist.get_node_local_rank()`",
    **PER_HOST_APIS,
}


PER_REPLICA_VARIABLES = PER_HOST_VARIABLES | {"LOCAL_RANK"}


# `xm.set_rng_state`/`torch_xla.manual_seed` seed the XLA device's generator
# (torch_xla/core/xla_model.py `set_rng_state`: `_xla_set_rng_seed` for the device), not torch's
# CPU generator that initialises a module built on the CPU: a per-replica device seed (dropout
# masks) after a common `torch.manual_seed` is the right thing, so they do not count here.
REPLICA_SEEDS = TORCH_SEEDS - RNG_APIS


# Accelerate's objects whose `process_index` is the replica's (accelerate/state.py: on XLA it is
# `xr.global_ordinal()`), and its `set_seed(seed, device_specific=True)`, which adds it to the seed
# (accelerate/utils/random.py).
_ACCELERATE_STATES = frozenset(
    {
        "accelerate.Accelerator",
        "accelerate.accelerator.Accelerator",
        "accelerate.PartialState",
        "accelerate.state.PartialState",
        "accelerate.state.AcceleratorState",
    }
)


_ACCELERATE_INDEXES = frozenset({"process_index", "local_process_index"})


ACCELERATE_SET_SEED = "accelerate.utils.set_seed"


# What makes the replicas' parameters equal after they were built apart:
# `xm.broadcast_master_param` (torch_xla/core/xla_model.py: `collective_broadcast` of every parameter
# and buffer from ordinal 0) and other broadcasts; a DDP wrap (torch/nn/parallel/distributed.py
# `DistributedDataParallel.__init__` calls torch/distributed/utils.py `_sync_module_states`, a
# broadcast from rank 0); an FSDP wrap (torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py
# `_shard_parameters_` keeps one slice of each parameter per rank: every value then exists once);
# Lightning's Trainer and Fabric (their XLA strategies `broadcast_master_param` the module,
# `sync_module_states=True` by default: lightning/pytorch/strategies/xla.py `setup`,
# lightning/fabric/strategies/xla.py `setup_module`; their DDP strategies wrap it in DDP).
PARAMETER_SYNCS = frozenset(
    {
        f"{apis.XM}.broadcast_master_param",
        f"{apis.XM}.collective_broadcast",
        "torch_xla.experimental.pjrt.broadcast_master_param",
        "torch.distributed.broadcast",
        "torch.distributed.utils._sync_module_states",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel",
        "torch_xla.distributed.fsdp.xla_fully_sharded_data_parallel.XlaFullyShardedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
    }
)


_LIGHTNING_RUNNERS = (".Trainer", ".Fabric")


# Loading the whole model after it was built overwrites every replica's initial values with the
# same ones: `model.load_state_dict(...)`, torch.distributed.checkpoint, and functions whose name
# says they load or restore a checkpoint (`load_checkpoint(model, path)`).
_LOAD_METHODS = frozenset({"load_state_dict", "load_state", "set_model_state_dict"})


_LOAD_APIS = frozenset(
    {
        "torch.distributed.checkpoint.load",
        "torch.distributed.checkpoint.load_state_dict",
        "torch.distributed.checkpoint.state_dict.set_model_state_dict",
    }
)


_LOAD_WORDS = (
    "load_checkpoint",
    "load_ckpt",
    "load_weights",
    "load_pretrained",
    "restore",
    "resume",
)


# Functions of other modules (the rule sees one file) whose name says they make parameters equal:
# `broadcast_params(model)`, `sync_model_states(model)`, `wrap_ddp(model)`, `setup_fsdp(model)`.
_SYNC_WORDS = ("broadcast", "ddp", "fsdp")


_SYNC_OBJECTS = ("param", "model", "weight", "state", "module")


_NOT_MODEL_STATE = ("optim", "sched", "scaler")


class PerReplicaSeed(SeedBeforeModel):
    code = "XLA028"
    name = "per-replica-seed"
    preview = True
    sources = PER_REPLICA_APIS
    variables = PER_REPLICA_VARIABLES
    seeds = REPLICA_SEEDS
    requires = tuple(MULTIPROCESS)
    summary = (
        "With one process per device, a seed that differs per replica (ordinal, rank, the launch "
        "index) set before the model is built, and nothing makes the replicas' parameters equal."
    )
    message = (
        "seed depends on {source}, so it differs per replica, and the model is built after it "
        "({model}) while nothing makes the replicas' parameters equal: `xm.optimizer_step` "
        "averages gradients, so each replica keeps training its own initial weights; seed the same "
        "on every replica before building the model (per replica only afterwards), or call "
        "`xm.broadcast_master_param(model)` once it is built"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
In a program that runs one process per device (`torch_xla.launch`, `xmp.spawn`, torchrun,
`init_process_group("xla")`), flags a seed of torch's generator (`torch.manual_seed`,
`transformers.set_seed`, Lightning's `seed_everything`, Accelerate's `set_seed`, or a function of
the same file that passes its parameter to one of them) whose argument depends on the replica:
`xr.global_ordinal()`, `xr.local_ordinal()`, `xm.get_ordinal()`, `xm.get_local_ordinal()`,
`xr.process_index()`, `dist.get_rank()`, the `RANK`/`LOCAL_RANK` environment variables, the
index parameter of the function given to `torch_xla.launch`/`xmp.spawn` (`def _mp_fn(index):`),
Accelerate's `accelerator.process_index`, or `set_seed(seed, device_specific=True)`; directly or
through a local variable assigned from one. It is reported when a model is built after it in the
same function (as XLA027 recognises one: a `torch.nn` layer, a module class of the file, a
`from_pretrained`/`from_config` call, `build_model()`...) and the file never makes the replicas'
parameters equal: no `xm.broadcast_master_param(...)` or other broadcast, no
`DistributedDataParallel(...)` (torch's, `apex.parallel`'s or another library's class of that name) or FSDP wrap, no Lightning `Trainer`/`Fabric`, no call of a
function whose name says it does one of these (`broadcast_params(model)`, `wrap_ddp(model)`: the
rule reads one file), and no `load_state_dict`/checkpoint load after the seed. Not flagged: per-replica seeds after the model
exists (data order, augmentation, dropout), seeds in a `worker_init_fn`, `random.seed` and
`np.random.seed`, `xm.set_rng_state`/`torch_xla.manual_seed` (they seed the XLA device's
generator, not the CPU generator that initialises a module built on the CPU), modules built
directly on the device (`nn.Linear(4, 4, device=torch_xla.device())`: their initial values
come from the device's generator, which `torch.manual_seed` does not seed; measured), SPMD
programs (XLA027), single-process programs, and files that never run on XLA (no torch_xla
import in the file or its program: a CUDA/NCCL script under `torch.distributed.launch`).

## Why is this bad
With one process per device every replica builds its own copy of the model, and nothing in
torch_xla makes the copies equal: `xm.optimizer_step` calls `reduce_gradients`, which
all-reduces the gradients it fetches from the optimizer (`_fetch_gradients`: `p.grad.data`,
summed and scaled by `1 / world_size`) and never touches a parameter (torch_xla 2.9.0
`torch_xla/core/xla_model.py`, `optimizer_step`, `reduce_gradients`). Replicas that start from
different weights then apply the same averaged gradient to different models for the whole run:
the averaged gradient is the gradient of none of them, the replicas never agree, and `xm.save`
writes the master replica's copy only (`save`, `master_only=True`). Training runs and the loss
falls, so nothing shows the problem. torch_xla's fix is `xm.broadcast_master_param(model)`
(`collective_broadcast` of every parameter and buffer from ordinal 0); torch_xla's own test
`test/pjrt/test_collective_ops_tpu.py` (`test_broadcast_master_param`) seeds with
`xr.global_ordinal()` and asserts that replicas differ without it and agree with it. A DDP wrap
broadcasts rank 0's parameters in its constructor (torch 2.9.0 `torch/nn/parallel/distributed.py`,
`DistributedDataParallel.__init__` → `_sync_module_states`), and Lightning's XLA strategies call
`broadcast_master_param` (`sync_module_states=True` by default). Accelerate does neither on XLA:
`set_seed(seed, device_specific=True)` adds `AcceleratorState().process_index` (the global
ordinal on XLA) and `Accelerator.prepare_model` wraps in DDP only for GPU-like backends.
Run on CPU (two gloo processes doing what `reduce_gradients` does), a per-rank seed left the
replicas' weights 0.72 apart after 100 SGD steps; with a DDP wrap, 0.0.

## Example
```python
import torch
import torch_xla

def _mp_fn(index):
    torch.manual_seed(1234 + index)
    model = Net().to(torch_xla.device())
    ...

torch_xla.launch(_mp_fn)
```

## Use instead
```python
import torch
import torch_xla
import torch_xla.core.xla_model as xm

def _mp_fn(index):
    torch.manual_seed(1234)            # the same on every replica: one initial model
    model = Net().to(torch_xla.device())
    xm.broadcast_master_param(model)   # or make them equal this way
    torch.manual_seed(1234 + index)    # per replica from here: data order, augmentation
    ...

torch_xla.launch(_mp_fn)
```

## References
- https://docs.pytorch.org/xla/master/learn/pjrt.html
- torch_xla 2.9.0 `torch_xla/core/xla_model.py` (`optimizer_step`, `reduce_gradients`,
  `broadcast_master_param`, `save`)
- pytorch/xla `test/pjrt/test_collective_ops_tpu.py` (`test_broadcast_master_param`)
- torch 2.9.0 `torch/nn/parallel/distributed.py` (`DistributedDataParallel.__init__`),
  `torch/distributed/utils.py` (`_sync_module_states`)
"""
    valid = (
        # neuronx-nemo-megatron apex/tests/distributed/amp_master_params: a CUDA/NCCL test, no torch_xla.
        Valid(
            "import torch\n"
            "torch.distributed.init_process_group(backend='nccl', init_method='env://')\n"
            "torch.manual_seed(torch.distributed.get_rank())\nmodel = torch.nn.Linear(4, 4)\n"
        ),
        # apex.parallel.DistributedDataParallel broadcasts rank 0's parameters like torch's DDP.
        Valid(
            "import torch\nimport torch_xla\nfrom apex.parallel import DistributedDataParallel\n"
            "def _mp_fn(index):\n    torch.manual_seed(index)\n    model = torch.nn.Linear(4, 4)\n"
            "    model = DistributedDataParallel(model)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    torch.manual_seed(42)\n    model = torch.nn.Linear(4, 4)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        # Built on the XLA device: initialised from the device's generator, which
        # torch.manual_seed does not seed (a fresh user measured equal weights for seeds 1, 2).
        Valid(
            "import torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    torch.manual_seed(index)\n"
            "    model = torch.nn.Linear(4, 4, device=torch_xla.device())\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    torch.manual_seed(42)\n    model = torch.nn.Linear(4, 4)\n"
            "    torch.manual_seed(42 + index)\n    shuffle(data)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            _LAUNCH + "def _mp_fn(index):\n    torch.manual_seed(xm.get_ordinal())\n"
            "    model = torch.nn.Linear(4, 4).to(torch_xla.device())\n"
            "    xm.broadcast_master_param(model)\n"
            "import torch\ntorch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch.distributed as dist\nimport torch_xla\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "def _mp_fn(index):\n    dist.init_process_group('xla', init_method='xla://')\n"
            "    torch.manual_seed(dist.get_rank())\n    model = DDP(torch.nn.Linear(4, 4))\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.runtime as xr\n"
            "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
            "def _mp_fn(index):\n    torch.manual_seed(xr.global_ordinal())\n"
            "    model = torch.nn.Linear(4, 4)\n    model = FSDP(model)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import random\nimport numpy as np\nimport torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    np.random.seed(index)\n    random.seed(index)\n"
            "    model = torch.nn.Linear(4, 4)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.runtime as xr\n"
            "def _mp_fn(index):\n"
            "    def worker_init_fn(worker_id):\n"
            "        torch.manual_seed(1234 + worker_id + xr.global_ordinal())\n"
            "    model = torch.nn.Linear(4, 4)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\n"
            "def _mp_fn(index):\n    torch.manual_seed(42)\n    torch_xla.manual_seed(42 + index)\n"
            "    model = torch.nn.Linear(4, 4)\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"
            "def _mp_fn(index):\n    torch.manual_seed(xm.get_ordinal())\n"
            "    model = torch.nn.Linear(4, 4)\n"
            "    model.load_state_dict(torch.load('init.pt'))\n"
            "torch_xla.launch(_mp_fn)\n"
        ),
        Valid(
            "import torch\nimport torch_xla.runtime as xr\nxr.use_spmd()\n"
            "torch.manual_seed(xr.global_ordinal())\nmodel = torch.nn.Linear(4, 4)\n"
        ),
        Valid(
            "import torch\nimport torch_xla.core.xla_model as xm\n"
            "torch.manual_seed(xm.get_ordinal())\nmodel = torch.nn.Linear(4, 4)\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch\nimport torch.nn as nn\nimport torch_xla\n"
            "class Net(nn.Module):\n    pass\n"
            "def _mp_fn(index):\n    torch.manual_seed(index)\n    model = Net()\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            (7,),
        ),
        Invalid(
            "import torch_xla.core.xla_model as xm\n"
            "import torch_xla.distributed.xla_multiprocessing as xmp\n"
            "from transformers import AutoConfig, AutoModelForCausalLM, set_seed\n"
            "def train(index, args):\n    set_seed(args.seed + xm.get_ordinal())\n"
            "    config = AutoConfig.from_pretrained(args.model)\n"
            "    model = AutoModelForCausalLM.from_config(config)\n"
            "xmp.spawn(train, args=(args,))\n",
            (5,),
        ),
        Invalid(
            "import os\nimport torch\nimport torch_xla\n"
            "def seed_all(seed):\n    torch.manual_seed(seed)\n"
            "def main():\n    rank = int(os.environ['RANK'])\n    seed_all(100 + rank)\n"
            "    model = torch.nn.Sequential(torch.nn.Linear(4, 4))\n"
            "if __name__ == '__main__':\n    main()\n",
            (8,),
            files=(("run.sh", "torchrun --nproc_per_node=4 example.py\n"),),
        ),
    )

    def skip(self) -> bool:
        """Code that never runs on XLA: the file neither imports torch_xla nor belongs to a
        program that does (``ctx.in_xla_program``: a CUDA/NCCL test under
        ``torch.distributed.launch``), or a branch for another platform (:func:`runs_on_xla`)."""
        return not self.ctx.in_xla_program or not runs_on_xla(self.ctx)

    def other_source(self, node: cst.CSTNode, site: Site | None) -> str | None:
        """The index parameter of a function this file launches (``def _mp_fn(index):``), or
        Accelerate's ``process_index`` (``accelerator.process_index``)."""
        ctx = self.ctx
        if type(node) is cst.Name:
            value = value_of(ctx, node, site)
            if isinstance(value, Unknown) and value.kind == PARAMETER:
                return _index_parameters(ctx).get(id(value.node))
            return None
        if type(node) is cst.Attribute and node.attr.value in _ACCELERATE_INDEXES:
            base = node.value
            if type(base) is cst.Name:
                found = definition(ctx, base, site)
                base = found[0] if found is not None else base
            if ctx.is_call_to(base, _ACCELERATE_STATES):
                return f"Accelerate's `{node.attr.value}`"
        return None

    def call_source(self, call: cst.Call) -> str | None:
        """``set_seed(seed, device_specific=True)`` of Accelerate adds the process index."""
        if not self.ctx.is_call_to(call, ACCELERATE_SET_SEED):
            return None
        arg = find_arg(call, "device_specific", 1)
        if arg is None:
            return None
        value = value_of(self.ctx, arg.value)
        if isinstance(value, Known) and value.value is True:
            return "`device_specific=True` (Accelerate adds the process index)"
        return None

    def synchronised(self) -> bool:
        """The file broadcasts parameters or wraps the model in DDP/FSDP/Lightning anywhere
        (:data:`PARAMETER_SYNCS`), or loads a checkpoint into it after the seed."""
        ctx = self.ctx
        if ctx.memo(_syncs_parameters, lambda: _syncs_parameters(ctx)):
            return True
        return any(_loads_model(ctx, n) for s in statements_after(ctx) for n in calls_that_run(s))


def _index_parameters(ctx: FileContext) -> dict[int, str]:
    """The first parameter of each function this file launches (``torch_xla.launch`` and
    ``xmp.spawn`` call ``fn(index, *args)`` with the global ordinal: torch_xla/_internal/pjrt.py
    ``_SpawnFn``), by the id of its Param node, with how the message names it."""
    return ctx.memo(_index_parameters, lambda: _find_index_parameters(ctx))


def _find_index_parameters(ctx: FileContext) -> dict[int, str]:
    out: dict[int, str] = {}
    for name, fn in launched_functions(ctx).items():
        params = fn.params.params
        if params:
            first = params[0]
            text = f"`{first.name.value}`, the global ordinal `{name}` receives from the launch"
            out[id(first)] = text
    return out


def _syncs_parameters(ctx: FileContext) -> bool:
    """The file calls one of :data:`PARAMETER_SYNCS`, makes a Lightning ``Trainer``/``Fabric``,
    or calls a function whose name says it broadcasts or wraps in DDP/FSDP (``broadcast_params``,
    ``sync_model_states``, ``wrap_ddp``: the rule cannot read another module's body). Each call
    is resolved in its own scope (an import inside a function counts)."""
    owners: list[cst.Module | cst.FunctionDef | cst.ClassDef] = [ctx.module]
    owners += [n for n in iter_nodes(ctx.module) if isinstance(n, (cst.FunctionDef, cst.ClassDef))]
    for owner in owners:
        scope = ctx.scopes.get(owner)
        body: cst.CSTNode = owner if isinstance(owner, cst.Module) else owner.body
        for call in calls_that_run(body):
            names = ctx.qnames(call.func, scope)
            if names & PARAMETER_SYNCS or any(
                q.rsplit(".", 1)[-1] == "DistributedDataParallel" for q in names
            ):
                return (
                    True  # also apex.parallel's and other libraries' DDP: they broadcast rank 0's
                )
            if any(q.startswith(LIGHTNING_ROOTS) and q.endswith(_LIGHTNING_RUNNERS) for q in names):
                return True
            last = (dotted_name(call.func) or "").rsplit(".", 1)[-1].lower()
            if any(w in last for w in _SYNC_WORDS) or (
                "sync" in last and any(w in last for w in _SYNC_OBJECTS)
            ):
                return True
    return False


def _loads_model(ctx: FileContext, call: cst.Call) -> bool:
    """``call`` loads saved values into a model: ``x.load_state_dict(...)`` (not an optimizer's or
    a scheduler's), torch.distributed.checkpoint's loads, ``load_checkpoint(...)``."""
    func = call.func
    if type(func) is cst.Attribute and func.attr.value in _LOAD_METHODS:
        owner = (dotted_name(func.value) or "").lower()
        return not any(word in owner for word in _NOT_MODEL_STATE)
    if ctx.qnames(func) & _LOAD_APIS:
        return True
    last = dotted_name(func)
    return last is not None and any(w in last.rsplit(".", 1)[-1].lower() for w in _LOAD_WORDS)
