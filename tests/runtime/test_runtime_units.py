"""Fast unit tests of the runtime checker's torch-free parts: options, sharding spec
parsing, the checks on hand-made run records, the report, and the no-torch exit path.

They need numpy (spec parsing) but neither torch nor torch_xla, so they also run
where the runtime extra is not installed.
"""

from __future__ import annotations

import copy
import json
import re
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


@pytest.mark.parametrize(
    "spec,kind",
    [
        ("", "none"),
        ("{replicated}", "replicated"),
        ("{maximal device=0}", "maximal"),
        ("garbage", "unknown"),
    ],
)
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

    opts = RuntimeOptions(
        mesh_axes=("fsdp", "tensor"),
        mesh_shape=(4, 2),
        steps=7,
        inject=(Injection.parse("shape-change-at:5"),),
        simulated=True,
        host_index=1,
        num_hosts=2,
        coordinator="127.0.0.1:1234",
    )
    ctx = command.make_context("runtime", opts.to_argv())
    params = dict(ctx.params)
    assert (
        params["mesh"] == "fsdp,tensor" and params["mesh_shape"] == (4, 2) and params["steps"] == 7
    )
    assert (
        params["inject"] == ("shape-change-at:5",)
        and params["simulated"] is True
        and params["host_index"] == 1
    )


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
    return {
        "name": name,
        "shape": shape,
        "dtype": "float32",
        "bytes": nbytes,
        "sharding_spec": spec,
        "shard_shape": shape,
        "axes": axes,
    }


def make_record(host=0, simulated=False):
    steps = [
        {
            "step": i,
            "compiles": 1 if i <= 2 else 0,
            "compile_s": 1.0 if i <= 2 else 0.0,
            "time_s": 0.1,
            "input_shape": [16, 32],
        }
        for i in range(1, 7)
    ]
    return {
        "host_index": host,
        "num_hosts": 1,
        "simulated": simulated,
        "environment": {
            "device_kind": "CPU",
            "addressable_devices": 8,
            "global_devices": 8,
            "xla_process_index": 0,
            "xla_process_count": 1,
            "torch": "2.9.0",
            "torch_xla": "2.9.0",
            "spmd": True,
            "pid": 100 + host,
        },
        "mesh": {
            "kind": "Mesh",
            "axis_names": ["fsdp"],
            "axis_sizes": {"fsdp": 8},
            "device_ids": list(range(8)),
            "global_devices": 8,
            "note": "",
        },
        "parameters": [
            _param(
                "embed.weight", [256, 64], "{devices=[8,1]0,1,2,3,4,5,6,7}", {"0": "fsdp"}, 65536
            ),
            _param("norm.weight", [64], "{devices=[8]0,1,2,3,4,5,6,7}", {"0": "fsdp"}, 256),
        ],
        "batch": {
            "global_batch": 16,
            "per_device_batch": 2,
            "devices": 8,
            "shape": [16, 32],
            "sharding_spec": "{devices=[8,1]0,1,2,3,4,5,6,7}",
            "shard_shape": [2, 32],
            "axes": {"0": "fsdp"},
        },
        "steps": steps,
        "losses": [5.0, 4.5, 4.0, 3.6, 3.3, 3.0],
        "checksum": {
            "abs_sum": 100.0,
            "sq_sum": 50.0,
            "parameters": 16448,
            "local_shard_abs_sum": 100.0,
            "spans_hosts": False,
        },
        "checkpoint": {
            "dir": "/tmp/x",
            "mode": "m",
            "tensors": 2,
            "bytes": 1000,
            "max_abs_diff": 0.0,
            "diff_before_load": 1.0,
            "mismatches": [],
            "not_written": [],
            "sharding_mismatches": [],
            "save_s": 0.1,
            "load_s": 0.1,
        },
        "timings": {"step_s_median": 0.1, "tokens_per_step": 512, "compile_s_total": 2.0},
        "errors": [],
        "completed": ["environment", "mesh", "model", "train", "consistency", "checkpoint"],
    }


def context(records, **rv):
    rendezvous = {
        "ok": True,
        "expected": len(records),
        "joined": list(range(len(records))),
        "missing": [],
        "source": "single",
        "elapsed_s": 0.0,
        **rv,
    }
    return CheckContext(RuntimeOptions(steps=6).to_json(), records, rendezvous)


def statuses(results):
    return {r.name: r.status for r in results}


def test_healthy_records_pass_every_check():
    results = run_all(context([make_record()]))
    assert set(statuses(results).values()) == {"PASS"}, [
        (r.name, r.summary) for r in results if r.status != "PASS"
    ]
    assert exit_code(results) == 0


