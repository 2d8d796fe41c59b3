"""Parallel linting gives the results of serial linting, in the same order; the fast
traversal visits what LibCST's own visit does, in the same order."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import libcst as cst
import pytest
from helpers import LOST, write_tree

from xla_lint.analysis.walk import TRIVIA, silent_types, walk
from xla_lint.config import build_settings
from xla_lint.pipeline import run as engine
from xla_lint.pipeline.discover import discover
from xla_lint.rules import all_rules

TRAIN = (
    "import torch_xla\nimport torch_xla.core.xla_model as xm\nimport torch_xla.distributed.spmd as xs\n"
    "import torch_xla.runtime as xr\n\n\ndef step_{i}(model, mesh, loader, opt):\n"
    "    for x, y in loader:\n        loss = model(x).sum()\n        loss.backward()\n"
    "        xm.optimizer_step(opt)\n        print('loss', loss.item())\n"
    "    xs.mark_sharding(model.weight, mesh, (0, None))\n    xm.save(model.state_dict(), 'm{i}.pt')\n"
)


def make_tree(root: Path, n: int = 40) -> None:
    files = {f"t{i:02d}.py": TRAIN.format(i=i) + "# padding\n" * 40 for i in range(n)}
    files.update({f"plain{i}.py": f"import os\nx = {i}\n" for i in range(n)})
    # The SPMD program reaches every module and names its step: their prints' output may be lost
    # (XLA004's preview behaviour, SPMD; a function the tree never names would run in no program).
    reach = "".join(f"import t{i:02d}\nsteps.append(t{i:02d}.step_{i})\n" for i in range(n))
    files["main.py"] = "import torch_xla.runtime as xr\nsteps = []\n" + reach + "xr.use_spmd()\n"
    write_tree(root, files)


def test_pool_results_equal_serial_results_in_order(tmp_path, monkeypatch):
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    settings = build_settings(cwd=tmp_path, isolated=True)
    targets = discover(["."], settings)
    serial = engine.lint_targets(targets, settings, jobs=1)
    monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 0)
    parallel = engine.lint_targets(targets, settings, jobs=2)
    assert [r.path for r in parallel] == [t.path for t in targets]
    assert parallel == serial
    assert sum(1 for r in serial if r.diagnostics) == 40


def test_a_worker_crash_costs_one_file_not_the_run(tmp_path, monkeypatch):
    """A file that kills its worker process (as a crash in native code would) is reported
    as XLA000; every other file, including those queued behind it, is linted."""
    make_tree(tmp_path, n=12)
    (tmp_path / "t05.py").write_text(TRAIN.format(i=5) + "# CRASH\n")
    monkeypatch.chdir(tmp_path)
    settings = build_settings(cwd=tmp_path, isolated=True)
    targets = discover(["."], settings)
    parent = os.getpid()
    real = engine.lint_bytes

    def crashing(target, settings, data, *args):
        if b"# CRASH" in data and os.getpid() != parent:
            os._exit(1)
        return real(target, settings, data, *args)

    monkeypatch.setattr(engine, "lint_bytes", crashing)
    monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 0)
    results = {r.path: r for r in engine.lint_targets(targets, settings, jobs=2)}
    crashed = next(r for p, r in results.items() if os.path.basename(p) == "t05.py")
    assert [d.code for d in crashed.diagnostics] == ["XLA000"]
    assert "crashed" in crashed.diagnostics[0].message
    others = [
        r for p, r in results.items() if os.path.basename(p).startswith("t") and r is not crashed
    ]
    assert len(others) == 11 and all(any(d.code == "XLA004" for d in r.diagnostics) for r in others)


def _running(pid: str) -> bool:
    """The process exists and is not a zombie (an orphan's zombie may never be reaped in a container)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_workers_exit_when_the_parent_is_killed(tmp_path):
    """kill -9 of xla-lint takes its worker processes with it (they used to wait forever)."""
    make_tree(tmp_path, n=400)
    proc = subprocess.Popen(
        [sys.executable, "-m", "xla_lint", "--isolated", "--no-cache", "--jobs", "2", "."],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    want = 2
    if engine.default_jobs() < want:
        pytest.skip("--jobs is capped at the cores: one core runs no worker processes")
    workers: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while len(workers) < want and proc.poll() is None and time.monotonic() < deadline:
            if not children.exists():
                pytest.skip("this kernel does not list a process's children")
            workers = children.read_text().split()
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    assert len(workers) == want, "the run ended before every worker was seen"
    deadline = time.monotonic() + 10
    while any(_running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _running(w)]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_ctrl_c_exits_130_and_takes_the_workers_with_it(tmp_path):
    """SIGINT to the whole process group, as Ctrl-C in a terminal sends it: one line, exit 130
    (click printed "Aborted!" and exited 1, the code for findings), no worker left."""
    import signal

    if engine.default_jobs() < 2:
        pytest.skip("--jobs is capped at the cores: one core runs no worker processes")
    make_tree(tmp_path, n=400)
    proc = subprocess.Popen(
        [sys.executable, "-m", "xla_lint", "--isolated", "--no-cache", "--jobs", "2", "."],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    workers: list[str] = []
    deadline = time.monotonic() + 60
    while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
        workers = children.read_text().split() if children.exists() else []
        time.sleep(0.02)
    assert len(workers) == 2, "the run ended before its workers were seen"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (130, b"xla-lint: interrupted\n")
    deadline = time.monotonic() + 10
    while any(_running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _running(w)]


def test_cli_jobs_give_identical_output(tmp_path):
    make_tree(tmp_path)
    outs = []
    for jobs in ("1", "2", "3"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "xla_lint",
                "--preview",
                "--isolated",
                "--no-cache",
                "-j",
                jobs,
                ".",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1] == outs[2]
    assert outs[0].count("XLA004") >= 40


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node)))
        return not isinstance(node, cst.Lambda)  # a skipped subtree is skipped the same way

    def on_leave(self, node: cst.CSTNode) -> None:
        self.events.append(("leave", id(node)))


