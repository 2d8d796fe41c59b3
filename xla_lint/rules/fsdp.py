"""FSDPv2 (``SpmdFullyShardedDataParallel``): its mesh, its arguments and what may wrap it."""

from __future__ import annotations

import libcst as cst

from ..analysis import apis
from ..analysis.context import find_arg, literal_string
from ..analysis.devices import expects_error, function_key
from ..analysis.meshes import mesh_of
from ..analysis.values import CALL, PARAMETER, Known, Site, value_of
from ..diagnostics import Severity
from ..program.facts import Fact
from ..rule import Invalid, PendingFix, Replacement, Rule, Valid

FSDPV2_POSITIONAL = ("mesh", "shard_output")  # keyword-only since torch_xla 2.4 (pytorch/xla#7044)
KEYWORD_ONLY_SINCE = (2, 4)
CHECKPOINT_MODULE = frozenset(
    {
        "torch_xla.distributed.fsdp.checkpoint_module",
        "torch_xla.distributed.fsdp.utils.checkpoint_module",
    }
)

_IMPORT = (
    "from torch_xla.experimental.spmd_fully_sharded_data_parallel import "
    "SpmdFullyShardedDataParallel as FSDPv2\n"
)
_MESH = "import numpy as np\nimport torch_xla.distributed.spmd as xs\n"


def _keyword(arg: cst.Arg, name: str) -> cst.Arg:
    return arg.with_changes(
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )


