"""Shell scripts as sources: the launch rules' findings at a script's lines, and the findings in
Python that rest on what a script passes (the shared flow cases c27-c30, restated)."""

from __future__ import annotations

import os

from helpers import lint_tree, write_tree

from xla_lint.pipeline import shell
from xla_lint.rules import deprecated, rule_by_code

TRAIN = (
    "import torch\nimport torch_xla\n\n\ndef main():\n    device = torch_xla.device()\n"
    "    print(torch.ones(2, device=device).sum().item(), flush=True)\n\n\n"
    "if __name__ == '__main__':\n    main()\n"
)
SPMD_TRAIN = (
    "import numpy as np\nimport torch\nimport torch_xla\nimport torch_xla.distributed.spmd as xs\n"
    "import torch_xla.runtime as xr\n\n\ndef main():\n    n = xr.global_runtime_device_count()\n"
    "    mesh = xs.Mesh(np.arange(n), (n, 1), ('data', 'model'))\n"
    "    x = torch.randn(8, 8, device=torch_xla.device())\n"
    "    xs.mark_sharding(x, mesh, ('data', None))\n\n\nif __name__ == '__main__':\n    main()\n"
)
SPAWN = (
    "import argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\n\n\n"
    "def _mp_fn(index):\n    pass\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
    "    parser.add_argument('--num_cores', {option})\n    args = parser.parse_args()\n"
    "    xmp.spawn(_mp_fn, args=(), nprocs=args.num_cores)\n\n\nif __name__ == '__main__':\n"
    "    main()\n"
)


def found(tmp_path, files: dict[str, str], select: list[str]) -> set[tuple[str, int, str]]:
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=select, preview=True)
    return {(d.path, d.line, d.code) for d in result.diagnostics}


def diagnostics(tmp_path, files: dict[str, str], select: list[str]):
    write_tree(tmp_path, files)
    return lint_tree(tmp_path, select=select, preview=True)[0].diagnostics


# ---- c27: a removed module run from a shell script ------------------------------------------


def test_xla_dist_in_a_shell_script_is_removed_api_at_its_line(tmp_path):
    files = {
        "run_pod.sh": "#!/bin/bash\nexport TPU=my-v4-32\n"
        "python -m torch_xla.distributed.xla_dist --tpu=$TPU -- python train.py --epochs 3\n",
        "train.py": TRAIN,
    }
    [d] = diagnostics(tmp_path, files, ["XLA013"])
    assert (d.path, d.line, d.code, d.severity.value) == ("run_pod.sh", 3, "XLA013", "error")
    assert "No module named torch_xla.distributed.xla_dist" in d.message
    assert "--worker=all" in d.message  # what to do instead


def test_removed_module_is_checked_against_the_target_version(tmp_path):
    files = {"run.sh": "python -m torch_xla.distributed.xla_dist -- python t.py\n"}
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA013"], target_version="2.0")
    assert result.diagnostics == []


def test_xla_dist_behind_accelerate_tpu_cluster(tmp_path):
    files = {"pod.sh": "accelerate launch --tpu --tpu_cluster train.py\n", "train.py": TRAIN}
    assert found(tmp_path, files, ["XLA013"]) == {("pod.sh", 1, "XLA013")}


def test_xrt_variable_for_a_python_launch_is_removed_api(tmp_path):
    files = {
        "run.sh": "export XRT_TPU_CONFIG='localservice;0;localhost:51011'\npython train.py\n",
        "train.py": TRAIN,
    }
    assert found(tmp_path, files, ["XLA013"]) == {("run.sh", 1, "XLA013")}


# ---- c28: a deprecated variable exported for the program --------------------------------------


