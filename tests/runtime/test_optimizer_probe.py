"""``--betas``, ``--fast-forward-step`` and ``--compile-cache`` of ``python -m xla_lint.runtime`` on CPU.

The probe run trains the small decoder with AdamW, betas (0.9, 0.95), for 12 steps; after the
warm-up the optimizer's step counter jumps to a few steps below 325, the step whose bias
correction rounds to 1.0 in float32 (:func:`xla_lint.scalars.recompile_step`), and the
recompilation check must see the one extra compile there and name XLA204. The cache run
writes torch_xla's persistent cache and starts a second process on it: on CPU it cannot load
(``PersistentCacheDeserializeFailure``), reported as SKIP. Two processes, about a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("torch_xla")

pytestmark = pytest.mark.runtime

SMALL = [
    "--device",
    "cpu",
    "--cpu-devices",
    "4",
    "--dim",
    "32",
    "--layers",
    "1",
    "--vocab",
    "128",
    "--seq-len",
    "16",
]


def _run(args: list[str], json_path) -> tuple[int, dict, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("XLA_", "PJRT_", "CPU_NUM", "TPU_"))
    }
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint.runtime", *SMALL, *args, "--json", str(json_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert os.path.exists(json_path), proc.stderr[-3000:]
    return proc.returncode, json.loads(json_path.read_text()), proc.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("probe")
    scenarios = {
        "probe": [
            "--optimizer",
            "adamw",
            "--betas",
            "0.9,0.95",
            "--steps",
            "12",
            "--fast-forward-step",
        ],
        "cache": ["--steps", "3", "--compile-cache", str(base / "cache")],
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(_run, args, base / f"{name}.json") for name, args in scenarios.items()
        }
        return {name: f.result() for name, f in futures.items()}


def _check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["name"] == name)


def test_the_probe_finds_the_step_325_recompile_and_names_xla204(runs):
    code, report, stdout = runs["probe"]
    assert code == 1
    record = report["records"][0]
    assert record["probe"]["predicted_step"] == 325 and record["probe"]["beta2"] == 0.95
    compiled = [
        (s["step"], s["optimizer_step"]) for s in record["steps"] if s["step"] > 2 and s["compiles"]
    ]
    assert compiled == [(record["probe"]["expected_run_step"], 325)]
    check = _check(report, "recompilation")
    assert check["status"] == "FAIL" and check["rules"] == ["XLA204"]
    assert "optimizer step 325 is the XLA204 scalar-constant recompile" in check["summary"]
    assert "capturable=True" in check["explanation"]
    assert [c["name"] for c in report["checks"] if c["status"] == "FAIL"] == ["recompilation"]
    assert "cause and fix [XLA204]" in stdout


def test_the_compile_cache_is_not_loadable_on_cpu(runs):
    code, report, stdout = runs["cache"]
    assert code == 0  # a SKIP, not a failure
    check = _check(report, "compile-cache")
    assert check["status"] == "SKIP" and "not loadable on CPU (UNIMPLEMENTED)" in check["summary"]
    first = check["values"]["first_process"]
    second = check["values"]["second_process"]["counters"]
    assert first["PersistentCacheMiss"] >= 1 and first["files"] >= 1
    assert second["PersistentCacheDeserializeFailure"] >= 1 and second["PersistentCacheHit"] == 0
    assert check["values"]["second_process"]["unimplemented"] is True
    assert "SKIP  compile-cache" in stdout