def _sources() -> list[str]:
    root = Path(engine.__file__).parents[1]  # the package: xla_lint/pipeline/run.py -> xla_lint
    texts = [p.read_text() for p in sorted(root.rglob("*.py"))]
    for rule in all_rules():
        texts += [ex.code for ex in (*rule.valid, *rule.invalid)]
    return texts


def test_walk_visits_like_libcst():
    checked = 0
    for text in _sources():
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:
            continue
        want, got = _Recorder(), _Recorder()
        module.visit(want)
        walk(module, got)
        assert got.events == want.events
        checked += 1
    assert checked > 50


def test_walk_skips_only_trivia():
    module = cst.parse_module("import torch_xla  # c\nx = f(a, b=[1, 2]) + (-y)\n")
    full, lean = _Recorder(), _Recorder()
    module.visit(full)
    walk(module, lean, TRIVIA)
    kept = {i for _, i in lean.events}
    nodes = {}

    class Collect(cst.CSTVisitor):
        def on_visit(self, node):
            nodes[id(node)] = node
            return True

    module.visit(Collect())
    dropped = [nodes[i] for _, i in full.events if i not in kept]
    assert dropped and all(type(n) in TRIVIA for n in dropped)
    assert [e for e in full.events if e[1] in kept] == lean.events


