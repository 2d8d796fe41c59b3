"""Fast unit tests of the runtime checker's torch-free parts: options, sharding spec
parsing, the checks on hand-made run records, the report, and the no-torch exit path.

They need numpy (spec parsing) but neither torch nor torch_xla, so they also run
where the runtime extra is not installed.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")

from xla_lint.runtime.checks import CheckContext, run_all  # noqa: E402
from xla_lint.runtime.options import Injection, OptionsError, RuntimeOptions  # noqa: E402
from xla_lint.runtime.report import build_report, exit_code, format_text  # noqa: E402
from xla_lint.runtime.spec import parse_sharding, sharded_axes  # noqa: E402

# --- sharding specs --------------------------------------------------------------------------


def test_parse_tiled_spec_and_shard_shape():
    p = parse_sharding("{devices=[8,1]0,1,2,3,4,5,6,7}", 2)
    assert p.kind == "tiled" and p.tiles == (8, 1) and p.replication == 1 and p.is_sharded
    assert p.shard_shape((256, 64)) == (32, 64)
    assert p.shard_shape((3, 5)) == (1, 5)  # XLA pads: ceil(3 / 8)


def test_parse_partial_replication_and_iota():
    p = parse_sharding("{devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}", 2)
    assert p.tiles == (4, 1) and p.replication == 2
    q = parse_sharding("{devices=[4,2]<=[2,4]T(1,0)}", 2)
    assert q.tiles == (4, 2)
    assert q.devices.reshape(-1).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


@pytest.mark.parametrize("spec,kind", [("", "none"), ("{replicated}", "replicated"), ("{maximal device=0}", "maximal"), ("garbage", "unknown")])
def test_parse_unsharded_kinds(spec, kind):
    p = parse_sharding(spec, 2)
    assert p.kind == kind and not p.is_sharded


def test_sharded_axes_follow_the_mesh_axis_not_just_the_tile_count():
    logical = np.arange(8).reshape(4, 2)  # ('fsdp', 'tensor')
    fsdp_rows = parse_sharding("{devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}", 2)
    assert sharded_axes(fsdp_rows, logical, ("fsdp", "tensor")) == {0: "fsdp"}
    # dim 0 on 'tensor' (2 tiles), dim 1 on 'fsdp' (4 tiles): mark_sharding(t, mesh, ('tensor', 'fsdp'))
    both = parse_sharding("{devices=[2,4]0,2,4,6,1,3,5,7}", 2)
    assert sharded_axes(both, logical, ("fsdp", "tensor")) == {0: "tensor", 1: "fsdp"}
    # 4 tiles on dim 0 but devices grouped like the tensor axis's columns -> no single axis
    wrong = parse_sharding("{devices=[4,1,2]0,2,4,6,1,3,5,7 last_tile_dim_replicate}", 2)
    assert sharded_axes(wrong, logical, ("fsdp", "tensor")) == {0: "?"}


# --- options ---------------------------------------------------------------------------------


def test_options_round_trip_through_argv():
    from xla_lint.runtime.cli import command

    opts = RuntimeOptions(mesh_axes=("fsdp", "tensor"), mesh_shape=(4, 2), steps=7, inject=(Injection.parse("shape-change-at:5"),), simulated=True, host_index=1, num_hosts=2, coordinator="127.0.0.1:1234")
    ctx = command.make_context("runtime", opts.to_argv())
    params = dict(ctx.params)
    assert params["mesh"] == "fsdp,tensor" and params["mesh_shape"] == (4, 2) and params["steps"] == 7
    assert params["inject"] == ("shape-change-at:5",) and params["simulated"] is True and params["host_index"] == 1


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        ({"mesh_axes": ("fsdp",), "mesh_shape": (4, 2)}, "has 2 entries"),
        ({"mesh_axes": ("model",)}, "not one of"),
        ({"mesh_axes": ("data", "fsdp")}, "plain data parallelism"),
        ({"warmup_steps": 10}, "--warmup-steps"),
        ({"inject": (Injection("missing-host", 1),)}, "needs --simulate-hosts"),
        ({"model": "pkg:fn"}, "--input-shape"),
        ({"dim": 30, "heads": 4}, "divisible"),
        ({"mesh_axes": ("tensor",)}, "no 'fsdp' axis"),
    ],
)
def test_options_reject_inconsistent_combinations(kwargs, fragment):
    with pytest.raises(OptionsError, match=fragment.replace("-", r"\-")):
        RuntimeOptions(**kwargs)


def test_injection_parsing():
    assert Injection.parse("shape-change-at:5") == Injection("shape-change-at", 5)
    assert str(Injection.parse("diverge-seeds")) == "diverge-seeds"
    for bad in ("shape-change-at", "diverge-seeds:1", "explode"):
        with pytest.raises(OptionsError):
            Injection.parse(bad)


# --- checks on hand-made records ---------------------------------------------------------------


def _param(name, shape, spec, axes, nbytes):
    return {"name": name, "shape": shape, "dtype": "float32", "bytes": nbytes, "sharding_spec": spec, "shard_shape": shape, "axes": axes}


def make_record(host=0, simulated=False):
    steps = [{"step": i, "compiles": 1 if i <= 2 else 0, "compile_s": 1.0 if i <= 2 else 0.0, "time_s": 0.1, "input_shape": [16, 32]} for i in range(1, 7)]
    return {
        "host_index": host,
        "num_hosts": 1,
        "simulated": simulated,
        "environment": {"device_kind": "CPU", "addressable_devices": 8, "global_devices": 8, "xla_process_index": 0, "xla_process_count": 1, "torch": "2.9.0", "torch_xla": "2.9.0", "spmd": True, "pid": 100 + host},
        "mesh": {"kind": "Mesh", "axis_names": ["fsdp"], "axis_sizes": {"fsdp": 8}, "device_ids": list(range(8)), "global_devices": 8, "note": ""},
        "parameters": [
            _param("embed.weight", [256, 64], "{devices=[8,1]0,1,2,3,4,5,6,7}", {"0": "fsdp"}, 65536),
            _param("norm.weight", [64], "{devices=[8]0,1,2,3,4,5,6,7}", {"0": "fsdp"}, 256),
        ],
        "batch": {"global_batch": 16, "per_device_batch": 2, "devices": 8, "shape": [16, 32], "sharding_spec": "{devices=[8,1]0,1,2,3,4,5,6,7}", "shard_shape": [2, 32], "axes": {"0": "fsdp"}},
        "steps": steps,
        "losses": [5.0, 4.5, 4.0, 3.6, 3.3, 3.0],
        "checksum": {"abs_sum": 100.0, "sq_sum": 50.0, "parameters": 16448, "local_shard_abs_sum": 100.0, "spans_hosts": False},
        "checkpoint": {"dir": "/tmp/x", "mode": "m", "tensors": 2, "bytes": 1000, "max_abs_diff": 0.0, "diff_before_load": 1.0, "mismatches": [], "not_written": [], "sharding_mismatches": [], "save_s": 0.1, "load_s": 0.1},
        "timings": {"step_s_median": 0.1, "tokens_per_step": 512, "compile_s_total": 2.0},
        "errors": [],
        "completed": ["environment", "mesh", "model", "train", "consistency", "checkpoint"],
    }


def context(records, **rv):
    rendezvous = {"ok": True, "expected": len(records), "joined": list(range(len(records))), "missing": [], "source": "single", "elapsed_s": 0.0, **rv}
    return CheckContext(RuntimeOptions(steps=6).to_json(), records, rendezvous)


def statuses(results):
    return {r.name: r.status for r in results}


def test_healthy_records_pass_every_check():
    results = run_all(context([make_record()]))
    assert set(statuses(results).values()) == {"PASS"}, [(r.name, r.summary) for r in results if r.status != "PASS"]
    assert exit_code(results) == 0


def test_replicated_big_parameter_fails_sharding_but_small_one_is_allowed():
    rec = make_record()
    rec["parameters"][0].update(sharding_spec="", axes={})
    rec["parameters"][1].update(sharding_spec="", axes={})  # 256 B < 1024 B threshold
    res = {r.name: r for r in run_all(context([rec]))}
    assert res["sharding"].status == "FAIL"
    assert "embed.weight" in res["sharding"].summary and "norm.weight" not in res["sharding"].summary
    assert [p["name"] for p in res["sharding"].values["replicated"]] == ["embed.weight", "norm.weight"]


def test_unsharded_input_fails_sharding():
    rec = make_record()
    rec["batch"].update(axes={}, sharding_spec="")
    res = {r.name: r for r in run_all(context([rec]))}
    assert res["sharding"].status == "FAIL" and "input batch is not sharded" in res["sharding"].summary


def test_late_compile_names_the_step():
    rec = make_record()
    rec["steps"][4]["compiles"] = 3
    res = {r.name: r for r in run_all(context([rec]))}
    assert res["recompilation"].status == "FAIL"
    assert "step 5 compiled 3 graph(s)" in res["recompilation"].summary
    assert statuses(run_all(context([rec]))) == {**{n: "PASS" for n in statuses(run_all(context([make_record()])))}, "recompilation": "FAIL"}


def test_hosts_that_disagree_fail_consistency():
    a, b = make_record(0, True), make_record(1, True)
    b["checksum"]["abs_sum"] = b["checksum"]["local_shard_abs_sum"] = 101.0
    res = {r.name: r for r in run_all(context([a, b], source="simulated"))}
    assert res["consistency"].status == "FAIL" and "host(s) 1 disagree" in res["consistency"].summary
    b2 = copy.deepcopy(a)
    b2["host_index"] = 1
    assert {r.name: r.status for r in run_all(context([a, b2], source="simulated"))}["consistency"] == "PASS"


def test_shards_that_do_not_add_up_fail_consistency():
    rec = make_record()
    rec["checksum"]["local_shard_abs_sum"] = 90.0
    res = {r.name: r for r in run_all(context([rec]))}
    assert res["consistency"].status == "FAIL" and "shards add up to 90" in res["consistency"].summary


def test_rising_or_nan_loss_fails_convergence():
    rec = make_record()
    rec["losses"] = [3.0, 3.5, 4.0, 4.2, 4.4, 4.5]
    assert {r.name: r.status for r in run_all(context([rec]))}["convergence"] == "FAIL"
    rec["losses"][3] = float("nan")
    res = {r.name: r for r in run_all(context([rec]))}
    assert "not finite from step 4" in res["convergence"].summary


def test_checkpoint_that_drops_tensors_fails_and_explains_partial_replication():
    rec = make_record()
    rec["checkpoint"]["not_written"] = [{"name": "embed.weight", "sharding_spec": "{devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}"}]
    res = {r.name: r for r in run_all(context([rec]))}
    assert res["checkpoint"].status == "FAIL" and "not written" in res["checkpoint"].summary
    assert "dedup_tensors" in res["checkpoint"].explanation and res["checkpoint"].rules == []


def test_failed_rendezvous_skips_the_rest_and_names_the_host():
    rv = {"ok": False, "expected": 4, "joined": [0, 1, 2], "missing": [3], "message": "host 3 of 4 did not join within 120 s: start the command on every host"}
    results = run_all(CheckContext(RuntimeOptions().to_json(), [], rv))
    st = statuses(results)
    assert st.pop("rendezvous") == "FAIL" and set(st.values()) == {"SKIP"}
    assert "host 3 of 4 did not join" in next(r for r in results if r.name == "rendezvous").summary


def test_exception_in_a_stage_fails_its_check_and_skips_later_ones():
    rec = make_record()
    rec["errors"] = [{"stage": "mesh", "host": 0, "error": "ValueError: mesh shape (3, 2) covers 6 devices", "traceback": ""}]
    st = statuses(run_all(context([rec])))
    assert st["mesh"] == "FAIL" and st["environment"] == "PASS"
    assert all(st[n] == "SKIP" for n in ("sharding", "recompilation", "consistency", "convergence", "checkpoint", "throughput"))


def test_report_json_and_text():
    results = run_all(context([make_record()]))
    report = build_report(results, RuntimeOptions(steps=6).to_json(), {"ok": True, "expected": 1, "joined": [0]}, [make_record()], [], {}, 1.5)
    json.dumps(report)  # JSON-ready
    assert report["status"] == "pass" and report["summary"] == {"PASS": 10, "FAIL": 0, "SKIP": 0}
    text = format_text(report)
    assert text.splitlines()[0].startswith("xla-lint runtime check: 8 CPU devices, 1 host(s), mesh fsdp=8")
    assert text.splitlines()[-1].startswith("10 passed, 0 failed, 0 skipped")


# --- import hygiene and the missing extra -------------------------------------------------------


def test_importing_the_cli_and_checks_does_not_import_torch():
    code = "import sys, xla_lint.runtime.cli, xla_lint.runtime.checks, xla_lint.runtime.report, xla_lint.runtime.hosts; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_without_torch_the_checker_prints_one_line_and_exits_2():
    code = "import sys; sys.modules['torch'] = None; sys.modules['torch_xla'] = None; from xla_lint.runtime.cli import main; sys.exit(main([]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    from xla_lint.runtime import RUNTIME_EXTRA_HINT

    assert out.stderr.strip().splitlines() == ["error: " + RUNTIME_EXTRA_HINT]
    assert "pip install -e '.[runtime]'" in RUNTIME_EXTRA_HINT  # a clone has no package index entry
    assert out.stdout == ""


def test_cpu_hosts_joined_by_coordinator_are_separate_worlds_but_tpu_hosts_are_not():
    """On CPU, PJRT is one process per host even in a --coordinator group (the check failed
    every such run); on TPU the same layout means the runtime missed the other hosts."""
    from xla_lint.runtime.checks import environment

    records = [make_record(0), make_record(1)]
    result = environment.check(context(records, source="cli"))
    assert result.status == "PASS" and "CPU hosts: every process is its own SPMD world" in result.summary
    for record in records:
        record["environment"]["device_kind"] = "TPU"
    result = environment.check(context(records, source="cli"))
    assert result.status == "FAIL" and "PJRT reports [1] process(es)" in result.summary


@pytest.mark.parametrize("env", [{"WORLD_SIZE": "2", "RANK": "1"}, {"WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.2"}])
def test_a_partial_host_environment_is_a_usage_error(env):
    """WORLD_SIZE=2 RANK=1 without MASTER_ADDR ran as a lone host 0 and passed."""
    from xla_lint.runtime.hosts import resolve_layout

    with pytest.raises(OptionsError, match="set but not"):
        resolve_layout(RuntimeOptions(), env)
    assert resolve_layout(RuntimeOptions(), {"WORLD_SIZE": "1"}).num_hosts == 1  # a single-process launcher: fine


@pytest.mark.parametrize("losses,cause", [
    ([0.04, 3.0, 1.0e4], "the loss rose: the learning rate (--lr 0.003) is too high"),
    ([2.0, 2.0, 2.0], "build it from model.parameters() AFTER wrapping"),
    ([2.0, 2.5, 2.1], "try a smaller --lr (now 0.003) or more --steps"),
])
def test_a_loss_that_does_not_fall_is_explained_by_how_it_moved(losses, cause):
    """A user model whose loss exploded was told to build its optimizer after wrapping,
    though the wrapping was fine and the learning rate too high."""
    from xla_lint.runtime.checks import convergence

    record = make_record()
    record["losses"] = losses
    result = convergence.check(context([record]))
    assert result.status == "FAIL" and cause in result.explanation
