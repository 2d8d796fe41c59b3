"""A warm run over an unchanged tree reads the run index and the cached program model instead of
scanning imports and building the model again, and says exactly what a run without the cache
says: cold, warm, and after edits that change a program fact or a plain module's imports."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

from helpers import write_tree

from xla_lint.pipeline import cache as cache_mod

MODEL = (
    "import torch_xla\nimport torch_xla.core.xla_model as xm\nimport torch_xla.distributed.spmd as xs\n"
    "def shard(t, mesh):\n    xs.mark_sharding(t, mesh, (0, 1))\n    xm.save(t, 'x.pt')\n"
)
DATA = (
    "from torch.utils.data import DataLoader\n"
    "def loader(ds):\n    return DataLoader(ds, batch_size=8)\n"
)
MAIN = (
    "import torch_xla.runtime as xr\nimport torch_xla.core.xla_model as xm\n"
    "import pkg.model\nimport pkg.data\n"
    "for batch in pkg.data.loader(range(10)):\n    pkg.model.shard(batch, None)\n    print(xm.xla_device())\n"
)
TREE = {
    "pkg/__init__.py": "",
    "pkg/model.py": MODEL,
    "pkg/data.py": DATA,
    "pkg/util.py": "import os\n\ndef here():\n    return os.getcwd()\n",
    "main.py": MAIN,
    "tool.py": "import os\nimport pkg.util\nprint(pkg.util.here())\n",
    "run.sh": "#!/bin/bash\npython main.py --steps 3\n",
    "docs/usage.md": "# Usage\n\n```python\nimport torch_xla.core.xla_model as xm\nxm.mark_step()\n```\n",
    # Enough library modules that the model is cached (run.MODEL_CACHE_MIN_FILES).
    **{f"lib/m{i}.py": f"import os\nimport pkg.util\nX = {i}\n" for i in range(70)},
}


def lint(cwd: Path, *args: str, paths: tuple[str, ...] = (".",)) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--isolated", "--exit-zero", "--output-format", "json"]
        + ["--preview", *args, *paths],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def stored(cache: Path) -> dict[str, int]:
    """The run index's and the program model's files -> modification time."""
    return {p.name: p.stat().st_mtime_ns for p in (cache / "v1" / "runs").glob("*")}


def test_cold_warm_and_edited_runs_say_what_a_run_without_the_cache_says(tmp_path):
    write_tree(tmp_path, TREE)
    _settle()  # the cold run records every file's status: the warm run then changes nothing
    cache = tmp_path / ".cache"
    uncached = lint(tmp_path, "--no-cache")
    assert {d["code"] for d in uncached} >= {"XLA202"}  # the plain loader module, reached
    assert lint(tmp_path, "--cache-dir", str(cache)) == uncached  # cold: stores
    written = stored(cache)
    assert len(written) == 2  # one index, one model
    assert lint(tmp_path, "--cache-dir", str(cache)) == uncached  # warm: reads
    assert stored(cache) == written  # nothing changed, nothing rewritten
    one = lint(tmp_path, "--cache-dir", str(cache), paths=("main.py",))
    assert one == lint(tmp_path, "--no-cache", paths=("main.py",))
    # A run of one file (pre-commit's) keeps the tree's model and does not rewrite its index.
    assert stored(cache) == written

    # A program fact changes: SPMD turned on in the entry makes xm.save in the model an error.
    (tmp_path / "main.py").write_text(
        MAIN.replace("import pkg.data\n", "import pkg.data\nxr.use_spmd()\n")
    )
    edited = lint(tmp_path, "--no-cache")
    assert edited != uncached and "XLA003" in {d["code"] for d in edited}
    assert lint(tmp_path, "--cache-dir", str(cache)) == edited
    assert stored(cache) != written  # the model was built again
    assert lint(tmp_path, "--cache-dir", str(cache)) == edited

    # A file that is not parsed changes its imports (the index row is stale): tool.py now runs
    # the sharding model as a program of its own.
    (tmp_path / "tool.py").write_text("import os\nimport pkg.model\npkg.model.shard(None, None)\n")
    edited = lint(tmp_path, "--no-cache")
    assert lint(tmp_path, "--cache-dir", str(cache)) == edited
    assert lint(tmp_path, "--cache-dir", str(cache)) == edited

    # A launcher changes: its arguments are part of the model's key.
    (tmp_path / "run.sh").write_text("#!/bin/bash\nXLA_USE_SPMD=1 python tool.py\n")
    edited = lint(tmp_path, "--no-cache")
    assert lint(tmp_path, "--cache-dir", str(cache)) == edited

    # What the model computes on demand is stored with it (the words the tree names): a
    # function nothing names has no finding, until a comment in a file that is not parsed names
    # it; that file's content is part of the model's key.
    (tmp_path / "pkg/logs.py").write_text(
        "import torch_xla\ndef debug_dump():\n    print('state')\n"
    )
    (tmp_path / "main.py").write_text(
        MAIN.replace("import pkg.data\n", "import pkg.data\nimport pkg.logs\nxr.use_spmd()\n")
    )
    edited = lint(tmp_path, "--no-cache")
    assert not any(d["path"] == "pkg/logs.py" for d in edited)
    assert lint(tmp_path, "--cache-dir", str(cache)) == edited
    assert lint(tmp_path, "--cache-dir", str(cache)) == edited
    (tmp_path / "lib/m0.py").write_text("import os\nimport pkg.util\nX = 0  # see debug_dump\n")
    edited = lint(tmp_path, "--no-cache")
    assert any(d["path"] == "pkg/logs.py" and d["code"] == "XLA004" for d in edited)
    assert lint(tmp_path, "--cache-dir", str(cache)) == edited


def test_a_damaged_or_hostile_model_is_ignored(tmp_path):
    write_tree(tmp_path, TREE)
    cache = tmp_path / ".cache"
    uncached = lint(tmp_path, "--no-cache")
    lint(tmp_path, "--cache-dir", str(cache))
    [model] = (cache / "v1" / "runs").glob("*.model")
    head = model.read_bytes().split(b"\n", 3)
    marker = tmp_path / "ran"

    class Hostile:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    model.write_bytes(b"\n".join(head[:3]) + b"\n" + pickle.dumps(Hostile()))
    assert lint(tmp_path, "--cache-dir", str(cache)) == uncached
    assert not marker.exists()
    model.write_bytes(b"\n".join(head[:3]) + b"\n" + b"not a pickle")
    assert lint(tmp_path, "--cache-dir", str(cache)) == uncached
    [index] = (cache / "v1" / "runs").glob("*.index")
    index.write_text('{"tag": "xla-lint run index", "files": [1, 2]}')
    assert lint(tmp_path, "--cache-dir", str(cache)) == uncached


def test_the_model_unpickler_makes_only_the_package_data_classes():
    import pytest

    with pytest.raises(pickle.UnpicklingError):
        cache_mod._ModelUnpickler.load(pickle.dumps(os.getcwd), {})
    with pytest.raises(pickle.UnpicklingError):  # a function of the package is not a class
        cache_mod._ModelUnpickler.load(pickle.dumps(cache_mod.model_key), {})
    assert cache_mod._ModelUnpickler.load(pickle.dumps({"a": frozenset({1})}), {}) == {
        "a": frozenset({1})
    }


def test_index_rows_keep_only_what_an_import_scan_gives(tmp_path):
    from xla_lint.program.facts import FileFacts
    from xla_lint.results import FileResult

    store = cache_mod.ResultCache(tmp_path, "fp")
    index = cache_mod.RunIndex(store)
    plain = FileResult("a.py", skipped_reason="no torch_xla")
    plain.facts.append(FileFacts(module="a", imports=frozenset({"os"}), entry=True))
    odd = FileResult("b.py", skipped_reason="no torch_xla")
    odd.facts.append(FileFacts(module="b", imports=frozenset({"os"}), enables_spmd=True))
    index.store("a.py", "k1", plain)
    index.store("b.py", "k2", odd)  # a fact the row cannot hold: not indexed
    index.save()
    again = cache_mod.RunIndex(store)
    got = again.load("a.py", "k1")
    assert got is not None and got.facts == plain.facts and got.skipped_reason == "no torch_xla"
    assert again.load("a.py", "other key") is None
    assert again.load("b.py", "k2") is None


def _settle() -> None:
    """Wait until the files just written are older than the run index's racy window (a status
    is recorded only then; their change times cannot be set back)."""
    import time

    time.sleep(cache_mod.RACY_NS / 1e9 + 0.1)


def test_a_warm_run_reads_no_file_whose_status_is_recorded(tmp_path, monkeypatch):
    from xla_lint.config import build_settings
    from xla_lint.pipeline import run as run_mod
    from xla_lint.pipeline.discover import discover

    write_tree(tmp_path, TREE)
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)  # the files written above are old enough
    monkeypatch.chdir(tmp_path)
    settings = build_settings(cwd=tmp_path, isolated=True, preview=True)
    targets = discover(["."], settings, [])
    cache = str(tmp_path / ".cache")
    cold_keys: dict[str, str] = {}
    cold = run_mod.lint_targets(targets, settings, 1, cache, cold_keys)

    def no_read(path, limit=None):
        raise AssertionError(f"read {path}")

    monkeypatch.setattr(run_mod, "read_source_stat", no_read)
    warm_keys: dict[str, str] = {}
    warm = run_mod.lint_targets(targets, settings, 1, cache, warm_keys)
    assert warm == cold and warm_keys == cold_keys


def test_an_edit_that_keeps_the_size_and_the_modification_time_is_seen(tmp_path):
    write_tree(tmp_path, TREE)
    _settle()
    cache = tmp_path / ".cache"
    assert lint(tmp_path, "--cache-dir", str(cache)) == lint(tmp_path, "--no-cache")
    [index] = (cache / "v1" / "runs").glob("*.index")
    assert "main.py" in json.loads(index.read_text())["stats"]  # its status is recorded
    # The same number of bytes, and the modification time put back as it was (rsync -t, tar):
    # the change time still differs, so the file is read again.
    main = tmp_path / "main.py"
    before = main.stat()
    edited_text = MAIN.replace("import pkg.data\n", "import pkg.data\nxr.use_spmd()\n")
    edited_text = edited_text.replace("    print(xm.xla_device())\n", "")
    edited_text += "#" * (len(MAIN) - len(edited_text) - 1) + "\n"
    assert len(edited_text) == len(MAIN)
    main.write_text(edited_text)
    os.utime(main, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert main.stat().st_size == before.st_size and main.stat().st_mtime_ns == before.st_mtime_ns
    edited = lint(tmp_path, "--no-cache")
    assert "XLA003" in {d["code"] for d in edited}
    assert lint(tmp_path, "--cache-dir", str(cache)) == edited


def test_a_status_is_recorded_only_once_the_file_is_older_than_the_racy_window(tmp_path):
    store = cache_mod.ResultCache(tmp_path, "fp")
    index = cache_mod.RunIndex(store)
    path = tmp_path / "a.py"
    path.write_text("import os\n")
    info = path.stat()
    # Written just now: a write in the same clock tick could keep the times, so not recorded.
    index.note(str(path), info, "hash", False, info.st_mtime_ns)
    assert index.known(str(path), info) is None
    started = max(info.st_mtime_ns, info.st_ctime_ns) + cache_mod.RACY_NS + 1
    index.note(str(path), info, "hash", False, started)
    assert index.known(str(path), info) == ("hash", False, info.st_size)
    index.save()
    again = cache_mod.RunIndex(store)
    assert again.known(str(path), info) == ("hash", False, info.st_size)
    path.write_text("import re\n")  # the same size, a new status
    assert again.known(str(path), path.stat()) is None


def test_parsed_rows_of_the_index_that_are_damaged_are_ignored(tmp_path):
    write_tree(tmp_path, TREE)
    _settle()
    cache = tmp_path / ".cache"
    uncached = lint(tmp_path, "--no-cache")
    lint(tmp_path, "--cache-dir", str(cache))
    [index] = (cache / "v1" / "runs").glob("*.index")
    data = json.loads(index.read_text())
    assert data["parsed"] and data["stats"]
    for n, (path, row) in enumerate(sorted(data["parsed"].items())):
        if n % 3 == 0:
            row[1]["facts"] = [{"module": 5}]
        elif n % 3 == 1:
            row[1]["path"] = "elsewhere.py"
        else:
            data["parsed"][path] = "not a row"
    for path in list(data["stats"])[::2]:
        data["stats"][path] = [1, 2, 3]
    index.write_text(json.dumps(data))
    for _ in range(2):  # ignored, then rewritten
        assert lint(tmp_path, "--cache-dir", str(cache)) == uncached