class _Listener:
    """Records visits and leaves of the ``listened`` types, each with the listened ancestors seen."""

    def __init__(self, listened: frozenset[type]) -> None:
        self.listened = listened
        self.stack: list[cst.CSTNode] = []
        self.events: list[tuple[str, int, tuple[int, ...]]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if type(node) in self.listened:
            self.events.append(
                ("visit", id(node), tuple(id(n) for n in self.stack if type(n) in self.listened))
            )
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        if type(node) in self.listened:
            self.events.append(("leave", id(node), ()))
        self.stack.pop()


LISTENED_SETS = [
    frozenset({cst.Call}),
    frozenset({cst.Name}),
    frozenset({cst.Attribute, cst.Assign, cst.For, cst.While, cst.FormattedStringExpression}),
    frozenset({cst.Import, cst.ImportFrom, cst.Module}),
    frozenset({cst.Comma}),
]


def test_silent_types_skip_nothing_a_visitor_listens_to():
    """Walking with silent_types(listened) sees every listened node, in order, with the same ancestors."""
    sources = _sources()
    for listened in LISTENED_SETS:
        skip = silent_types(listened)
        assert TRIVIA - listened <= skip and not skip & listened
        for text in sources[::3]:
            try:
                module = cst.parse_module(text)
            except cst.ParserSyntaxError:
                continue
            full, lean = _Listener(listened), _Listener(listened)
            walk(module, full)
            walk(module, lean, skip)
            assert lean.events == full.events


def test_silent_types_hold_where_annotations_are_narrower_than_the_parser():
    """LibCST annotates AsName.name as Name | Tuple | List, yet `with f() as self.h:` holds an
    Attribute there (and `as a[0]` a Subscript): nothing listened to may be skipped."""
    module = cst.parse_module(
        "with open(f) as self.handle, g() as a[0]:\n    pass\n"
        "import x.y as z\nexcept_ = [e for e in self.items]\n"
    )
    for listened in (frozenset({cst.Attribute}), frozenset({cst.Subscript}), frozenset({cst.Name})):
        full, lean = _Listener(listened), _Listener(listened)
        walk(module, full)
        walk(module, lean, silent_types(listened))
        assert lean.events == full.events and full.events


def test_silent_types_leave_out_leaves_nobody_listens_to():
    skip = silent_types(frozenset({cst.Call}))
    assert {cst.Name, cst.Integer, cst.SimpleString, cst.Float} <= skip
    assert cst.Attribute not in skip and cst.Arg not in skip  # an argument may hold a call
    assert cst.Name not in silent_types(frozenset({cst.Name}))


def test_child_fields_from_code_constants_match_the_source():
    """The cheap reading of LibCST's visit order (code constants) agrees with its source, for every node type."""
    from xla_lint.analysis import walk as walk_module

    checked = 0
    for node_type in walk_module._NODE_TYPES:
        method = getattr(node_type, "_visit_and_replace_children", None)
        if method is None or getattr(method, "__isabstractmethod__", False):
            continue
        assert walk_module.child_fields(node_type) == walk_module._child_fields_from_source(
            node_type
        ), node_type
        checked += 1
    assert checked > 150


def test_walk_has_no_recursion_limit():
    module = cst.parse_module("x = " + "-" * 500 + "1\n")
    count = 0

    class Count:
        def on_visit(self, node):
            nonlocal count
            count += 1
            return True

        def on_leave(self, node):
            pass

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        walk(module, Count())
    finally:
        sys.setrecursionlimit(old)
    assert count > 1000


def test_a_parser_panic_costs_one_file_not_the_run(tmp_path, monkeypatch):
    """pyo3 turns a Rust panic in LibCST's parser into PanicException, a BaseException:
    it must be reported on its file like any other internal error."""
    import libcst

    class PanicException(BaseException):  # what pyo3 raises
        pass

    make_tree(tmp_path, n=4)
    monkeypatch.chdir(tmp_path)
    settings = build_settings(cwd=tmp_path, isolated=True)
    targets = discover(["."], settings)
    real = libcst.parse_module

    def panicking(source, *args, **kwargs):
        if "m2.pt" in source:
            raise PanicException("called `Option::unwrap()` on a `None` value")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", panicking)
    results = {os.path.basename(r.path): r for r in engine.lint_targets(targets, settings, jobs=1)}
    assert [d.code for d in results["t02.py"].diagnostics] == ["XLA000"]
    assert "PanicException" in results["t02.py"].diagnostics[0].message
    assert all(any(d.code == "XLA004" for d in results[f"t0{i}.py"].diagnostics) for i in (0, 1, 3))


def test_jobs_is_capped_at_the_cores(tmp_path, monkeypatch):
    """-j 1000 on two cores started 1000 worker processes and ran 50x slower."""
    from click.testing import CliRunner

    from xla_lint import cli
    from xla_lint.pipeline import workspace

    seen = []
    real = workspace.run

    def recording(targets, settings, jobs, **kw):
        seen.append(jobs)
        return real(targets, settings, jobs, **kw)

    monkeypatch.setattr(workspace, "run", recording)
    (tmp_path / "a.py").write_text("import torch_xla\nprint(1)\n" + LOST)  # a finding: exit 1
    monkeypatch.chdir(tmp_path)
    for option in (["--jobs", "1000"], [], ["--jobs", "1"]):
        result = CliRunner().invoke(
            cli.main, ["check", "--preview", "--isolated", "--no-cache", *option, "a.py"]
        )
        assert result.exit_code == 1, result.output
    assert seen == [engine.default_jobs(), engine.default_jobs(), 1]


@pytest.mark.parametrize("delay", [0.5, 1.5, 2.5])
def test_ctrl_c_during_the_parse_of_a_large_file_exits_130(tmp_path, delay):
    """Interrupting the parse of a 400 KB file aborted the process (SIGABRT, exit 134) in 2 of
    3 tries: the interpreter was finalised under the parse thread, still in native code."""
    import signal

    body = "".join(
        f"def f{i}(x):\n    y = x * {i} + xm.xla_device()\n    print(y)\n    return [a for a in range(9)]\n"
        for i in range(3600)
    )
    (tmp_path / "gen.py").write_text(
        "import torch_xla\nimport torch_xla.core.xla_model as xm\n" + body
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "xla_lint", "--isolated", "--no-cache", "gen.py"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 1:
        pytest.skip("the run ended before the interrupt")
    assert (proc.returncode, err) == (130, b"xla-lint: interrupted\n")


BOMB = """
import sys
import xla_lint.cli as cli

real = cli.lint_paths


class Bomb:
    def __del__(self):
        raise KeyboardInterrupt  # where Ctrl-C lands in a finaliser: Python can only print it


def patched(*args, **kwargs):
    Bomb()
    return real(*args, **kwargs)


cli.lint_paths = patched
cli.main(["--isolated", "--no-cache", "a.py"], prog_name="xla-lint")
"""


def test_a_ctrl_c_python_cannot_raise_still_ends_the_run_as_interrupted(tmp_path):
    """Ctrl-C during the pool's result collection landed in a finaliser: Python printed
    "Exception ignored in ... KeyboardInterrupt", the run went on and exited 1 (1 time in 3
    on a loaded machine)."""
    (tmp_path / "a.py").write_text("import torch_xla\nprint('a')\n")
    proc = subprocess.run(
        [sys.executable, "-c", BOMB], cwd=tmp_path, capture_output=True, timeout=120
    )
    assert (proc.returncode, proc.stderr) == (130, b"xla-lint: interrupted\n"), proc.stderr


def test_ctrl_c_while_the_command_is_still_importing_is_one_line(tmp_path):
    """SIGINT in the first moments of a run (importing xla_lint.cli) printed the import's
    traceback and died of the signal (-2)."""
    code = (
        "import os, signal, sys\n"
        "sys.modules.pop('xla_lint.cli', None)\n"
        "import builtins\n"
        "real = builtins.__import__\n"
        "def slow(name, *a, **k):\n"
        "    if name == 'click':\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = slow\n"
        "from xla_lint.__main__ import main\n"
        "main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--isolated", "."],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (130, b"xla-lint: interrupted\n"), proc.stderr
