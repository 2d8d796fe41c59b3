"""XLA029 spawn-unpicklable against torch_xla itself, on CPU.

Each program hands a function and ``args`` to ``xmp.spawn``/``torch_xla.launch`` the way a
real script does; it runs in a fresh process with ``PJRT_DEVICE=CPU`` (one worker process,
started through a ProcessPoolExecutor as on a TPU host), and the same program is linted. The
linter must flag exactly the programs that fail to start, and its message must name the
error they raise. About 40 s (eight processes, two at a time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("torch_xla")

from helpers import lint_tree, write_tree

pytestmark = pytest.mark.runtime

HEAD = """\
import torch.multiprocessing as mp
import torch_xla
import torch_xla.distributed.xla_multiprocessing as xmp

def _mp_fn(index, box=None):
    if box is not None:
        box.put(index)
    print("ran", index, flush=True)

def main():
"""

# name -> (body of main(), the error the start raises, or None when it runs)
PROGRAMS = {
    "queue": ("    q = mp.Queue()\n    xmp.spawn(_mp_fn, args=(q,))\n", "RuntimeError"),
    "queues": (
        "    queues = []\n    for _ in range(2):\n        q = mp.Queue()\n        queues.append(q)\n"
        "    xmp.spawn(_mp_fn, args=(queues,))\n",
        "RuntimeError",
    ),
    "nested": (
        "    def train(index):\n        print('ran', index, flush=True)\n    torch_xla.launch(train)\n",
        "AttributeError",
    ),
    "lambda": (
        "    torch_xla.launch(lambda index: print('ran', index, flush=True))\n",
        "AttributeError",
    ),
    "dict_queue": ("    xmp.spawn(_mp_fn, args=({'box': mp.Queue()},))\n", "RuntimeError"),
    "manager": (
        "    q = mp.Manager().Queue()\n    xmp.spawn(_mp_fn, args=(q,))\n    print('got', q.get(timeout=30))\n",
        None,
    ),
    "single": (
        "    def train(index):\n        print('ran', index, flush=True)\n"
        "    torch_xla.launch(train, debug_single_process=True)\n",
        None,
    ),
    "module_level": ("    torch_xla.launch(_mp_fn)\n", None),
}


def _source(name: str) -> str:
    return HEAD + PROGRAMS[name][0] + "\nif __name__ == '__main__':\n    main()\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    base = tmp_path_factory.mktemp("spawn_pickling")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "PJRT_", "CPU_NUM"))}
    env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")

    def run(name: str) -> subprocess.CompletedProcess:
        path = base / f"prog_{name}.py"  # not queue.py: it would shadow the standard module
        path.write_text(_source(name))
        return subprocess.run(
            [sys.executable, str(path)],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
            stdin=subprocess.DEVNULL,
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(PROGRAMS, pool.map(run, PROGRAMS), strict=True))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_xla029_reports_exactly_the_programs_that_cannot_start(runs, tmp_path, name):
    error = PROGRAMS[name][1]
    proc = runs[name]
    if error is None:
        assert proc.returncode == 0 and "ran 0" in proc.stdout, proc.stderr[-2000:]
    else:
        assert proc.returncode != 0 and "ran 0" not in proc.stdout
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f"{error}: "), last
    write_tree(tmp_path, {"train.py": _source(name)})
    found, _, _ = lint_tree(tmp_path, select=["XLA029"])
    messages = [d.message for d in found.diagnostics]
    if error is None:
        assert messages == []
    else:
        said = "`RuntimeError: ... objects" if error == "RuntimeError" else "a pickling error"
        assert len(messages) == 1 and said in messages[0], messages