class Fsdpv2Mesh(Rule):
    code = "XLA009"
    name = "fsdpv2-mesh"
    summary = "FSDPv2 given mesh/shard_output positionally, no mesh at all, or a mesh without an 'fsdp' axis."
    message = "{detail}"
    severity = Severity.ERROR
    fixable = True
    explanation = """\
## What it does
Checks calls of `SpmdFullyShardedDataParallel` (FSDPv2, any alias). It flags:

- `mesh` or `shard_output` passed positionally, `FSDPv2(model, mesh)` (when linting
  for torch_xla 2.4 or later, `--target-version`);
- a call without `mesh=` in a program that never calls `xs.set_global_mesh(...)`;
- a `mesh=` that is a `Mesh(...)` call, or a name assigned once from one, whose literal
  `axis_names` lack `"fsdp"` (or that has no axis names), and a literal
  `extra_data_axis=` that is not one of the mesh's axis names.

Calls passing `*args`/`**kwargs` are only checked for what they spell out; calls under
`with self.assertRaises(...)`/`pytest.raises(...)` are not checked.

## Why is this bad
In torch_xla 2.9.0 (`torch_xla/experimental/spmd_fully_sharded_data_parallel.py`)
`__init__(self, module, *, mesh=None, shard_output=None, auto_wrap_policy=None,
auto_wrapper_callable=None, extra_data_axis=None)` is keyword-only after `module`
(since pytorch/xla#7044, torch_xla 2.4), so `FSDPv2(model, mesh)` raises
`TypeError: __init__() takes 2 positional arguments but 3 were given`. The FSDPv2 guide
(`docs/source/perf/fsdp_spmd.md`) still shows the positional form. Without `mesh=` it
falls back to `xs.get_global_mesh()` and raises `ValueError: No mesh is provided and no
global mesh is set` when none was set. It then checks `"fsdp" not in mesh.axis_names`
(`ValueError: The mesh must have an axis named 'fsdp'`; a mesh without axis names
fails with a `TypeError` there), shards every parameter on the `"fsdp"` axis
(`_prepare_spmd_partition_spec`, combined as `(extra_data_axis, "fsdp")` when
`extra_data_axis` is given) and raises `ValueError` for an `extra_data_axis` missing
from the mesh.

## Example
```python
mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
model = FSDPv2(model, mesh)
```

## Use instead
```python
mesh = xs.Mesh(np.arange(n), (n, 1), ("fsdp", "model"))
model = FSDPv2(model, mesh=mesh)
# or: xs.set_global_mesh(mesh); model = FSDPv2(model)
```
The fix names positional `mesh` and `shard_output` arguments.

## References
- https://docs.pytorch.org/xla/master/perf/fsdp_spmd.html
- torch_xla 2.9.0 `torch_xla/experimental/spmd_fully_sharded_data_parallel.py`
- https://github.com/pytorch/xla/pull/7044
"""
    valid = (
        Valid(
            _MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (8, 1), ('fsdp', 'model'))\n"
            "model = FSDPv2(model, mesh=mesh)\n"
        ),
        Valid(
            _MESH
            + _IMPORT
            + "xs.set_global_mesh(xs.Mesh(np.arange(8), (8,), ('fsdp',)))\nmodel = FSDPv2(model)\n"
        ),
        # A module of a program whose entry sets the global mesh before calling it.
        Valid(
            _IMPORT + "def wrap(model):\n    return FSDPv2(model)\n",
            files=(
                (
                    "setup_mesh.py",
                    _MESH + "import example\nxs.set_global_mesh(xs.get_1d_mesh('fsdp'))\n"
                    "model = example.wrap(model)\n",
                ),
            ),
        ),
        Valid(
            _IMPORT + "wrap = lambda m, *args, **kwargs: FSDPv2(m, *args, **kwargs)\n"
            "model = FSDPv2(model, mesh=get_mesh(), auto_wrapper_callable=wrap)\n"
        ),
        Valid(
            _MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (2, 4), ('data', 'fsdp'))\n"
            "model = FSDPv2(model, mesh=mesh, extra_data_axis='data')\n"
        ),
        Valid(
            "import torch_xla\nclass SpmdFullyShardedDataParallel:\n    pass\n"
            "m = SpmdFullyShardedDataParallel(model, mesh)\n"
        ),
        Valid(
            "import pytest\n"
            + _IMPORT
            + "def test_no_mesh():\n    with pytest.raises(ValueError):\n"
            "        FSDPv2(model)\n"
        ),
    )
    invalid = (
        Invalid(
            _MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (8, 1), ('fsdp', 'model'))\n"
            "model = FSDPv2(model, mesh)\n",
            (5,),
            fixed=_MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (8, 1), ('fsdp', 'model'))\n"
            "model = FSDPv2(model, mesh=mesh)\n",
        ),
        Invalid(
            "import torch_xla.experimental.spmd_fully_sharded_data_parallel as spmd_fsdp\n"
            "model = spmd_fsdp.SpmdFullyShardedDataParallel(model, mesh, shard_output)\n",
            (2,),
            fixed="import torch_xla.experimental.spmd_fully_sharded_data_parallel as spmd_fsdp\n"
            "model = spmd_fsdp.SpmdFullyShardedDataParallel(model, mesh=mesh, shard_output=shard_output)\n",
        ),
        Invalid(_IMPORT + "model = FSDPv2(model)\n", (2,)),
        Invalid(
            _MESH + _IMPORT + "mesh = xs.Mesh(np.arange(8), (8, 1), ('data', 'model'))\n"
            "def wrap(m):\n    return FSDPv2(m, mesh=mesh)\n",
            (6,),
        ),
        Invalid(
            _MESH
            + "import torch_xla\nmodel = torch_xla.experimental.spmd_fully_sharded_data_parallel."
            "SpmdFullyShardedDataParallel(\n    model, mesh=xs.Mesh(np.arange(4), (4,), ('fsdp',)), "
            "extra_data_axis='dp')\n",
            (4,),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, apis.FSDPV2) or expects_error(self.ctx):
            return
        positional = [a for a in node.args if a.keyword is None and not a.star]
        starred = any(a.star for a in node.args)
        if len(positional) > 1 and self.ctx.target_version >= KEYWORD_ONLY_SINCE:
            extra = positional[1:]
            names = ", ".join(f"`{n}`" for n in FSDPV2_POSITIONAL[: len(extra)]) or "arguments"
            self.report(
                node,
                self.message.format(
                    detail=f"`SpmdFullyShardedDataParallel` takes {names} as keywords only (since torch_xla 2.4): "
                    "a positional argument after the module raises TypeError"
                ),
                fix=self._fix(node),
            )
            return
        mesh_arg = find_arg(node, "mesh", 1)
        if mesh_arg is None:
            if not starred:
                self.report(
                    node,
                    self.message.format(
                        detail="`SpmdFullyShardedDataParallel` without `mesh=` uses the global mesh, and this "
                        "program never calls `xs.set_global_mesh(...)`: ValueError 'No mesh is provided'"
                    ),
                    requires=[(Fact.GLOBAL_MESH, False)],
                )
            return
        mesh = mesh_of(self.ctx, mesh_arg.value)
        if mesh is None or mesh.axis_names is None:
            return
        if "fsdp" not in mesh.axis_names:
            have = (
                repr(tuple(mesh.axis_names)) if mesh.axis_names else ""
            )  # ('data',), never ('data')
            self.report(
                node,
                self.message.format(
                    detail=(
                        f"FSDPv2 shards parameters on the mesh axis 'fsdp', but the mesh's axis names are {have}"
                        if have
                        else "FSDPv2 needs a mesh with an axis named 'fsdp', but this mesh has no axis names"
                    )
                    + ": ValueError at construction"
                ),
            )
            return
        extra_axis = find_arg(node, "extra_data_axis")
        axis = literal_string(extra_axis.value) if extra_axis is not None else None
        if axis is not None and axis not in mesh.axis_names:
            self.report(
                node,
                self.message.format(
                    detail=f"`extra_data_axis={axis!r}` is not an axis of the mesh: ValueError at construction"
                ),
            )

    @staticmethod
    def _fix(node: cst.Call) -> PendingFix | None:
        positional = [a for a in node.args if a.keyword is None]
        if any(a.star for a in node.args) or len(positional) > 1 + len(FSDPV2_POSITIONAL):
            return None
        given = {a.keyword.value for a in node.args if a.keyword is not None}
        names = FSDPV2_POSITIONAL[: len(positional) - 1]
        if given & set(names):
            return None
        new_args, index = [], 0
        for arg in node.args:
            if arg.keyword is None:
                if index > 0:
                    arg = _keyword(arg, names[index - 1])
                index += 1
            new_args.append(arg)
        return PendingFix(
            "name the arguments " + ", ".join(names),
            [Replacement(node, node.with_changes(args=new_args))],
        )