def test_replicated_big_parameter_fails_sharding_but_small_one_is_allowed():
    rec = make_record()
    rec["parameters"][0].update(sharding_spec="", axes={})
    rec["parameters"][1].update(sharding_spec="", axes={})  # 256 B < 1024 B threshold
    res = {r.name: r for r in run_all(context([rec]))}
    assert res["sharding"].status == "FAIL"
    assert (
        "embed.weight" in res["sharding"].summary and "norm.weight" not in res["sharding"].summary
    )
    assert [p["name"] for p in res["sharding"].values["replicated"]] == [
        "embed.weight",
        "norm.weight",
    ]


def test_unsharded_input_fails_sharding():
    rec = make_record()
    rec["batch"].update(axes={}, sharding_spec="")
    res = {r.name: r for r in run_all(context([rec]))}
    assert (
        res["sharding"].status == "FAIL" and "input batch is not sharded" in res["sharding"].summary
    )


def test_late_compile_names_the_step():
    rec = make_record()
    rec["steps"][4]["compiles"] = 3
    res = {r.name: r for r in run_all(context([rec]))}
    assert res["recompilation"].status == "FAIL"
    assert "step 5 compiled 3 graph(s)" in res["recompilation"].summary
    assert statuses(run_all(context([rec]))) == {
        **{n: "PASS" for n in statuses(run_all(context([make_record()])))},
        "recompilation": "FAIL",
    }


def test_hosts_that_disagree_fail_consistency():
    a, b = make_record(0, True), make_record(1, True)
    b["checksum"]["abs_sum"] = b["checksum"]["local_shard_abs_sum"] = 101.0
    res = {r.name: r for r in run_all(context([a, b], source="simulated"))}
    assert (
        res["consistency"].status == "FAIL" and "host(s) 1 disagree" in res["consistency"].summary
    )
    b2 = copy.deepcopy(a)
    b2["host_index"] = 1
    assert {r.name: r.status for r in run_all(context([a, b2], source="simulated"))}[
        "consistency"
    ] == "PASS"


def test_shards_that_do_not_add_up_fail_consistency():
    rec = make_record()
    rec["checksum"]["local_shard_abs_sum"] = 90.0
    res = {r.name: r for r in run_all(context([rec]))}
    assert (
        res["consistency"].status == "FAIL" and "shards add up to 90" in res["consistency"].summary
    )


def test_rising_or_nan_loss_fails_convergence():
    rec = make_record()
    rec["losses"] = [3.0, 3.5, 4.0, 4.2, 4.4, 4.5]
    assert {r.name: r.status for r in run_all(context([rec]))}["convergence"] == "FAIL"
    rec["losses"][3] = float("nan")
    res = {r.name: r for r in run_all(context([rec]))}
    assert "not finite from step 4" in res["convergence"].summary


def test_checkpoint_that_drops_tensors_fails_and_explains_partial_replication():
    rec = make_record()
    rec["checkpoint"]["not_written"] = [
        {
            "name": "embed.weight",
            "sharding_spec": "{devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}",
        }
    ]
    res = {r.name: r for r in run_all(context([rec]))}
    assert res["checkpoint"].status == "FAIL" and "not written" in res["checkpoint"].summary
    assert "dedup_tensors" in res["checkpoint"].explanation and res["checkpoint"].rules == []


def test_failed_rendezvous_skips_the_rest_and_names_the_host():
    rv = {
        "ok": False,
        "expected": 4,
        "joined": [0, 1, 2],
        "missing": [3],
        "message": "host 3 of 4 did not join within 120 s: start the command on every host",
    }
    results = run_all(CheckContext(RuntimeOptions().to_json(), [], rv))
    st = statuses(results)
    assert st.pop("rendezvous") == "FAIL" and set(st.values()) == {"SKIP"}
    assert "host 3 of 4 did not join" in next(r for r in results if r.name == "rendezvous").summary


def test_exception_in_a_stage_fails_its_check_and_skips_later_ones():
    rec = make_record()
    rec["errors"] = [
        {
            "stage": "mesh",
            "host": 0,
            "error": "ValueError: mesh shape (3, 2) covers 6 devices",
            "traceback": "",
        }
    ]
    st = statuses(run_all(context([rec])))
    assert st["mesh"] == "FAIL" and st["environment"] == "PASS"
    assert all(
        st[n] == "SKIP"
        for n in (
            "sharding",
            "recompilation",
            "consistency",
            "convergence",
            "checkpoint",
            "throughput",
        )
    )


