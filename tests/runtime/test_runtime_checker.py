"""End-to-end tests of ``python -m xla_lint.runtime`` on CPU devices.

Every scenario runs the checker as a subprocess with ``--json`` and asserts on the JSON
report and the exit status. The scenarios start together at module setup (at most
three at a time; the machine has 2 cores) and each test waits for the one it needs,
so the whole module takes a few minutes. Fault scenarios use small models and 4 CPU
devices per process (the checker itself compiles with LLVM -O0 on CPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("torch_xla")

pytestmark = pytest.mark.runtime

SMALL = [
    "--dim",
    "32",
    "--layers",
    "1",
    "--heads",
    "4",
    "--vocab",
    "128",
    "--seq-len",
    "16",
    "--cpu-devices",
    "4",
]
CHECKS = [
    "environment",
    "rendezvous",
    "mesh",
    "sharding",
    "training",
    "recompilation",
    "consistency",
    "convergence",
    "checkpoint",
    "throughput",
]
RUN_TIMEOUT = 900  # seconds; a hung checker fails the test instead of hanging the suite

# name -> arguments. Order = start order: long and idle-heavy runs first.
SCENARIOS = {
    "missing_host": [
        "--simulate-hosts",
        "2",
        "--inject",
        "missing-host:1",
        "--timeout",
        "15",
        *SMALL,
    ],
    "two_hosts": ["--simulate-hosts", "2", *SMALL, "--steps", "6"],
    "default": [],
    "diverge": ["--simulate-hosts", "2", *SMALL, "--steps", "4", "--inject", "diverge-seeds"],
    "replicated": [*SMALL, "--steps", "5", "--inject", "replicated-params"],
    "shape_change": [*SMALL, "--steps", "7", "--inject", "shape-change-at:5"],
    "crash": [*SMALL, "--steps", "4", "--inject", "crash-at:3"],
    "mesh_2d": [*SMALL, "--steps", "3", "--mesh", "fsdp,tensor", "--mesh-shape", "2,2"],
    "dcn_on_cpu": [*SMALL, "--steps", "3", "--mesh", "fsdp", "--dcn-mesh-shape", "2"],
    "user_model": [
        "--model",
        "runtime_user_model:build",
        "--input-shape",
        "32",
        "--cpu-devices",
        "4",
        "--steps",
        "4",
    ],
    # ckpt holds a file of the user's; new/deeper does not exist yet
    "own_checkpoint_dir": [*SMALL, "--steps", "3", "--checkpoint-dir", "{base}/ckpt/new/deeper"],
}
SCENARIO_ENV = {"user_model": {"PYTHONPATH": str(Path(__file__).parent)}}


@dataclass
class Result:
    code: int
    report: dict | None
    stdout: str
    stderr: str
    wall_s: float

    def check(self, name: str) -> dict:
        return next(c for c in self.report["checks"] if c["name"] == name)

    def statuses(self) -> dict:
        return {c["name"]: c["status"] for c in self.report["checks"]}

    def failed(self) -> list[str]:
        return [c["name"] for c in self.report["checks"] if c["status"] == "FAIL"]


def run_checker(args: list[str], json_path: Path, extra_env: dict | None = None) -> Result:
    env = {**os.environ, **(extra_env or {})}
    for var in (
        "PJRT_DEVICE",
        "CPU_NUM_DEVICES",
        "RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "XLA_FLAGS",
    ):
        env.pop(var, None)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "xla_lint.runtime", *args, "--json", str(json_path)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    wall = time.monotonic() - t0
    report = json.loads(json_path.read_text()) if json_path.exists() else None
    return Result(proc.returncode, report, proc.stdout, proc.stderr, wall)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    """All scenarios, started at once on a pool of three; ``runs[name]`` waits for one."""
    base = tmp_path_factory.mktemp("runtime")
    (base / "ckpt").mkdir()
    (base / "ckpt" / "precious.txt").write_text("the user's own file\n")
    pool = ThreadPoolExecutor(max_workers=3)
    futures: dict[str, Future] = {
        name: pool.submit(
            run_checker,
            [a.format(base=base) for a in args],
            base / f"{name}.json",
            SCENARIO_ENV.get(name),
        )
        for name, args in SCENARIOS.items()
    }

    class Runs:
        base_dir = base

        def __getitem__(self, name: str) -> Result:
            res = futures[name].result(timeout=RUN_TIMEOUT * 2)
            assert res.report is not None, (
                f"{name}: no JSON report; exit {res.code}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
            )
            return res

    yield Runs()
    pool.shutdown(wait=True, cancel_futures=True)


def explain(res: Result) -> str:
    return res.stdout + "\n" + res.stderr


# --- passing runs ------------------------------------------------------------------------


def test_default_run_with_8_cpu_devices_passes_every_check(runs):
    res = runs["default"]
    assert res.code == 0, explain(res)
    assert res.report["schema"] == "xla-lint-runtime/1"
    assert [c["name"] for c in res.report["checks"]] == CHECKS
    assert set(res.statuses().values()) == {"PASS"}, res.statuses()
    rec = res.report["records"][0]
    assert rec["environment"]["global_devices"] == 8
    assert rec["environment"]["device_kind"] == "CPU"
    assert rec["environment"]["spmd"] is True
    assert rec["mesh"]["axis_sizes"] == {"fsdp": 8}
    assert sorted(rec["mesh"]["device_ids"]) == list(range(8))


def test_default_run_reports_shardings_and_batch_sizes(runs):
    res = runs["default"]
    sharding = res.check("sharding")["values"]
    # every parameter of the decoder is sharded along fsdp: per-device shard is 1/8 on one dim
    assert sharding["sharded_on_fsdp"] == sharding["parameters"] == 21
    for name, spec in sharding["parameter_specs"].items():
        assert "fsdp" in spec["axes"].values(), name
    embed = sharding["parameter_specs"]["embed_tokens.weight"]
    assert embed["shard_shape"] == [32, 64]  # 256 x 64 split 8 ways on dim 0
    assert sharding["global_batch"] == 16 and sharding["per_device_batch"] == 2
    assert sharding["input"]["shard_shape"] == [2, 32] and sharding["input"]["axes"] == {
        "0": "fsdp"
    }


def test_default_run_compiles_only_in_warmup_and_learns(runs):
    res = runs["default"]
    rec = res.check("recompilation")["values"]
    per_step = rec["compiles_per_step"]["0"]
    assert len(per_step) == 10 and sum(per_step[:2]) >= 1 and per_step[2:] == [0] * 8
    losses = res.check("convergence")["values"]["losses"]
    assert len(losses) == 10 and losses[-1] < losses[0]
    ckpt = res.check("checkpoint")["values"]["hosts"]["0"]
    assert ckpt["max_abs_diff"] == 0.0 and ckpt["diff_before_load"] > 0 and ckpt["tensors"] == 21
    tput = res.check("throughput")["values"]
    assert tput["tokens_per_s"] > 0 and tput["step_s_median"] > 0


def test_default_run_prints_one_flushed_text_report(runs):
    res = runs["default"]
    lines = res.stdout.splitlines()
    assert lines[0].startswith("xla-lint runtime check: 8 CPU devices, 1 host(s), mesh fsdp=8")
    for name in CHECKS:
        assert any(line.startswith(f"PASS  {name}") for line in lines), name
    assert lines[-1].startswith("10 passed, 0 failed, 0 skipped")


def test_two_simulated_hosts_pass_and_compare_two_real_processes(runs):
    res = runs["two_hosts"]
    assert res.code == 0, explain(res)
    assert set(res.statuses().values()) == {"PASS"}, res.statuses()
    recs = res.report["records"]
    assert [r["host_index"] for r in recs] == [0, 1]
    assert recs[0]["environment"]["pid"] != recs[1]["environment"]["pid"]
    rv = res.report["rendezvous"]
    assert rv["joined"] == [0, 1] and rv["missing"] == [] and rv["source"] == "simulated"
    cons = res.check("consistency")["values"]
    assert set(cons["hosts"]) == {"0", "1"}
    assert cons["hosts"]["0"]["abs_sum"] == pytest.approx(cons["hosts"]["1"]["abs_sum"], rel=1e-6)
    # each simulated host is its own SPMD world of 4 CPU devices
    assert all(
        r["environment"]["global_devices"] == 4 and r["environment"]["xla_process_count"] == 1
        for r in recs
    )
    # only host 0 prints, and only the report (no gloo connection chatter)
    assert res.stdout.count("xla-lint runtime check:") == 1
    assert res.stdout.startswith("xla-lint runtime check:") and "[Gloo]" not in res.stdout


# --- injected faults: each fails exactly its check -------------------------------------------


def test_replicated_parameters_fail_the_sharding_check(runs):
    res = runs["replicated"]
    assert res.code == 1, explain(res)
    assert res.failed() == ["sharding"], res.statuses()
    check = res.check("sharding")
    assert "not sharded along 'fsdp'" in check["summary"]
    names = {p["name"] for p in check["values"]["replicated"]}
    assert {"embed_tokens.weight", "lm_head.weight", "layers.0.mlp.up_proj.weight"} <= names
    assert check["values"]["replicated_bytes"] > 0
    assert "XLA009" in check["rules"] and "SpmdFullyShardedDataParallel" in check["explanation"]


def test_input_shape_change_fails_recompilation_naming_the_step(runs):
    res = runs["shape_change"]
    assert res.code == 1, explain(res)
    assert res.failed() == ["recompilation"], res.statuses()
    check = res.check("recompilation")
    assert "step 5 compiled" in check["summary"]
    late = check["values"]["late"]
    assert [x["step"] for x in late] == [5]
    assert late[0]["input_shape"] == [8, 8] and late[0]["previous_input_shape"] == [8, 16]
    assert "XLA202" in check["rules"]


def test_missing_host_fails_rendezvous_within_the_timeout_and_names_it(runs):
    res = runs["missing_host"]
    assert res.code == 1, explain(res)
    assert res.failed() == ["rendezvous"], res.statuses()
    assert all(s == "SKIP" for n, s in res.statuses().items() if n != "rendezvous")
    check = res.check("rendezvous")
    assert "host 1 of 2 did not join within 15 s" in check["summary"]
    assert check["values"]["missing"] == [1] and check["values"]["joined"] == [0]
    assert res.wall_s < 120, "the checker must give up after --timeout, not hang"


def test_diverging_seeds_fail_consistency_across_hosts(runs):
    res = runs["diverge"]
    assert res.code == 1, explain(res)
    assert res.failed() == ["consistency"], res.statuses()
    hosts = res.check("consistency")["values"]["hosts"]
    assert hosts["0"]["abs_sum"] != pytest.approx(hosts["1"]["abs_sum"], rel=1e-5)
    assert "host(s) 1 disagree with host 0" in res.check("consistency")["summary"]


def test_exception_in_a_step_fails_the_training_check_with_its_host_and_step(runs):
    """It used to be filed under convergence, as if the loss had not fallen."""
    res = runs["crash"]
    assert res.code == 1, explain(res)
    assert res.failed() == ["training"], res.statuses()
    check = res.check("training")
    assert "host 0 raised in step 3 (train stage)" in check["summary"]
    assert "injected crash at step 3" in check["summary"]
    assert check["rules"] == []
    assert (
        "the full traceback is in the JSON report" in check["explanation"]
    )  # this run wrote --json
    assert {n: s for n, s in res.statuses().items() if s == "SKIP"}.keys() == {
        "recompilation",
        "consistency",
        "convergence",
        "checkpoint",
        "throughput",
    }
    assert res.report["errors"][0]["host"] == 0 and res.report["errors"][0]["step"] == 3


# --- usage ------------------------------------------------------------------------------------


def test_own_checkpoint_dir_is_left_as_it_was(runs):
    """--checkpoint-dir DIR/new/deeper: the checkpoint passes, the folders the checker created
    (new/deeper) are removed, and DIR keeps only what was there (empty per-run folders, and
    the created ones, used to be left behind)."""
    res = runs["own_checkpoint_dir"]
    assert res.statuses()["checkpoint"] == "PASS", explain(res)
    assert res.check("checkpoint")["values"]["hosts"]["0"]["dir"].startswith(
        str(runs.base_dir / "ckpt" / "new" / "deeper")
    )
    assert sorted(p.name for p in (runs.base_dir / "ckpt").iterdir()) == ["precious.txt"]


def test_usage_errors_exit_2_without_starting_the_job(tmp_path):
    for args in (
        ["--mesh-shape", "3,2"],
        ["--mesh", "model"],
        ["--inject", "missing-host:1"],
        ["--warmup-steps", "10"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "xla_lint.runtime", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("python -m xla_lint.runtime: error: "), proc.stderr
        assert len(proc.stderr.splitlines()) == 1, proc.stderr  # one line, no usage block


# --- other meshes -------------------------------------------------------------------------------


def test_2d_mesh_shards_on_fsdp_and_exposes_the_partial_replication_checkpoint_loss(runs):
    """torch_xla 2.9 (pinned): SPMDSavePlanner's dedup drops every copy of a shard one
    process holds twice, so FSDPv2 parameters on a ('fsdp', 'tensor') mesh are never
    written. The checker must say so instead of crashing in dist_cp.load."""
    res = runs["mesh_2d"]
    assert res.code == 1, explain(res)
    assert res.failed() == ["checkpoint"], res.statuses()
    rec = res.report["records"][0]
    assert rec["mesh"]["axis_sizes"] == {"fsdp": 2, "tensor": 2}
    sharding = res.check("sharding")["values"]
    assert sharding["sharded_on_fsdp"] == sharding["parameters"]
    spec = sharding["parameter_specs"]["embed_tokens.weight"]
    assert spec["axes"] == {"0": "fsdp"} and "last_tile_dim_replicate" in spec["sharding_spec"]
    lost = res.check("checkpoint")["values"]["hosts"]["0"]["not_written"]
    assert "embed_tokens.weight" in {x["name"] for x in lost}
    assert "dedup_tensors" in res.check("checkpoint")["explanation"]


def test_dcn_mesh_shape_on_cpu_builds_the_logical_shape_and_says_so(runs):
    res = runs["dcn_on_cpu"]
    assert res.code == 0, explain(res)
    mesh = res.check("mesh")["values"]
    assert (
        mesh["axis_sizes"] == {"fsdp": 4}
        and mesh["dcn_mesh_shape"] == [2]
        and mesh["kind"] == "Mesh"
    )
    assert "HybridMesh needs multi-slice TPU" in mesh["note"]


def test_user_model_is_wrapped_sharded_and_trained(runs):
    res = runs["user_model"]
    assert res.code == 0, explain(res)
    assert set(res.statuses().values()) == {"PASS"}, res.statuses()
    specs = res.check("sharding")["values"]["parameter_specs"]
    assert set(specs) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert specs["fc1.weight"]["axes"] == {"0": "fsdp"} and specs["fc1.weight"]["shard_shape"] == [
        32,
        32,
    ]
    assert res.check("sharding")["values"]["input"]["shape"] == [8, 32]