class CheckpointAfterFsdpv2(Rule):
    code = "XLA010"
    name = "checkpoint-after-fsdpv2"
    summary = (
        "checkpoint_module applied to an FSDPv2-wrapped module; wrap the inner module instead."
    )
    message = (
        "`checkpoint_module` applied to a module already wrapped in FSDPv2; apply it to the inner "
        "module: `FSDPv2(checkpoint_module(module), mesh=mesh)`"
    )
    severity = Severity.ERROR
    explanation = """\
## What it does
Flags `checkpoint_module(x)` (`torch_xla.distributed.fsdp.checkpoint_module`) where `x`
is an FSDPv2 call, `checkpoint_module(FSDPv2(m, mesh=mesh))`, or a name last assigned
from one in the same function or module body (`model = FSDPv2(m)` then
`model = checkpoint_module(model)`).

## Why is this bad
`checkpoint_module` (torch_xla 2.9.0 `torch_xla/distributed/fsdp/utils.py`) replaces the
module's `forward` with one that runs under `torch_xla.utils.checkpoint.checkpoint`.
Applied to the FSDPv2 wrapper it checkpoints the wrapper's forward, which also runs the
wrapper's output-sharding hook and re-enters the wrapped module, instead of the layer's
own computation. The FSDPv2 guide (`docs/source/perf/fsdp_spmd.md`, "Gradient
checkpointing") states that checkpointing "needs to be applied to the module before
the FSDP wrapper. Otherwise, recursively loop into children modules will end up with
infinite loop."

## Example
```python
model = FSDPv2(model, mesh=mesh)
model = checkpoint_module(model)
```

## Use instead
```python
model = FSDPv2(checkpoint_module(model), mesh=mesh)
```
With `auto_wrap_policy`, checkpoint each wrapped layer through
`auto_wrapper_callable=lambda m, *a, **k: FSDPv2(checkpoint_module(m), *a, **k)`.

## References
- https://docs.pytorch.org/xla/master/perf/fsdp_spmd.html#gradient-checkpointing
- torch_xla 2.9.0 `torch_xla/distributed/fsdp/utils.py` (`checkpoint_module`)
"""
    valid = (
        Valid(
            _IMPORT + "from torch_xla.distributed.fsdp import checkpoint_module\n"
            "model = FSDPv2(checkpoint_module(model), mesh=mesh)\n"
        ),
        Valid(
            _IMPORT + "from torch_xla.distributed.fsdp import checkpoint_module\n"
            "wrapped = FSDPv2(model, mesh=mesh)\nmodel = checkpoint_module(layer)\n"
        ),
        Valid(
            _IMPORT + "from torch_xla.distributed.fsdp import checkpoint_module\n"
            "model = FSDPv2(model, mesh=mesh)\nmodel = Other(model)\nmodel = checkpoint_module(model)\n"
        ),
    )
    invalid = (
        Invalid(
            _IMPORT + "from torch_xla.distributed.fsdp import checkpoint_module\n"
            "model = checkpoint_module(FSDPv2(model, mesh=mesh))\n",
            (3,),
        ),
        Invalid(
            _IMPORT + "from torch_xla.distributed.fsdp.utils import checkpoint_module as ckpt\n"
            "def build(model, mesh):\n    model = FSDPv2(model, mesh=mesh)\n"
            "    model = ckpt(model)\n    return model\n",
            (5,),
        ),
        Invalid(
            "import torch_xla.distributed.fsdp as fsdp\n"
            "import torch_xla.experimental.spmd_fully_sharded_data_parallel as s\n"
            "m = fsdp.checkpoint_module(s.SpmdFullyShardedDataParallel(net))\n",
            (3,),
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.wrapped: dict[cst.CSTNode, set[str]] = {}

    def leave_Assign(self, node: cst.Assign) -> None:
        names = self.wrapped.setdefault(function_key(self.ctx), set())
        is_fsdp = self.ctx.is_call_to(node.value, apis.FSDPV2)
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                (names.add if is_fsdp else names.discard)(target.target.value)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, CHECKPOINT_MODULE):
            return
        arg = find_arg(node, "module", 0)
        if arg is None:
            return
        value = arg.value
        if self.ctx.is_call_to(value, apis.FSDPV2) or (
            isinstance(value, cst.Name)
            and value.value in self.wrapped.get(function_key(self.ctx), ())
        ):
            self.report(node)


# Hugging Face models: what `transformers` exports whose name says it is a model class
# (`AutoModelForCausalLM`, `LlamaForCausalLM`, `GPT2LMHeadModel`, `PreTrainedModel`), called
# directly or through the class methods that build one.
_HF_BUILDERS = frozenset({"from_pretrained", "from_config", "_from_config"})
# nn.Module methods that return the module itself (torch/nn/modules/module.py).
_SELF_METHODS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "xpu",
        "train",
        "eval",
        "float",
        "half",
        "bfloat16",
        "double",
        "type",
        "requires_grad_",
        "to_empty",
    }
)
_HF_IMPORT = "from transformers import AutoModelForCausalLM\n"