def test_exported_bf16_is_deprecated_at_the_export(tmp_path):
    files = {
        "run.sh": "#!/bin/bash\nexport PJRT_DEVICE=TPU\nexport XLA_USE_BF16=1\n"
        "python train.py --batch_size 128\nXLA_DOWNCAST_BF16=1 python train.py\n",
        "train.py": TRAIN,
    }
    got = diagnostics(tmp_path, files, ["XLA304"])
    assert [(d.path, d.line) for d in got] == [("run.sh", 3), ("run.sh", 5)]
    assert all(d.severity.value == "warning" for d in got)
    assert "`XLA_USE_BF16=1`, set for `train.py` (line 4)" in got[0].message


def test_variable_that_reaches_no_python_command_is_not_reported(tmp_path):
    files = {
        "env.sh": "export XLA_USE_BF16=1\necho done\n",  # sourced by someone else: not followed
        "local.sh": "XLA_USE_BF16=1\npython train.py\n",  # not exported: the child never sees it
        "train.py": TRAIN,
    }
    assert found(tmp_path, files, ["XLA304"]) == set()


# ---- c29: an option's value passed by the launch reaches argparse ----------------------------


def test_spawn_nprocs_from_the_script_that_launches_it(tmp_path):
    files = {
        "run.sh": "#!/bin/bash\nexport PJRT_DEVICE=TPU\n"
        "python xla_spawn.py --num_cores 8 train.py --lr 3e-4\n",
        "xla_spawn.py": SPAWN.format(option="type=int, default=1"),
    }
    [d] = diagnostics(tmp_path, files, ["XLA019"])
    assert (d.path, d.line, d.severity.value) == ("xla_spawn.py", 13, "error")
    assert "run.sh:3 passes `--num_cores 8`" in d.message


def test_spawn_nprocs_option_without_a_launch_that_changes_it(tmp_path):
    # The default is right and the launch passes 1, a variable, or nothing: no finding.
    files = {
        "run.sh": "python xla_spawn.py --num_cores 1\npython xla_spawn.py --num_cores $N\n"
        "python xla_spawn.py\n",
        "xla_spawn.py": SPAWN.format(option="type=int, default=1"),
    }
    assert found(tmp_path, files, ["XLA019"]) == set()


def test_spawn_nprocs_without_default_is_an_error_once_a_launch_passes_a_bad_value(tmp_path):
    spawn = SPAWN.format(option="type=int")
    [d] = diagnostics(tmp_path / "a", {"xla_spawn.py": spawn}, ["XLA019"])
    assert d.severity.value == "warning"  # nothing in the tree says what is passed
    files = {"xla_spawn.py": spawn, "go.sh": "python xla_spawn.py --num_cores=4\n"}
    [d] = diagnostics(tmp_path / "b", files, ["XLA019"])
    assert d.severity.value == "error" and "go.sh:1 passes `--num_cores 4`" in d.message
    # Without type=int the option is a string: even "1" is not the 1 spawn accepts.
    files = {
        "xla_spawn.py": SPAWN.format(option="default=None"),
        "go.sh": "python xla_spawn.py --num_cores 1\n",
    }
    [d] = diagnostics(tmp_path / "c", files, ["XLA019"])
    assert d.severity.value == "error"


def test_a_documentation_block_counts_only_where_no_script_runs_the_file(tmp_path):
    spawn = SPAWN.format(option="type=int, default=1")
    files = {
        "xla_spawn.py": spawn,
        "README.md": "```bash\npython xla_spawn.py --num_cores 8\n```\n",
    }
    [d] = diagnostics(tmp_path / "a", files, ["XLA019"])
    assert "README.md:2 passes" in d.message  # the doc's line is named
    files["run.sh"] = "python xla_spawn.py --num_cores 1\n"  # the tree's script outranks the doc
    assert found(tmp_path / "b", files, ["XLA019"]) == set()


# ---- c30: a multi-process launch of an SPMD program --------------------------------------------


def test_accelerate_tpu_launch_of_an_spmd_program(tmp_path):
    files = {
        "launch.sh": "#!/bin/bash\nexport PJRT_DEVICE=TPU\n"
        "XLA_USE_SPMD=1 accelerate launch --tpu --num_processes=4 --main_training_function main train.py\n",
        "train.py": SPMD_TRAIN,
    }
    assert found(tmp_path, files, ["XLA002", "XLA007", "XLA019"]) == {("launch.sh", 3, "XLA007")}
    [d] = diagnostics(tmp_path, {}, ["XLA007"])
    assert "the program train.py" in d.message and "one process per device" in d.message


