"""The rules that ask xla_lint.analysis.values (XLA003, XLA015, XLA018, XLA019) beyond their own examples:
severities, messages naming where a value comes from, and real-code shapes."""

from __future__ import annotations

from helpers import lint_tree, write_tree

from xla_lint.diagnostics import Severity


def _lint(tmp_path, files, select):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=select, preview=True)  # XLA015 is preview
    return sorted((d.path, d.line, d.code, d.severity, d.message) for d in result.diagnostics)


SPAWN = "import argparse\nimport os\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"


def test_spawn_nprocs_known_values_are_errors_naming_their_origin(tmp_path):
    # Shaped like huggingface/transformers' old examples/xla_spawn.py (shared case c21).
    code = (
        SPAWN + "NPROCS = 8\ndef main():\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--num_cores', type=int, default=8, help='1 or 8')\n"
        "    args = parser.parse_args()\n    xmp.spawn(_mp_fn, args=(args,), nprocs=args.num_cores)\n"
        "    cores = NPROCS\n    xmp.spawn(_mp_fn, nprocs=cores)\n"
        "    xmp.spawn(_mp_fn, nprocs=1 if args.num_cores == 1 else 4)\n"
    )
    found = _lint(tmp_path, {"xla_spawn.py": code}, ["XLA019"])
    assert [(line, severity) for _, line, _, severity, _ in found] == [
        (9, Severity.ERROR),
        (11, Severity.ERROR),
        (12, Severity.ERROR),
    ]
    assert "is 8 (the argparse default of --num_cores)" in found[0][4]
    assert "is 8 (the module constant `NPROCS`)" in found[1][4]
    assert "is 4 (a literal)" in found[2][4]  # one arm of the choice


def test_spawn_nprocs_unknown_values_are_warnings_naming_their_origin(tmp_path):
    # accelerate's tests/xla_spawn.py: the default is `device_count()`, computed at run time.
    code = (
        SPAWN + "def parse_args():\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--num_cores', type=int, default=device_count())\n"
        "    parser.add_argument('--cores', type=int)\n    return parser.parse_args()\n"
        "def main(n):\n    args = parse_args()\n    xmp.spawn(_mp_fn, nprocs=args.num_cores)\n"
        "    xmp.spawn(_mp_fn, nprocs=args.cores)\n    xmp.spawn(_mp_fn, nprocs=n)\n"
        "    xmp.spawn(_mp_fn, nprocs=int(os.environ.get('NPROCS', 1)))\n"
        "    xmp.spawn(_mp_fn, nprocs=None if n else 1)\n"
    )
    found = _lint(tmp_path, {"launch.py": code}, ["XLA019"])
    assert [(line, severity) for _, line, _, severity, _ in found] == [
        (11, Severity.WARNING),
        (12, Severity.WARNING),
        (13, Severity.WARNING),
        (14, Severity.WARNING),
    ]
    messages = [m for *_, m in found]
    assert (
        "comes from the argparse default of --num_cores, the result of `device_count()`"
        in messages[0]
    )
    assert "comes from an option the user sets (--cores, no default)" in messages[1]
    assert "comes from the parameter `n` of `main`" in messages[2]
    assert "comes from the environment variable `NPROCS`" in messages[3]


def test_xla_before_launch_knows_a_single_process_constant(tmp_path):
    code = (
        "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
        "NPROCS = {n}\ndef main():\n    device = xm.xla_device()\n    xmp.spawn(_mp_fn, nprocs=NPROCS)\n"
    )
    assert _lint(tmp_path, {"run.py": code.format(n=1)}, ["XLA018"]) == []
    assert [f[1] for f in _lint(tmp_path, {"run.py": code.format(n="None")}, ["XLA018"])] == [5]


def test_torch_save_reports_model_state_only(tmp_path):
    # Shared case c19, and accelerate's checkpointing.py shapes in a sharded program.
    files = {
        "train.py": "import argparse\nimport torch\nimport torch_xla.distributed.spmd as xs\n"
        "import torch_xla.runtime as xr\nimport checkpointing\nxr.use_spmd()\n"
        "parser = argparse.ArgumentParser()\nparser.add_argument('--lr', type=float, default=1e-3)\n"
        "args = parser.parse_args()\nxs.mark_sharding(w, mesh, ('fsdp', None))\n"
        "torch.save({'lr': args.lr, 'epochs': 3}, 'meta.pt')\n"
        "torch.save(model.state_dict(), 'model.pt')\n",
        "checkpointing.py": "import torch\nimport torch_xla.core.xla_model as xm\n"
        "def save_accelerator_state(model_states, optimizers, schedulers, scaler, step: int):\n"
        "    for i, opt in enumerate(optimizers):\n        state = opt.state_dict()\n"
        "        torch.save(state, f'optimizer_{i}.bin')\n"
        "    for i, scheduler in enumerate(schedulers):\n        state = scheduler.state_dict()\n"
        "        torch.save(state, f'scheduler_{i}.bin')\n"
        "    if scaler is not None:\n        state = scaler.state_dict()\n"
        "        torch.save(state, 'scaler.pt')\n"
        "    states = {}\n    states['step'] = step\n    states['xm_seed'] = xm.get_rng_state()\n"
        "    torch.save(states, 'random_states_0.pkl')\n",
    }
    found = _lint(tmp_path, files, ["XLA003"])
    assert [(p, line) for p, line, *_ in found] == [("checkpointing.py", 6), ("train.py", 12)]


def test_torch_save_in_torch_xla_itself_is_not_reported(tmp_path):
    # torch_xla/core/xla_model.py implements xm.save and mesh_reduce with torch.save.
    files = {
        "torch_xla/__init__.py": "",
        "torch_xla/core/__init__.py": "",
        "torch_xla/core/xla_model.py": "import io\nimport torch\nimport torch_xla\n"
        "def save(data, path):\n    torch.save(_maybe_convert_to_cpu(data), path)\n",
        "train.py": "import torch\nimport torch_xla.core.xla_model as xm\nimport torch_xla.distributed.spmd as xs\n"
        "xs.mark_sharding(w, mesh, ('fsdp', None))\nxm.save(model.state_dict(), 'm.pt')\n",
    }
    found = _lint(tmp_path, files, ["XLA003"])
    assert [(p, line) for p, line, *_ in found] == [("train.py", 5)]


def test_replica_divergent_sync_names_the_saved_flag(tmp_path):
    code = (
        "import torch_xla\nimport torch_xla.core.xla_model as xm\ndef _mp_fn(i):\n"
        "    loss = model(x)\n"
        "    is_root = xm.is_master_ordinal()\n    if is_root:\n        print(loss.item())\n"
        "    if not is_root:\n        xm.rendezvous('download')\n    download()\n"
        "    if is_root:\n        xm.rendezvous('download')\ntorch_xla.launch(_mp_fn)\n"
    )
    found = _lint(tmp_path, {"train.py": code}, ["XLA015"])
    assert [(line, "(`is_root`)" in message) for _, line, _, _, message in found] == [(7, True)]
