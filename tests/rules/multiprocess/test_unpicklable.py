"""XLA029 spawn-unpicklable and the process count: `xmp.spawn` pickles only when it starts
processes (torch_xla 2.9.0 `_internal/pjrt.py` `spawn`: nprocs None runs `run_multiprocess`, 1
runs `fn` in place, anything else raises ValueError first)."""

from __future__ import annotations

from helpers import lint_tree, write_tree

SPAWN = (
    "import argparse\nimport torch_xla.distributed.xla_multiprocessing as xmp\n\n\n"
    "def main():\n    def _mp_fn(index):\n        pass\n\n"
    "    parser = argparse.ArgumentParser()\n    parser.add_argument('--nprocs', type=int{default})\n"
    "    args = parser.parse_args()\n    xmp.spawn(_mp_fn, nprocs=args.nprocs)\n\n\n"
    "if __name__ == '__main__':\n    main()\n"
)


def diagnostics(tmp_path, files: dict[str, str]):
    write_tree(tmp_path, files)
    result, _, _ = lint_tree(tmp_path, select=["XLA029"], preview=True)
    return [(d.path, d.line, d.severity.value, d.message) for d in result.diagnostics]


def test_a_count_from_the_environment_is_not_known(tmp_path):
    # pytorch/ignite tests/ignite/conftest.py: its runner sets NUM_TPU_WORKERS=1, so the nested
    # worker runs in the test process and nothing is pickled.
    conftest = (
        "import os\nimport pytest\nimport torch_xla.distributed.xla_multiprocessing as xmp\n\n\n"
        "@pytest.fixture()\ndef distributed_context_single_node_xla():\n"
        "    def xla_worker(index, fn):\n        fn()\n\n"
        "    n = int(os.environ['NUM_TPU_WORKERS'])\n"
        "    yield lambda fn: xmp.spawn(xla_worker, args=(fn,), nprocs=n)\n"
    )
    files = {
        "tests/conftest.py": conftest,
        "tests/test_a.py": "def test_a(distributed_context_single_node_xla):\n    pass\n",
        "tests/run_tpu_tests.sh": "export NUM_TPU_WORKERS=1\npython -m pytest tests/\n",
    }
    assert diagnostics(tmp_path, files) == []


def test_an_option_counts_when_a_launch_passes_another_value(tmp_path):
    spawn = SPAWN.format(default="")
    assert diagnostics(tmp_path / "a", {"train.py": spawn}) == []  # nobody says what is passed
    files = {"train.py": spawn, "run.sh": "python train.py --nprocs 1\n"}
    assert diagnostics(tmp_path / "b", files) == []
    files = {"train.py": spawn, "run.sh": "python train.py --nprocs 8\n"}
    [(path, line, severity, message)] = diagnostics(tmp_path / "c", files)
    assert (path, line, severity) == ("train.py", 12, "error")
    assert "the nested function `_mp_fn` cannot be pickled" in message
    assert "run.sh:1 passes `--nprocs 8`" in message and "ValueError" in message


def test_a_default_that_spawns_or_raises_is_reported(tmp_path):
    [(_, line, _, message)] = diagnostics(
        tmp_path / "a",
        {"train.py": SPAWN.format(default="").replace("type=int", "type=int, default=None")},
    )
    assert line == 12 and "ValueError" not in message  # None: one process per device, pickled
    [(_, line, _, message)] = diagnostics(
        tmp_path / "b", {"train.py": SPAWN.format(default=", default=8")}
    )
    assert line == 12 and "`nprocs=args.nprocs` makes `xmp.spawn` raise ValueError" in message