def test_multi_process_launch_of_a_program_that_is_not_spmd_is_fine(tmp_path):
    files = {
        "launch.sh": "accelerate launch --tpu train.py\ntorchrun --nproc-per-node=4 train.py\n"
        "XLA_USE_SPMD=1 torchrun --nproc-per-node=1 spmd.py\n",
        "train.py": TRAIN,
        "spmd.py": SPMD_TRAIN,
    }
    assert found(tmp_path, files, ["XLA007"]) == set()


def test_torchrun_of_an_spmd_program_that_enables_it_itself(tmp_path):
    own = SPMD_TRAIN.replace("def main():\n", "def main():\n    xr.use_spmd()\n")
    files = {"run.sh": "torchrun --nproc_per_node 8 train.py\n", "train.py": own}
    assert found(tmp_path, files, ["XLA007"]) == {("run.sh", 1, "XLA007")}


def test_a_doc_block_never_sets_a_mode_against_the_code(tmp_path):
    spawn = (
        "import torch_xla\nimport torch_xla.distributed.spmd as xs\n\n\ndef _mp_fn(i):\n"
        "    xs.mark_sharding(t, mesh, ('data',))\n\n\nif __name__ == '__main__':\n"
        "    torch_xla.launch(_mp_fn)\n"
    )
    files = {"train.py": spawn, "README.md": "```bash\nXLA_USE_SPMD=1 python train.py\n```\n"}
    # The doc's SPMD would make the program's own launch XLA007: the code's mode wins.
    assert found(tmp_path, files, ["XLA007"]) == set()


# ---- suppressions and files ---------------------------------------------------------------------


def test_noqa_in_shell_comments(tmp_path):
    files = {
        "run.sh": "export XLA_USE_BF16=1  # noqa: XLA304\n"
        "python -m torch_xla.distributed.xla_dist \\\n  -- python train.py  # noqa: XLA013\n"
        "python -m torch_xla.distributed.xla_dist -- python t.py  # noqa: XLA304\n"
        "echo '# noqa: XLA013'; python -m torch_xla.distributed.xla_dist\n",
        "train.py": TRAIN,
    }
    assert found(tmp_path, files, ["XLA013", "XLA304"]) == {
        ("run.sh", 4, "XLA013"),  # the code named is another one
        ("run.sh", 5, "XLA013"),  # inside quotes: not a comment
    }


def test_a_script_known_by_its_shebang_is_linted(tmp_path):
    files = {"scripts/pod": "#!/usr/bin/env bash\npython -m torch_xla.distributed.xla_dist\n"}
    assert found(tmp_path, files, ["XLA013"]) == {(os.path.join("scripts", "pod"), 2, "XLA013")}


def test_shell_tables_and_severities_are_the_rules():
    assert shell.REMOVED_ENV == deprecated.REMOVED_ENV
    assert shell.XRT_REMOVED_IN == deprecated.XRT_REMOVED_IN
    assert set(shell.DEPRECATED_ENV) == set(deprecated.DEPRECATED_ENV)
    for code, severity in shell.SEVERITY.items():
        rule = rule_by_code(code)
        assert rule is not None and rule.severity == severity


def test_a_variable_set_only_for_a_tool_is_not_set_for_the_program(tmp_path):
    files = {
        "go.sh": "export XLA_USE_BF16=1\npython -m pip install -r requirements.txt\n"
        'CMD="torchrun train.py"\n$CMD\n',  # the launch hides in a variable: not expanded
        "train.py": TRAIN,
    }
    assert found(tmp_path, files, ["XLA304"]) == set()
    files["go.sh"] += "python -m pkg.train\n"
    assert found(tmp_path, files, ["XLA304"]) == {("go.sh", 1, "XLA304")}