def test_report_json_and_text():
    results = run_all(context([make_record()]))
    report = build_report(
        results,
        RuntimeOptions(steps=6).to_json(),
        {"ok": True, "expected": 1, "joined": [0]},
        [make_record()],
        [],
        {},
        1.5,
    )
    json.dumps(report)  # JSON-ready
    assert report["status"] == "pass" and report["summary"] == {"PASS": 10, "FAIL": 0, "SKIP": 0}
    text = format_text(report)
    assert text.splitlines()[0].startswith(
        "xla-lint runtime check: 8 CPU devices, 1 host(s), mesh fsdp=8"
    )
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

    assert out.stderr.strip().splitlines() == [
        "python -m xla_lint.runtime: error: " + RUNTIME_EXTRA_HINT
    ]
    assert "pip install -e '.[runtime]'" in RUNTIME_EXTRA_HINT  # a clone has no package index entry
    assert out.stdout == ""


def test_cpu_hosts_joined_by_coordinator_are_separate_worlds_but_tpu_hosts_are_not():
    """On CPU, PJRT is one process per host even in a --coordinator group (the check failed
    every such run); on TPU the same layout means the runtime missed the other hosts."""
    from xla_lint.runtime.checks import environment

    records = [make_record(0), make_record(1)]
    result = environment.check(context(records, source="cli"))
    assert (
        result.status == "PASS"
        and "CPU hosts: every process is its own SPMD world" in result.summary
    )
    for record in records:
        record["environment"]["device_kind"] = "TPU"
    result = environment.check(context(records, source="cli"))
    assert result.status == "FAIL" and "PJRT reports [1] process(es)" in result.summary


@pytest.mark.parametrize(
    "env", [{"WORLD_SIZE": "2", "RANK": "1"}, {"WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.2"}]
)
def test_a_partial_host_environment_is_a_usage_error(env):
    """WORLD_SIZE=2 RANK=1 without MASTER_ADDR ran as a lone host 0 and passed."""
    from xla_lint.runtime.hosts import resolve_layout

    with pytest.raises(OptionsError, match="set but not"):
        resolve_layout(RuntimeOptions(), env)
    assert (
        resolve_layout(RuntimeOptions(), {"WORLD_SIZE": "1"}).num_hosts == 1
    )  # a single-process launcher: fine


@pytest.mark.parametrize(
    "losses,cause",
    [
        ([0.04, 3.0, 1.0e4], "the loss rose: the learning rate (--lr 0.003) is too high"),
        ([2.0, 2.0, 2.0], "build it from model.parameters() AFTER wrapping"),
        ([2.0, 2.5, 2.1], "try a smaller --lr (now 0.003) or more --steps"),
    ],
)
def test_a_loss_that_does_not_fall_is_explained_by_how_it_moved(losses, cause):
    """A user model whose loss exploded was told to build its optimizer after wrapping,
    though the wrapping was fine and the learning rate too high."""
    from xla_lint.runtime.checks import convergence

    record = make_record()
    record["losses"] = losses
    result = convergence.check(context([record]))
    assert result.status == "FAIL" and cause in result.explanation


# --- optimizer options, the step-counter probe and the compile cache ------------------------------


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        ({"betas": (0.9, 1.0)}, "each must be in [0, 1)"),
        ({"betas": (-0.1, 0.9)}, "each must be in [0, 1)"),
        ({"betas": (0.9, float("nan"))}, "each must be in [0, 1)"),
        ({"optimizer": "sgd", "betas": (0.9, 0.95)}, "--optimizer sgd has none"),
        ({"weight_decay": -0.01}, "--weight-decay must be at least 0"),
        ({"weight_decay": float("inf")}, "--weight-decay must be at least 0"),
        ({"fast_forward": True, "optimizer": "sgd", "steps": 12}, "probes Adam's bias correction"),
        ({"fast_forward": True, "steps": 5}, "at least 4 steps after the warm-up"),
        ({"fast_forward": True, "steps": 12, "betas": (0.9, 0.0)}, "no recompile to probe"),
        ({"lr": float("nan")}, "--lr must be a positive, finite number"),
        ({"lr": float("inf")}, "--lr must be a positive, finite number"),
        ({"timeout": float("nan")}, "positive, finite numbers of seconds"),
    ],
)
def test_optimizer_options_are_checked_up_front(kwargs, fragment):
    with pytest.raises(OptionsError, match=re.escape(fragment)):
        RuntimeOptions(**kwargs)


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--betas", "0.9"], "needs two numbers"),
        (["--betas", "a,b"], "two comma-separated numbers"),
        (["--betas", "0.9,1.5"], "each must be in [0, 1)"),
        (["--weight-decay", "-1"], "--weight-decay must be at least 0"),
        (["--optimizer", "sgd", "--fast-forward-step"], "probes Adam's bias correction"),
        (["--lr", "nan"], "--lr must be a positive, finite number"),
        (
            ["--compile-cache", "/proc/no-such-folder"],
            "--compile-cache /proc/no-such-folder is not a writable folder",
        ),
    ],
)
def test_bad_optimizer_options_are_one_line_usage_errors(argv, fragment, capsys):
    from xla_lint.runtime.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err
    assert len(err.splitlines()) == 1 and ": error: " in err


