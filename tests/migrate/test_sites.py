"""One file's torch_xla uses: what is found, how each is classed, and what its rewrite writes.

Every rewrite checked here must parse, decision sites never carry one, and a second round finds
nothing more to rewrite (``--fix`` is idempotent)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from xla_lint.migrate import table
from xla_lint.migrate.sites import file_sites
from xla_lint.pipeline.fixes import apply_fixes


def sites(source: str):
    return file_sites(textwrap.dedent(source), "train.py")


def fixed(source: str, unsafe: bool = False) -> str:
    """The source after the rewrites, in rounds as --fix runs them."""
    text = textwrap.dedent(source)
    for _ in range(10):
        fixes = [s.fix for s in file_sites(text, "train.py") if s.fix and (s.fix.safe or unsafe)]
        new, count = apply_fixes(text, fixes, unsafe)
        if not count or new == text:
            break
        cst.parse_module(new)  # every round's result parses
        text = new
    return text


def by_api(source: str) -> dict[str, str]:
    return {s.api: s.cls for s in sites(source)}


def test_names_resolve_through_imports_not_text():
    found = sites(
        """
        import torch_xla.core.xla_model as xm
        from torch_xla import runtime as xr

        def f(xm2, mark_step):
            xm.mark_step()
            xr.use_spmd()
            mark_step()  # a parameter, not torch_xla's
        """
    )
    apis = [(s.line, s.api) for s in found]
    assert (6, "torch_xla.core.xla_model.mark_step") in apis
    assert (7, "torch_xla.runtime.use_spmd") in apis
    assert not any(line == 8 for line, _ in apis)
    # the chain is one site: no separate site for the ``xm`` of ``xm.mark_step``
    assert sum(1 for line, _ in apis if line == 6) == 1


def test_classes_follow_the_map():
    classes = by_api(
        """
        import torch, torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.spmd as xs
        import torch_xla.distributed.parallel_loader as pl
        d = torch_xla.device()
        xm.mark_step()
        mesh = xs.Mesh([0], (1,), ("x",))
        loader = pl.MpDeviceLoader([], d)
        """
    )
    assert classes["torch_xla.device"] == table.MECHANICAL
    assert classes["torch_xla.core.xla_model.mark_step"] == table.BEHAVIOUR
    assert classes["torch_xla.distributed.spmd.Mesh"] == table.DECISION
    assert classes["torch_xla.distributed.parallel_loader.MpDeviceLoader"] == table.NO_EQUIVALENT


def test_decision_sites_are_never_rewritten():
    found = sites(
        """
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.xla_multiprocessing as xmp
        xm.optimizer_step(opt)
        dev = xm.xla_device(3)
        xmp.spawn(fn, args=())
        """
    )
    decisions = [s for s in found if s.cls == table.DECISION]
    assert len(decisions) == 3 and all(s.fix is None for s in decisions)


MECHANICAL = """
import torch
import torch.distributed as dist
import torch_xla
import torch_xla.core.xla_model as xm
from torch_xla.amp import syncfree, autocast

dist.init_process_group("xla", init_method="xla://")
device = torch_xla.device()
opt = syncfree.AdamW(params, lr=1e-3)
x = torch.zeros(3, device="xla")
with torch.autocast("xla", dtype=torch.bfloat16):
    y = model(x)
with autocast(xm.xla_device()):
    y = model(x)
model = torch.compile(model, backend="openxla")
xm.set_rng_state(7)
xm.wait_device_ops()
"""

MECHANICAL_FIXED = """
import torch
import torch.distributed as dist

dist.init_process_group("tpu")
device = torch.device("tpu")
opt = torch.optim.AdamW(params, lr=1e-3)
x = torch.zeros(3, device="tpu")
with torch.autocast("tpu", dtype=torch.bfloat16):
    y = model(x)
with torch.autocast("tpu"):
    y = model(x)
model = torch.compile(model, backend="tpu")
torch.tpu.manual_seed(7)
torch.accelerator.synchronize()
"""


def test_mechanical_rewrites_and_unused_imports_go():
    assert fixed(MECHANICAL) == MECHANICAL_FIXED


def test_fix_is_idempotent_and_leaves_nothing_fixable():
    once = fixed(MECHANICAL, unsafe=True)
    assert fixed(once, unsafe=True) == once
    assert not [s for s in file_sites(once, "train.py") if s.fix is not None]


def test_behaviour_changes_need_unsafe():
    source = """
    import torch_xla
    import torch_xla.core.xla_model as xm
    for batch in loader:
        step(batch)
        xm.mark_step()
        xm.add_step_closure(log, args=(loss, 3))
    with torch_xla.step():
        a = 1
        if a:
            b = 2
    """
    assert fixed(source) == textwrap.dedent(source)  # safe only: nothing changes
    assert fixed(source, unsafe=True) == textwrap.dedent(
        """
        for batch in loader:
            step(batch)
            log(loss, 3)
        a = 1
        if a:
            b = 2
        """
    )


def test_a_deleted_call_alone_in_its_block_becomes_pass():
    out = fixed(
        """
        import torch_xla.core.xla_model as xm
        if debug:
            xm.mark_step()
        """,
        unsafe=True,
    )
    assert out == textwrap.dedent(
        """
        if debug:
            pass
        """
    )


@pytest.mark.parametrize(
    "line",
    [
        "dev = torch_xla.device(1)",  # another device index: a decision
        "xm.add_step_closure(log, run_async=True)",  # no eager equivalent of run_async
        "r = xm.mark_step()",  # the result is used
        "xm.mark_step(); other()",  # shares its line
        'dist.init_process_group("xla", init_method="tcp://h:1")',  # another rendezvous
        "xm.set_rng_state(7, device=d)",  # a device argument
    ],
)
def test_what_cannot_be_carried_over_is_not_rewritten(line):
    source = f"import torch, torch_xla\nimport torch.distributed as dist\nimport torch_xla.core.xla_model as xm\n{line}\n"
    assert fixed(source, unsafe=True).endswith(f"{line}\n")


def test_ranks_are_mechanical_only_in_one_process_per_device_programs():
    # the visitor leaves the class to the program model (xla_lint.migrate.run.settle)
    found = sites("import torch_xla.runtime as xr\nr = xr.global_ordinal()\n")
    rank = next(s for s in found if s.api.endswith("global_ordinal"))
    assert rank.by_mode and rank.fix is not None


def test_environment_variables_in_code():
    found = by_api(
        """
        import os
        os.environ["PJRT_DEVICE"] = "TPU"
        os.environ.setdefault("XLA_USE_BF16", "1")
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["HOME"] = "/root"
        """
    )
    assert found == {
        "env:PJRT_DEVICE": table.NO_EQUIVALENT,
        "env:XLA_USE_BF16": table.NO_EQUIVALENT,
        "env:XLA_FLAGS": table.MECHANICAL,
    }


def test_an_import_a_chain_still_needs_is_kept():
    out = fixed(
        """
        import torch_xla
        import torch_xla.debug.metrics as met
        print(torch_xla.debug.metrics.metrics_report())
        """
    )
    assert "import torch_xla.debug.metrics as met" in out


def test_a_file_without_torch_xla_has_no_sites():
    assert sites("import torch\nx = torch.zeros(3, device='cuda')\n") == []


def test_an_import_whose_name_is_also_its_modules_is_kept_while_used():
    # pytorch/xla examples/scan/decoder_with_scan.py: the module's last part is the name bound
    source = """
    def run(layers, x):
        from torch_xla.experimental.scan_layers import scan_layers
        return scan_layers(layers, x)
    """
    assert fixed(source, unsafe=True) == textwrap.dedent(source)
