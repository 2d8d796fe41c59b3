"""Pitfalls the rules missed on real code, and one rule turned off by default (XLA303)."""

from __future__ import annotations

from helpers import lint_tree, write_tree


def _found(tmp_path, files, select, **settings):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=select, **settings)
    return [(d.path, d.line) for d in result.diagnostics]


# -- XLA201: a step compiled with torch_xla.compile --------------------------------------

COMPILED_STEP = """\
import torch_xla
import torch_xla.core.xla_model as xm


def train_step(data, target):
    optimizer.zero_grad()
    loss = loss_fn(model(data), target)
    loss.backward()
    optimizer.step()
    return loss


step_fn = torch_xla.compile(train_step, full_graph=True)


def train(loader):
    for step, (data, target) in enumerate(loader):
        loss = step_fn(data, target)
        print(f"step {step} loss {loss.item():.4f}", flush=True)
        if step % 10 == 0:
            xm.add_step_closure(lambda: print(loss, flush=True))
"""


def test_host_read_after_a_torch_xla_compile_step_is_reported(tmp_path):
    assert _found(tmp_path, {"train.py": COMPILED_STEP}, ["XLA201"], preview=True) == [
        ("train.py", 19)
    ]


def test_decorated_step_and_its_result_printed(tmp_path):
    code = (
        "import torch_xla\n@torch_xla.compile()\ndef step(x):\n    return model(x).sum()\n"
        "for x in loader:\n    loss = step(x)\n    print(loss, flush=True)\n"
        "    print(x.shape, flush=True)\n"
    )  # 8: the loader's own batch, not a device result
    assert _found(tmp_path, {"train.py": code}, ["XLA201"], preview=True) == [("train.py", 7)]


def test_a_torch_compile_d_function_is_not_a_torch_xla_step(tmp_path):
    # torch.compile may target inductor on CPU/GPU; only torch_xla.compile is known to run one XLA step.
    code = (
        "import torch\nimport torch_xla\nf = torch.compile(g)\n"
        "for x in loader:\n    y = f(x)\n    print(y.item(), flush=True)\n"
    )
    assert _found(tmp_path, {"train.py": code}, ["XLA201"], preview=True) == []


# -- XLA304: deprecated variables in a child process's environment --------------------------

CHILD_ENV = """\
import os
import subprocess
import torch_xla


def launch(cmd):
    env = os.environ.copy()
    env["XLA_USE_BF16"] = "1"
    subprocess.run(cmd, env=env)


def launch_inherit(cmd):
    os.environ["XLA_DOWNCAST_BF16"] = "1"
    subprocess.run(cmd, env=os.environ)


def launch_dict(cmd):
    subprocess.Popen(cmd, env=dict(os.environ, XLA_USE_SPMD="1"))
    return {**os.environ, "PJRT_DEVICE": "TPU"}
"""


def test_child_environments_are_checked_and_os_environ_is_reported_once(tmp_path):
    found = _found(tmp_path, {"run.py": CHILD_ENV}, ["XLA304"])
    assert found == [("run.py", 8), ("run.py", 13), ("run.py", 18)]


def test_a_child_environment_is_known_per_function(tmp_path):
    code = (
        "import os\nimport subprocess\nimport torch_xla\n"
        "def a(cmd):\n    env = os.environ.copy()\n    subprocess.run(cmd, env=env)\n"
        "def b():\n    env = {}\n    env['XLA_USE_BF16'] = '1'\n    return env\n"
    )  # 9: a plain dict here
    assert _found(tmp_path, {"run.py": code}, ["XLA304"]) == []


# -- XLA013: torch_xla.distributed.xla_dist ---------------------------------------------------

XLA_DIST = (
    "import torch_xla\ndef tpu_pod_launcher(args):\n"
    "    from torch_xla.distributed import xla_dist\n"
    "    xla_dist.resolve_and_execute(xla_dist.get_args_parser().parse_args(args))\n"
)


def test_xla_dist_is_removed_from_2_1_on(tmp_path):
    # pytorch/xla f6409de358 (#5240) deleted torch_xla/distributed/xla_dist.py; v2.0.0 still had it.
    write_tree(tmp_path, {"launch.py": XLA_DIST})
    for version, lines in (("2.9", [3]), ("2.1", [3]), ("2.0", [])):
        result, _, _ = lint_tree(tmp_path, select=["XLA013"], target_version=version)
        assert [d.line for d in result.diagnostics] == lines, version
        assert all("--worker=all" in d.message for d in result.diagnostics)


# -- XLA303: off by default ------------------------------------------------------------------

SPAWN = (
    "import torch_xla.distributed.xla_multiprocessing as xmp\n"
    "def _mp_fn(i):\n    pass\nxmp.spawn(_mp_fn, args=())\n"
)


def test_prefer_launch_is_off_by_default_and_can_be_selected(tmp_path):
    write_tree(tmp_path, {"train.py": SPAWN})
    default, _, _ = lint_tree(tmp_path)
    assert [d.code for d in default.diagnostics if d.code == "XLA303"] == []
    chosen, _, _ = lint_tree(tmp_path, extend_select=["XLA303"])
    assert [(d.code, d.line) for d in chosen.diagnostics if d.code == "XLA303"] == [("XLA303", 4)]
