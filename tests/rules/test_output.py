"""XLA004's preview behaviour, and the model facts it rests on: by default a print is reported
only where the tree shows the program's output is no terminal; where that is only inferred
(replicas, SPMD, a library checked alone, a print before ``os._exit``) only with ``--preview``,
naming the reason. A handler of a failed torch_xla import, a function the tree never names, and a
script's sibling package imported under its own name are no XLA004 ground either way."""

from __future__ import annotations

from helpers import lint_tree, write_tree

SPAWN = (
    "import torch_xla\n"
    "def _mp_fn(index):\n"
    "    print('replica', index)\n"
    "if __name__ == '__main__':\n"
    "    torch_xla.launch(_mp_fn)\n"
)


def _found(tmp_path, preview: bool) -> list[tuple[str, int, str]]:
    result, _, _ = lint_tree(tmp_path, select=["XLA004"], preview=preview)
    return sorted((d.path, d.line, d.message) for d in result.diagnostics if d.code == "XLA004")


def test_replicas_from_a_terminal_are_preview_only_and_name_the_reason(tmp_path):
    write_tree(tmp_path, {"train.py": SPAWN})
    assert _found(tmp_path, preview=False) == []
    ((path, line, message),) = _found(tmp_path, preview=True)
    assert (path, line) == ("train.py", 3)
    assert message.endswith("(its output may be lost: it calls `torch_xla.launch` in train.py)")


def test_a_launcher_that_pipes_makes_it_stable_and_is_named_once(tmp_path):
    write_tree(tmp_path, {"train.py": SPAWN, "run.sh": "python train.py 2>&1 | tee log\n"})
    stable = _found(tmp_path, preview=False)
    assert stable == _found(tmp_path, preview=True)
    ((_, line, message),) = stable
    assert line == 3
    assert message.count("its output may be lost") == 1 and "run.sh:1" in message


def test_os_exit_and_a_library_checked_alone_are_preview_only(tmp_path):
    crash, library = tmp_path / "crash", tmp_path / "library"
    write_tree(crash, {"crash.py": "import os\nimport torch_xla\nprint('bye')\nos._exit(1)\n"})
    write_tree(
        library,
        {
            "lib/__init__.py": "",
            "lib/log.py": "import torch_xla\ndef report(step):\n    print('step', step)\n",
        },
    )
    for root, (path, line) in ((crash, ("crash.py", 3)), (library, ("lib/log.py", 3))):
        assert _found(root, preview=False) == []
        assert [(p, n) for p, n, _ in _found(root, preview=True)] == [(path, line)]


def test_the_handler_of_a_failed_torch_xla_import_is_not_xla_code(tmp_path):
    write_tree(
        tmp_path,
        {
            "data.py": "try:\n    import torch_xla.core.xla_model as xm\n"
            "    DEV = xm.xla_device()\nexcept:\n    print('Unable to override')\n"
            "try:\n    import torch_xla.core.xla_model as xm\nexcept RuntimeError:\n"
            "    print('runs on XLA')\n",
            "run.sh": "python data.py | tee log\n",
        },
    )
    assert [(p, n) for p, n, _ in _found(tmp_path, preview=True)] == [("data.py", 9)]


def test_a_function_nothing_names_runs_in_no_program(tmp_path):
    write_tree(
        tmp_path,
        {
            "utils.py": "import torch_xla\n"
            "def print_usage():\n    print('memory')\n"
            "def report(step):\n    print('step', step)\n"
            "def exported():\n    print('x')\n"
            "__all__ = ['exported']\n"
            "class Hooks:\n    def on_step(self):\n        print('hook')\n",
            "train.py": "import utils\nif __name__ == '__main__':\n    utils.report(1)\n",
            "run.sh": "python train.py > log\n",
        },
    )
    assert [(p, n) for p, n, _ in _found(tmp_path, preview=True)] == [
        ("utils.py", 5),
        ("utils.py", 7),
        ("utils.py", 11),
    ]


def test_a_scripts_sibling_package_does_not_reach_the_packages_above_it(tmp_path):
    """`permutation_test.py` puts `sparsity/` on sys.path and imports `kernels`, whose relative
    imports then run as `kernels.utils`: never `apex/__init__.py` nor what it imports
    (neuronx-nemo-megatron's apex/contrib/sparsity/permutation_tests)."""
    write_tree(
        tmp_path,
        {
            "apex/__init__.py": "from apex import transformer\n",
            "apex/transformer.py": "import torch_xla\ndef log():\n    print('x')\nlog()\n",
            "apex/sparsity/__init__.py": "",
            "apex/sparsity/kernels/__init__.py": "from .utils import f\n",
            "apex/sparsity/kernels/utils.py": "import numpy\ndef f():\n    pass\n",
            "apex/sparsity/tests/permutation_test.py": "import sys\nsys.path.append('../')\n"
            "from kernels.utils import f\nif __name__ == '__main__':\n    f()\n",
            "apex/sparsity/tests/run.sh": "python3 permutation_test.py | tee out.log\n",
        },
    )
    assert _found(tmp_path, preview=False) == []
