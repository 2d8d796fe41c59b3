"""The result cache: warm runs equal cold runs, stale or damaged entries are never trusted,
and two processes sharing one cache folder give the results of one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import write_tree

from xla_lint.config import build_settings
from xla_lint.pipeline.cache import ResultCache
from xla_lint.pipeline.run import lint_file
from xla_lint.results import result_from_json, result_to_json
from xla_lint.sources.target import Target

SPMD_ENTRY = "import torch_xla.runtime as xr\nimport pkg.model\nxr.use_spmd()\n"
MODEL = (
    "import torch_xla\nimport torch_xla.core.xla_model as xm\nimport torch_xla.distributed.spmd as xs\n"
    "def shard(t, mesh):\n    xs.mark_sharding(t, mesh, (0, 1))\n    print('sharded')  # noqa: XLA004\n"
    "    xm.save(t, 'x.pt')\n"
)


def xla(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint", "--isolated", "--output-format", "json", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def tree(root: Path, n: int = 30) -> None:
    files = {"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": SPMD_ENTRY}
    for i in range(n):
        files[f"pkg/m{i}.py"] = MODEL.replace("x.pt", f"x{i}.pt") + f"print({i})\n"
        files[f"plain{i}.py"] = f"import os\nprint({i})\n"
    write_tree(root, files)


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("v*/*/*.json"))


def test_warm_run_equals_cold_run_and_uses_the_cache(tmp_path):
    tree(tmp_path)
    cache = tmp_path / "cache"
    baseline = xla(tmp_path, "--no-cache", ".").stdout
    assert not cache.exists()
    cold = xla(tmp_path, "--cache-dir", str(cache), ".").stdout
    assert cold == baseline and json.loads(cold)
    stored = entries(cache)
    assert (
        len(stored) == 32
    )  # every file naming torch_xla; files the prefilter skips are not stored
    assert (cache / ".gitignore").read_text().endswith("*\n") and (cache / "CACHEDIR.TAG").exists()
    mtimes = [p.stat().st_mtime_ns for p in stored]
    assert xla(tmp_path, "--cache-dir", str(cache), ".").stdout == baseline
    assert [p.stat().st_mtime_ns for p in entries(cache)] == mtimes  # answered, not rewritten


def test_relative_and_absolute_runs_keep_their_own_entries(tmp_path):
    """The CLI names files relative to the current folder and the editor server absolutely:
    with one entry per file they evicted each other, and every run missed."""
    tree(tmp_path, n=2)
    cache = tmp_path / "cache"
    relative = xla(tmp_path, "--cache-dir", str(cache), ".").stdout
    absolute = xla(tmp_path, "--cache-dir", str(cache), str(tmp_path)).stdout
    stored = entries(cache)
    assert len(stored) == 2 * 4  # train.py, pkg/model.py, pkg/m0.py, pkg/m1.py, twice
    mtimes = [p.stat().st_mtime_ns for p in stored]
    assert xla(tmp_path, "--cache-dir", str(cache), ".").stdout == relative
    assert xla(tmp_path, "--cache-dir", str(cache), str(tmp_path)).stdout == absolute
    assert [p.stat().st_mtime_ns for p in entries(cache)] == mtimes  # all answered


def test_program_facts_are_applied_after_the_cache(tmp_path):
    # model.py's cached result does not change when train.py stops enabling SPMD;
    # the finding that needs SPMD off must still appear.
    tree(tmp_path, n=0)
    cache = str(tmp_path / "cache")
    codes = lambda out: sorted((d["path"], d["code"]) for d in json.loads(out))  # noqa: E731
    first = codes(xla(tmp_path, "--cache-dir", cache, ".").stdout)
    assert ("pkg/model.py", "XLA002") not in first
    (tmp_path / "train.py").write_text(
        'import pkg.model\n\nif __name__ == "__main__":\n    pkg.model.main()\n'
    )
    second = codes(xla(tmp_path, "--cache-dir", cache, ".").stdout)
    assert ("pkg/model.py", "XLA002") in second
    assert second == codes(xla(tmp_path, "--no-cache", ".").stdout)


def test_changed_content_or_settings_are_not_answered_from_the_cache(tmp_path):
    tree(tmp_path, n=0)
    cache = str(tmp_path / "cache")
    xla(tmp_path, "--cache-dir", cache, ".")
    (tmp_path / "pkg" / "model.py").write_text(MODEL.replace("xm.save(t, 'x.pt')", "pass"))
    assert (
        xla(tmp_path, "--cache-dir", cache, ".").stdout == xla(tmp_path, "--no-cache", ".").stdout
    )
    only4 = xla(
        tmp_path, "--cache-dir", cache, "--select", "XLA004", "--ignore", "XLA900", "."
    ).stdout
    assert (
        only4 == xla(tmp_path, "--no-cache", "--select", "XLA004", "--ignore", "XLA900", ".").stdout
    )
    assert {d["code"] for d in json.loads(only4)} <= {"XLA004"}


def test_corrupt_and_foreign_entries_are_ignored_and_rewritten(tmp_path):
    tree(tmp_path, n=3)
    cache = tmp_path / "cache"
    baseline = xla(tmp_path, "--no-cache", ".").stdout
    xla(tmp_path, "--cache-dir", str(cache), ".")
    stored = entries(cache)
    damage = [
        b"",
        b"\x00garbage",
        b'{"tag": "xla-lint result cache"}',
        b"[1, 2, 3]",
        json.dumps(
            {
                "tag": "xla-lint result cache",
                "version": "0.1.0",
                "key": "0" * 64,
                "result": {"path": "pkg/model.py"},
            }
        ).encode(),
    ]
    for path, data in zip(stored, damage, strict=True):
        path.write_bytes(data)
    # An entry copied from another file: right format, wrong key.
    stored[-1].write_bytes(stored[-2].read_bytes())
    (cache / "v1" / "zz").mkdir()
    (cache / "v1" / "zz" / "stray.json").write_text("not json")
    assert xla(tmp_path, "--cache-dir", str(cache), ".").stdout == baseline
    for path in stored:
        entry = json.loads(path.read_bytes())
        assert entry["tag"] == "xla-lint result cache" and len(entry["key"]) == 64


def test_entries_with_values_of_the_wrong_type_are_ignored_and_rewritten(tmp_path):
    """Right tag, version and key, but a facts or noqa value of the wrong type (as a hand
    edit or another tool could leave it): ignored, not an internal error on every run."""
    tree(tmp_path, n=3)
    cache = tmp_path / "cache"
    baseline = xla(tmp_path, "--no-cache", ".").stdout
    xla(tmp_path, "--cache-dir", str(cache), ".")
    poisons = [
        ("facts", "module", 5),
        ("facts", "group", [1]),
        ("facts", "imports", [1]),
        ("suppressions", "disabled_codes", [7]),
        ("suppressions", "disable_all", "yes"),
    ]
    poisoned = 0
    for path in entries(cache):
        entry = json.loads(path.read_bytes())
        result = entry["result"]
        if not result["facts"] or poisoned >= len(poisons):
            continue
        part, field, value = poisons[poisoned]
        target = result["facts"][0] if part == "facts" else result["suppressions"]
        target[field] = value
        path.write_text(json.dumps(entry))
        poisoned += 1
    assert poisoned == len(poisons)
    for _ in range(2):  # ignored, then rewritten
        assert xla(tmp_path, "--cache-dir", str(cache), ".").stdout == baseline


def test_unusable_cache_folder_only_costs_time(tmp_path):
    tree(tmp_path, n=2)
    (tmp_path / "blocker").write_text("a file where the cache folder should be")
    out = xla(tmp_path, "--cache-dir", str(tmp_path / "blocker" / "cache"), ".").stdout
    assert out == xla(tmp_path, "--no-cache", ".").stdout


def test_two_processes_sharing_one_cache_give_the_results_of_one(tmp_path):
    tree(tmp_path, n=40)
    baseline = xla(tmp_path, "--no-cache", ".").stdout
    for round_ in range(3):
        cache = str(tmp_path / f"shared{round_}")
        args = [
            sys.executable,
            "-m",
            "xla_lint",
            "--isolated",
            "--output-format",
            "json",
            "--cache-dir",
            cache,
            "-j",
            "1",
            ".",
        ]
        procs = [
            subprocess.Popen(
                args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=300) for p in procs]
        for out, err in outs:
            assert "Traceback" not in err
            assert out == baseline
        assert (
            xla(tmp_path, "--cache-dir", cache, ".").stdout == baseline
        )  # and the cache they left is sound


def test_file_result_json_round_trip(tmp_path):
    tree(tmp_path, n=0)
    settings = build_settings(cwd=tmp_path, isolated=True)
    result = lint_file(Target(str(tmp_path / "pkg" / "model.py"), "python"), settings)
    assert result.diagnostics and result.facts and result.suppressions.noqa
    again = result_from_json(json.loads(json.dumps(result_to_json(result))))
    assert again == result


def test_cache_key_covers_module_name(tmp_path):
    c = ResultCache(tmp_path, "fp")
    args = ("a.py", "python", b"import torch_xla\n", frozenset({"XLA001"}))
    assert c.key(*args, "pkg.a", False) != c.key(*args, "a", False)
    assert c.key(*args, "pkg", True) != c.key(*args, "pkg", False)
    assert c.key(*args, "a", False) == c.key(*args, "a", False)
    assert c.key(*args, "a", False) != ResultCache(tmp_path, "other settings").key(
        *args, "a", False
    )


LIBCST_PROBE = """\
import sys
from xla_lint.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print("LIBCST-IMPORTED" if "libcst" in sys.modules else "LIBCST-NOT-IMPORTED")
"""


def _probe(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", LIBCST_PROBE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def test_a_run_that_parses_nothing_never_imports_libcst(tmp_path):
    """Warm runs, --version and configuration errors skip LibCST's ~0.3 s import; a cold run needs it."""
    tree(tmp_path, n=3)
    cache = str(tmp_path / "cache")
    cold = _probe(
        tmp_path, "--isolated", "--output-format", "json", "--cache-dir", cache, "-j", "1", "."
    )
    assert cold.rstrip().endswith("LIBCST-IMPORTED")
    warm = _probe(
        tmp_path, "--isolated", "--output-format", "json", "--cache-dir", cache, "-j", "1", "."
    )
    assert warm.rstrip().endswith("LIBCST-NOT-IMPORTED")
    assert warm.replace("LIBCST-NOT-IMPORTED", "") == cold.replace(
        "LIBCST-IMPORTED", ""
    )  # same findings
    assert "XLA003" in warm
    assert _probe(tmp_path, "--version").rstrip().endswith("LIBCST-NOT-IMPORTED")
    assert (
        _probe(tmp_path, "--isolated", "--select", "XLA999", ".")
        .rstrip()
        .endswith("LIBCST-NOT-IMPORTED")
    )
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "util.py").write_text("import os\nprint(os.sep)\n")
    assert (
        _probe(plain, "--isolated", "--no-cache", ".").rstrip().endswith("LIBCST-NOT-IMPORTED")
    )  # prefilter: no parse