def transformers_model_class(names: frozenset[str]) -> str | None:
    """The model class a callee or annotation resolving to ``names`` names, when one of them is a
    ``transformers`` model class (``transformers.LlamaForCausalLM``) or one of its builders
    (``transformers.AutoModelForCausalLM.from_pretrained``); else None."""
    for name in sorted(names):
        if not name.startswith("transformers."):
            continue
        parts = name.split(".")
        cls = parts[-2] if parts[-1] in _HF_BUILDERS and len(parts) > 2 else parts[-1]
        if cls[:1].isupper() and ("Model" in cls or "For" in cls):
            return cls
    return None


class Fsdpv2TupleOutput(Rule):
    code = "XLA025"
    name = "fsdpv2-tuple-output"
    summary = (
        "FSDPv2 wraps a Hugging Face model (forward returns a ModelOutput) without shard_output=."
    )
    message = "{detail}"
    severity = Severity.ERROR
    preview = True
    explanation = """\
## What it does
Flags `SpmdFullyShardedDataParallel(...)` (FSDPv2, any alias) without `shard_output=` when
the module it wraps is visibly a Hugging Face `transformers` model: a call of a model class
or of its builders (`AutoModelForCausalLM.from_pretrained(...)`,
`LlamaForCausalLM(config)`, `AutoModel.from_config(config)`), directly, through
`.to(device)`/`.train()`-style calls that return the module, through a name assigned one
in the file, or a parameter annotated with such a class (`model: PreTrainedModel`).

Not flagged: other modules (your own `nn.Module` whose forward returns a tensor), calls
that pass `**kwargs` or `*args`, wrapping a sub-module (`model.model.layers[0]`), calls
under `pytest.raises(...)`, and the Hugging Face Trainer's own FSDPv2 path
(`fsdp_config={"xla": True, "xla_fsdp_v2": True}`: transformers 5.x
`integrations/tpu.py` passes its own `shard_output`).

## Why is this bad
FSDPv2 shards the output of each forward to make the compiler keep the FSDP layout. With
`shard_output=None` it installs `shard_output_impl` (torch_xla 2.9.0
`torch_xla/experimental/spmd_fully_sharded_data_parallel.py`, `__init__`), which accepts a
tensor, or a tuple (it warns "only the first element is sharded" and shards `output[0]`),
and raises `RuntimeError: The output type is not supported: <class ...>. Please provide
your own shard_output callable.` for anything else. A `transformers` model returns a
`ModelOutput` (an `OrderedDict` subclass, not a tuple) unless told `return_dict=False`.
Measured on CPU with 8 devices (torch_xla 2.9.0, transformers 5.24): a 1-layer
`LlamaForCausalLM` wrapped in `FSDPv2(model)` raised that RuntimeError for
`CausalLMOutputWithPast` at the first forward, also with `auto_wrap_policy` wrapping
the decoder layers (the outer wrapper still sees the `ModelOutput`). With
`return_dict=False` the forward ran, warned at every call, and sharded the first element
only: the logits without labels, but the scalar loss when `labels=` were passed (the logits
were left without a sharding). A model built with `return_dict=False` in the same call is
therefore reported as a warning.

## Example
```python
model = AutoModelForCausalLM.from_pretrained(name)
model = FSDPv2(model, mesh=mesh)
```

## Use instead
```python
def shard_output(output, mesh):
    xs.mark_sharding(output.logits, mesh, ("fsdp", None, None))

model = FSDPv2(model, mesh=mesh, shard_output=shard_output)
```
With `auto_wrap_policy`, the same `shard_output` is applied to every wrapped layer too, so
make it accept their outputs (a tensor or a tuple) as well as the model's `ModelOutput`.

## References
- https://docs.pytorch.org/xla/master/perf/fsdpv2.html
- torch_xla 2.9.0 `torch_xla/experimental/spmd_fully_sharded_data_parallel.py`
- https://github.com/huggingface/transformers/issues/35142
- https://github.com/pytorch/xla/issues/8775
"""
    valid = (
        Valid(
            _IMPORT + _HF_IMPORT + "import torch_xla.distributed.spmd as xs\n"
            "def shard_output(output, mesh):\n    xs.mark_sharding(output.logits, mesh, ('fsdp', None, None))\n"
            "model = AutoModelForCausalLM.from_pretrained('gpt2')\n"
            "model = FSDPv2(model, mesh=mesh, shard_output=shard_output)\n"
        ),
        # A model of your own returning a tensor; a sub-module of a Hugging Face model.
        Valid(
            _IMPORT + _HF_IMPORT + "import torch\nclass Net(torch.nn.Module):\n"
            "    def forward(self, x):\n        return x\n"
            "model = FSDPv2(Net(), mesh=mesh)\nhf = AutoModelForCausalLM.from_pretrained('gpt2')\n"
            "hf.model.layers[0] = FSDPv2(hf.model.layers[0], mesh=mesh)\n"
        ),
        # Arguments forwarded as **kwargs, and the output function given positionally (XLA009's TypeError).
        Valid(
            _IMPORT
            + _HF_IMPORT
            + "def wrap(model, **kwargs):\n    return FSDPv2(model, **kwargs)\n"
            "model = wrap(AutoModelForCausalLM.from_pretrained('gpt2'), mesh=mesh, shard_output=fn)\n"
            "m = FSDPv2(AutoModelForCausalLM.from_pretrained('gpt2'), mesh, fn)\n"
        ),
        # The Hugging Face Trainer wraps the model itself, with its own shard_output.
        Valid(
            "import torch_xla.runtime as xr\nfrom transformers import AutoModelForCausalLM, Trainer, "
            "TrainingArguments\nxr.use_spmd()\nmodel = AutoModelForCausalLM.from_pretrained('gpt2')\n"
            "args = TrainingArguments('out', fsdp='full_shard', fsdp_config={'xla': True, 'xla_fsdp_v2': True})\n"
            "Trainer(model=model, args=args).train()\n"
        ),
        # A class of the project that happens to share a transformers name.
        Valid(
            _IMPORT + "from modeling import AutoModelForCausalLM\n"
            "model = FSDPv2(AutoModelForCausalLM.from_pretrained('x'), mesh=mesh)\n",
            files=(
                (
                    "modeling.py",
                    "class AutoModelForCausalLM:\n    @classmethod\n"
                    "    def from_pretrained(cls, name):\n        return cls()\n",
                ),
            ),
        ),
    )
    invalid = (
        Invalid(
            _IMPORT + _HF_IMPORT + "from torch_xla.distributed.fsdp import checkpoint_module\n"
            "model = AutoModelForCausalLM.from_pretrained('gpt2')\nmodel = FSDPv2(model, mesh=mesh)\n"
            "other = FSDPv2(checkpoint_module(AutoModelForCausalLM.from_pretrained('gpt2')), mesh=mesh)\n",
            (5, 6),
        ),
        Invalid(
            _IMPORT + "import functools\nimport transformers\n"
            "from torch_xla.distributed.fsdp.wrap import transformer_auto_wrap_policy\n"
            "from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaForCausalLM\n"
            "def build(config, mesh):\n    model = LlamaForCausalLM(config).to('xla')\n"
            "    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})\n"
            "    return FSDPv2(model, mesh=mesh, auto_wrap_policy=policy)\n"
            "def build_auto(name, mesh):\n"
            "    return FSDPv2(transformers.AutoModel.from_pretrained(name).train(), mesh=mesh)\n",
            (9, 11),
        ),
        # A parameter annotated as a Hugging Face model; a model built with return_dict=False (a warning).
        Invalid(
            _IMPORT + "from transformers import PreTrainedModel, T5ForConditionalGeneration\n"
            "def shard(model: PreTrainedModel, mesh):\n    return FSDPv2(model, mesh=mesh)\n"
            "t5 = T5ForConditionalGeneration.from_pretrained('t5-small', return_dict=False)\n"
            "t5 = FSDPv2(t5, mesh=mesh)\n",
            (4, 6),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.is_call_to(node, apis.FSDPV2) or expects_error(self.ctx):
            return
        if any(a.star for a in node.args) or find_arg(node, "shard_output", 2) is not None:
            return
        module = find_arg(node, "module", 0)
        found = self._transformers_model(module.value, None, 0) if module is not None else None
        if found is None:
            return
        cls, built = found
        wrapped = f"`{cls}`"
        if built is not None and _returns_tuples(built):
            self.report(
                node,
                self.message.format(
                    detail=f"FSDPv2 without `shard_output=` wraps a Hugging Face model ({wrapped}) built with "
                    "`return_dict=False`: "
                    "its forward returns a tuple, so FSDPv2 warns at every call and shards the first element "
                    "only (the scalar loss when `labels=` are passed, not the logits); pass "
                    "`shard_output=` a function that shards the logits"
                ),
                severity=Severity.WARNING,
            )
            return
        self.report(
            node,
            self.message.format(
                detail=f"FSDPv2 without `shard_output=` wraps a Hugging Face model ({wrapped}), whose forward returns "
                "a `ModelOutput`: FSDPv2's default output sharding takes only a tensor or a tuple and raises "
                "RuntimeError 'The output type is not supported' at the first forward; pass `shard_output=` a "
                "function that shards the tensor in it (`output.logits`)"
            ),
        )

    def _transformers_model(
        self, expr: cst.BaseExpression, site: Site | None, depth: int
    ) -> tuple[str, cst.Call | None] | None:
        """``(model class, the call that built it or None)`` when ``expr`` (read at ``site``) is a
        ``transformers`` model; None when the file does not show one."""
        if depth > 6:
            return None
        scope = site.scope if site is not None else None
        if isinstance(expr, cst.Call):
            cls = transformers_model_class(self.ctx.qnames(expr.func, scope))
            if cls is not None:
                return cls, expr
            if self.ctx.is_call_to(expr, CHECKPOINT_MODULE):  # returns the module it was given
                inner = find_arg(expr, "module", 0)
                return (
                    self._transformers_model(inner.value, site, depth + 1)
                    if inner is not None
                    else None
                )
            func = expr.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in _SELF_METHODS
                and not self.ctx.qnames(func, scope)
            ):
                return self._transformers_model(func.value, site, depth + 1)
            return None
        if not isinstance(expr, cst.Name):
            return None
        value = value_of(self.ctx, expr, site)
        if isinstance(value, Known):
            return None
        if value.kind == CALL and isinstance(value.node, cst.Call):
            return self._transformers_model(value.node, value.site, depth + 1)
        if (
            value.kind == PARAMETER
            and isinstance(value.node, cst.Param)
            and value.node.annotation is not None
        ):
            annotation = value.node.annotation.annotation
            cls = transformers_model_class(
                self.ctx.qnames(annotation, value.site.scope if value.site else None)
            )
            return (cls, None) if cls is not None else None
        return None


def _returns_tuples(call: cst.Call) -> bool:
    """True when the model-building ``call`` passes ``return_dict=False``."""
    arg = find_arg(call, "return_dict")
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "False"