def test_optimizer_options_round_trip_through_argv():
    from xla_lint.runtime.cli import command

    opts = RuntimeOptions(
        betas=(0.9, 0.95), weight_decay=0.0, fast_forward=True, steps=12, compile_cache="/tmp/c"
    )
    params = command.make_context("runtime", opts.to_argv()).params
    assert params["betas"] == (0.9, 0.95) and params["weight_decay"] == 0.0
    assert params["fast_forward"] is True and params["compile_cache"] == "/tmp/c"
    assert (
        RuntimeOptions().to_argv() == RuntimeOptions(betas=None).to_argv()
    )  # defaults add nothing


def test_the_scalar_math_imports_neither_torch_nor_libcst():
    code = (
        "import sys, xla_lint.scalars, xla_lint.runtime.checks.recompilation; "
        "print('libcst' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False"]
    from xla_lint.rules.recompilation import adam_scalar
    from xla_lint.scalars import recompile_step

    assert adam_scalar.recompile_step is recompile_step
    assert (recompile_step(0.95), recompile_step(0.999)) == (325, 16628)


def _adam_context(rec, **options):
    return CheckContext(
        RuntimeOptions(steps=6, **options).to_json(),
        [rec],
        {"ok": True, "expected": 1, "joined": [0]},
    )


def test_a_late_compile_at_the_predicted_adam_step_is_xla204():
    rec = make_record()
    for s, count in zip(rec["steps"], (1, 2, 322, 323, 324, 325), strict=True):
        s["optimizer_step"] = count
    rec["steps"][5]["compiles"] = 1
    rec["probe"] = {"beta2": 0.95, "predicted_step": 325, "set_to": 321, "at_run_step": 2}
    res = {r.name: r for r in run_all(_adam_context(rec, betas=(0.9, 0.95)))}["recompilation"]
    assert res.status == "FAIL" and res.rules == ["XLA204"]
    assert "optimizer step 325 is the XLA204 scalar-constant recompile" in res.summary
    assert "capturable=True" in res.explanation and "set the counter to 321" in res.explanation
    # the same compile at another optimizer step (or with SGD) is not named XLA204
    other = {r.name: r for r in run_all(_adam_context(rec, betas=(0.9, 0.999)))}["recompilation"]
    assert other.status == "FAIL" and "XLA204" not in other.rules


def _cache_record(second, device="CPU"):
    rec = make_record()
    rec["environment"]["device_kind"] = device
    rec["compile_cache"] = {
        "first_process": {"PersistentCacheMiss": 3, "files": 3},
        "second_process": second,
    }
    return rec


@pytest.mark.parametrize(
    "second,device,status,fragment",
    [
        (
            {
                "counters": {"PersistentCacheDeserializeFailure": 2, "UncachedCompile": 2},
                "unimplemented": True,
            },
            "CPU",
            "SKIP",
            "not loadable on CPU (UNIMPLEMENTED)",
        ),
        (
            {"counters": {"PersistentCacheHit": 2, "UncachedCompile": 0}},
            "TPU",
            "PASS",
            "loaded 2 graph(s)",
        ),
        (
            {"counters": {"PersistentCacheMiss": 2, "UncachedCompile": 2}},
            "TPU",
            "FAIL",
            "did not load",
        ),
        (
            {"counters": {}, "error": "the second process did not finish within 600 s"},
            "TPU",
            "SKIP",
            "not measured",
        ),
    ],
)
def test_compile_cache_check(second, device, status, fragment):
    results = run_all(_adam_context(_cache_record(second, device), compile_cache="/tmp/c"))
    res = {r.name: r for r in results}["compile-cache"]
    assert res.status == status and fragment in res.summary
    assert [r.name for r in results].index("compile-cache") == [r.name for r in results].index(
        "recompilation"
    ) + 1
    assert "compile-cache" not in {
        r.name for r in run_all(_adam_context(make_record()))
    }  # only when asked for
