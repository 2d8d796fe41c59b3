"""Issue 13, runtime checker, fast part: options refused up front, dead hosts described,
hints that name a rule only when its pitfall is the cause. No torch_xla needed (the
``--model`` builder tests import torch); the slow end-to-end runs are in
test_hard_edges_runtime.py.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import pytest

np = pytest.importorskip("numpy")

from test_runtime_units import context, make_record  # noqa: E402  (tests/runtime is on sys.path)

from xla_lint.runtime.checks import CheckContext, run_all  # noqa: E402
from xla_lint.runtime.cli import main  # noqa: E402
from xla_lint.runtime.hosts import KEY, HostGroup, HostLayout, RendezvousResult  # noqa: E402
from xla_lint.runtime.options import (  # noqa: E402
    Injection,
    OptionsError,
    RuntimeOptions,
    mesh_device_problem,
    option_differences,
)
from xla_lint.runtime.preflight import check_checkpoint_dir, check_mesh, remove_created  # noqa: E402
from xla_lint.runtime.progress import (  # noqa: E402
    CoordinatorLost,
    Progress,
    death,
    describe_death,
    how_it_ended,
    read_progress,
)
from xla_lint.runtime.report import report_lost_hosts  # noqa: E402


def refused(**kwargs) -> str:
    with pytest.raises(OptionsError) as info:
        RuntimeOptions(**kwargs)
    return str(info.value)


# --- item 3: options that would do nothing ----------------------------------------------------


def test_default_warmup_adapts_to_short_runs_and_only_an_explicit_conflict_is_refused():
    """--steps 1 was refused because of the default --warmup-steps 2 the user never set."""
    assert [RuntimeOptions(steps=s).warmup for s in (1, 2, 3, 10)] == [1, 2, 2, 2]
    assert RuntimeOptions(steps=1).to_json()["warmup_steps"] == 1
    assert (
        "--warmup-steps" not in RuntimeOptions(steps=1).to_argv()
    )  # each host computes the default itself
    assert (
        refused(steps=3, warmup_steps=3)
        == "--warmup-steps 3 must be in 0..2 (below --steps 3; the default is min(2, --steps))"
    )


def test_negative_steps_are_refused_by_themselves():
    """--steps -1 reported "--warmup-steps must be in [0, --steps) = [0, -1)"."""
    assert refused(steps=-1) == "--steps must be at least 1, got -1"


@pytest.mark.parametrize(
    "kwargs,fragment",
    [
        (
            {"inject": (Injection.parse("shape-change-at:1"),)},
            "must name a step after the warm-up, in 3..10",
        ),
        ({"inject": (Injection.parse("shape-change-at:2"),)}, "steps 1..2 may compile"),
        (
            {"steps": 2, "inject": (Injection.parse("shape-change-at:2"),)},
            "every one of the 2 steps is a warm-up step",
        ),
        (
            {"inject": (Injection.parse("diverge-seeds"),), "simulate_hosts": 1},
            "needs at least 2 hosts",
        ),
        ({"inject": (Injection.parse("diverge-seeds"),), "num_hosts": 1}, "needs at least 2 hosts"),
        ({"inject": (Injection.parse("sigkill:1@3"),)}, "needs at least 2 hosts"),
        (
            {"inject": (Injection.parse("sigkill:2@3"),), "simulate_hosts": 2},
            "host 2 is not in 0..1",
        ),
        (
            {"inject": (Injection.parse("sigkill:1@11"),), "simulate_hosts": 2},
            "must name a step in 1..10",
        ),
        (
            {
                "inject": (Injection.parse("sigkill:1@3"), Injection.parse("missing-host:1")),
                "simulate_hosts": 2,
            },
            "never started",
        ),
        ({"coordinator": "127.0.0.1:99999"}, "the port must be in 1..65535"),
        ({"coordinator": "127.0.0.1:0"}, "the port must be in 1..65535"),
    ],
)
def test_injections_and_hosts_that_would_do_nothing_are_refused(kwargs, fragment):
    """diverge-seeds on one host and shape-change-at inside the warm-up exited 0 silently;
    --coordinator 127.0.0.1:99999 failed in pybind's "incompatible constructor arguments"."""
    assert fragment in refused(**kwargs)


def test_injections_that_do_something_are_accepted():
    RuntimeOptions(inject=(Injection.parse("shape-change-at:3"),))
    RuntimeOptions(
        simulate_hosts=2, inject=(Injection.parse("diverge-seeds"), Injection.parse("sigkill:0@10"))
    )
    RuntimeOptions(
        num_hosts=2,
        host_index=1,
        coordinator="10.0.0.2:65535",
        inject=(Injection.parse("sigkill:1@1"),),
    )


def test_sigkill_injection_parses_host_at_step():
    inj = Injection.parse("sigkill:1@3")
    assert (inj.kind, inj.host, inj.arg, str(inj)) == ("sigkill", 1, 3, "sigkill:1@3")
    for bad in ("sigkill", "sigkill:1", "sigkill:a@3", "sigkill:1@", "sigkill:@3"):
        with pytest.raises(OptionsError, match="sigkill:H@STEP"):
            Injection.parse(bad)


@pytest.mark.parametrize(
    "argv,option",
    [
        (["--steps", "-1"], "'--steps': -1 is not in the range x>=1"),
        (["--cpu-devices", "0"], "'--cpu-devices': 0 is not in the range x>=1"),
        (["--timeout", "0"], "'--timeout': 0.0 is not in the range x>0"),
        (
            ["--coordinator", "127.0.0.1:99999"],
            "--coordinator 127.0.0.1:99999: the port must be in 1..65535",
        ),
        (["--inject", "sigkill:1"], "sigkill needs a host index and a step"),
    ],
)
def test_bad_values_are_one_line_usage_errors(argv, option, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # One line, as every usage error of xla-lint (click's three-line block before)
    assert err == [err[-1]] and err[-1].startswith("python -m xla_lint.runtime: error: ")
    assert option in err[-1]


def test_usage_errors_name_the_calling_command(capsys):
    """xla-lint runtime's errors said "Usage: python -m xla_lint.runtime"."""
    assert main(["--steps", "-1"], prog_name="xla-lint runtime") == 2
    err = capsys.readouterr().err
    assert err.startswith("xla-lint runtime: error: ") and "(see xla-lint runtime --help)" in err


# --- item 2: options checked before device work ------------------------------------------------


@pytest.mark.parametrize(
    "axes,shape,devices,bad",
    [
        (
            ("fsdp", "tensor"),
            (3, 3),
            8,
            "--mesh-shape 3,3 covers 9 devices, but there are 8 CPU devices (--cpu-devices)",
        ),
        (("fsdp",), (4,), 8, "--mesh-shape 4 covers 4 devices"),
        (("fsdp",), (16,), 8, "--mesh-shape 16 covers 16 devices"),
        (("fsdp", "tensor"), (4, 2), 8, None),
        (("fsdp",), None, 8, None),
    ],
)
def test_mesh_shape_must_hold_the_devices(axes, shape, devices, bad):
    """These ran a job that raised in our own job.py, with an XLA001 hint."""
    opts = RuntimeOptions(mesh_axes=axes, mesh_shape=shape)
    problem = mesh_device_problem(opts, devices, "CPU devices (--cpu-devices)")
    assert problem is None if bad is None else problem.startswith(bad)
    env = {"cpu_devices": devices, "cpu_devices_from": "--cpu-devices"}
    if bad:
        with pytest.raises(OptionsError, match="the sizes must multiply to 8"):
            check_mesh(opts, env)
    else:
        check_mesh(opts, env)
    check_mesh(opts, {"cpu_devices": None})  # TPU: the count is known only once PJRT runs


def test_dcn_mesh_shape_must_divide_or_hold_the_devices():
    assert mesh_device_problem(RuntimeOptions(dcn_mesh_shape=(2,)), 8, "devices") is None
    assert "do not divide the 8 devices" in mesh_device_problem(
        RuntimeOptions(dcn_mesh_shape=(3,)), 8, "devices"
    )
    assert "covers 16 devices" in mesh_device_problem(
        RuntimeOptions(mesh_shape=(8,), dcn_mesh_shape=(2,)), 8, "devices"
    )


def test_checkpoint_dir_is_created_and_the_created_folders_removed(tmp_path):
    """--checkpoint-dir a/b left the empty folders it created."""
    target = tmp_path / "a" / "b"
    created = check_checkpoint_dir(str(target))
    assert created == [str(tmp_path / "a"), str(target)] and target.is_dir()
    remove_created(created)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "mine").mkdir()
    assert check_checkpoint_dir(str(tmp_path / "mine")) == []  # existing: never removed


def test_checkpoint_dir_that_is_a_file_or_unwritable_is_refused(tmp_path):
    """Both failed only after training, blamed on XLA003."""
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(OptionsError, match="is a file; it must be a folder"):
        check_checkpoint_dir(str(afile))
    with pytest.raises(OptionsError, match="is a file, so the folder cannot be created"):
        check_checkpoint_dir(str(afile / "sub"))
    if (
        os.geteuid() == 0
    ):  # root writes anywhere a mode allows nothing: use a file system that refuses
        if not os.path.isdir("/sys/kernel"):
            pytest.skip("no /sys to stand for an unwritable place")
        unwritable = "/sys/kernel/xla-lint-ckpt/sub"
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        unwritable = str(locked / "sub")
    with pytest.raises(OptionsError, match="is not a writable folder"):
        check_checkpoint_dir(unwritable)
    assert not os.path.exists(os.path.dirname(unwritable)) or os.path.dirname(unwritable).endswith(
        "locked"
    )


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    name = f"hard_edges_model_{os.getpid()}_{time.monotonic_ns()}"
    (tmp_path / f"{name}.py").write_text(
        "import torch\n"
        "value = 3\n"
        "def good():\n    return torch.nn.Linear(4, 4)\n"
        "def raises():\n    raise ValueError('bad width\\nsecond line')\n"
        "def not_a_module():\n    return {'w': 1}\n"
    )
    monkeypatch.chdir(tmp_path)
    yield name, torch
    sys.modules.pop(name, None)
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize(
    "fn,message",
    [
        (None, "--model nosuchmod_hard_edges:build: no module named 'nosuchmod_hard_edges'"),
        ("nosuch", "{mod}.nosuch does not exist"),
        ("value", "{mod}.value is not callable"),
        ("raises", "raises() raised ValueError: bad width"),
        ("not_a_module", "not_a_module() returned dict, not a torch.nn.Module"),
    ],
)
def test_model_builder_problems_are_usage_errors(user_modules, fn, message):
    """They failed after training as "FAIL sharding ... [XLA009, XLA002]: FSDPv2 needs a global mesh"."""
    from xla_lint.runtime.model import load_user_model

    mod, _ = user_modules
    spec = "nosuchmod_hard_edges:build" if fn is None else f"{mod}:{fn}"
    with pytest.raises(OptionsError) as info:
        load_user_model(spec, 0)
    assert message.format(mod=mod) in str(info.value) and "\n" not in str(info.value)


def test_model_builder_is_called_once_seeded(user_modules):
    from xla_lint.runtime.model import load_user_model

    mod, torch = user_modules
    a, b = load_user_model(f"{mod}:good", 7), load_user_model(f"{mod}:good", 7)
    assert isinstance(a, torch.nn.Module) and torch.equal(a.weight, b.weight)


# --- hints name a rule only when its pitfall is the cause --------------------------------------


@pytest.mark.parametrize(
    "stage,check",
    [("mesh", "mesh"), ("model", "sharding"), ("checkpoint", "checkpoint"), ("train", "training")],
)
def test_stage_errors_name_no_rule(stage, check):
    """A PermissionError in the checkpoint stage was blamed on XLA003 (torch.save), a mesh
    error on XLA001/XLA011, a model error on XLA009/XLA002."""
    rec = make_record()
    rec["errors"] = [
        {
            "stage": stage,
            "host": 0,
            "error": "PermissionError: /ckpt",
            "traceback": "Traceback\n  line\nPermissionError: /ckpt",
        }
    ]
    result = {r.name: r for r in run_all(context([rec]))}[check]
    assert result.status == "FAIL" and result.rules == []
    assert "XLA0" not in result.explanation


def test_a_crash_in_a_step_is_a_training_failure_and_says_where_the_traceback_is():
    """crash-at:3 was filed under convergence, and "the traceback is in the JSON report
    (errors)" was printed though no --json was given."""
    rec = make_record()
    rec["errors"] = [
        {
            "stage": "train",
            "host": 0,
            "step": 3,
            "error": "RuntimeError: boom",
            "traceback": "Traceback\nRuntimeError: boom",
        }
    ]
    results = {r.name: r for r in run_all(context([rec]))}
    assert results["training"].status == "FAIL" and results["convergence"].status == "SKIP"
    assert (
        results["training"].summary == "host 0 raised in step 3 (train stage): RuntimeError: boom"
    )
    assert "rerun with --json PATH" in results["training"].explanation
    assert "is in the JSON report" not in results["training"].explanation
    with_json = CheckContext(
        {**RuntimeOptions(steps=6).to_json(), "json_path": "out.json"},
        [rec],
        {"ok": True, "expected": 1, "joined": [0]},
    )
    training = {r.name: r for r in run_all(with_json)}["training"]
    assert 'the full traceback is in the JSON report (out.json, "errors")' in training.explanation


def test_a_one_step_run_skips_what_needs_more_steps_and_passes():
    rec = make_record()
    rec["steps"], rec["losses"], rec["timings"]["step_s_median"] = (
        rec["steps"][:1],
        rec["losses"][:1],
        None,
    )
    ctx = CheckContext(
        RuntimeOptions(steps=1).to_json(), [rec], {"ok": True, "expected": 1, "joined": [0]}
    )
    status = {r.name: r.status for r in run_all(ctx)}
    assert {n for n, s in status.items() if s == "SKIP"} == {
        "recompilation",
        "convergence",
        "throughput",
    }
    assert "FAIL" not in status.values()


def test_a_missing_host_is_not_blamed_on_xm_rendezvous():
    rv = {
        "ok": False,
        "expected": 2,
        "joined": [0],
        "missing": [1],
        "message": "host 1 of 2 did not join within 15 s",
    }
    result = {r.name: r for r in run_all(CheckContext(RuntimeOptions().to_json(), [], rv))}[
        "rendezvous"
    ]
    assert (
        result.status == "FAIL" and result.rules == [] and "xm.rendezvous" not in result.explanation
    )


# --- item 1: a dead host is named --------------------------------------------------------------


def test_deaths_are_described_with_signal_and_step():
    assert (
        how_it_ended(-9) == "died (signal 9, SIGKILL)" and how_it_ended(3) == "died (exit status 3)"
    )
    progress = {"stage": "train", "step": 3, "steps": 10}
    assert (
        describe_death(death(1, how_it_ended(-9), progress))
        == "host 1 died (signal 9, SIGKILL) in step 3 of 10 (train stage)"
    )
    assert describe_death(
        death(1, "never reached the gather (it died or hung)", progress, last_seen=True)
    ) == (
        "host 1 never reached the gather (it died or hung); it was last seen in step 3 of 10 (train stage)"
    )
    assert describe_death(death(0, how_it_ended(-15), {"stage": "rendezvous"})).endswith(
        "before joining the other hosts"
    )
    # joined, and the job's first stage (importing torch_xla) not begun: it did join
    assert describe_death(death(1, how_it_ended(-2), {"stage": "joined"})).endswith(
        "after joining the other hosts, before the job's first stage"
    )


def test_a_report_naming_a_dead_host_fails_rendezvous_and_skips_the_rest(tmp_path, capsys):
    rv = {
        "expected": 2,
        "joined": [0, 1],
        "missing": [],
        "source": "simulated",
        "coordinator": "127.0.0.1:1",
    }
    deaths = [
        death(1, how_it_ended(-9), {"stage": "train", "step": 2, "steps": 3}, detected_s=20.5)
    ]
    code = report_lost_hosts(
        RuntimeOptions(simulate_hosts=2, steps=3).to_json(),
        rv,
        deaths,
        {"cpu_devices": 4},
        21.0,
        str(tmp_path / "r.json"),
        note="the launcher stopped host 0, which was in step 3 of 3 (train stage)",
    )
    assert code == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("xla-lint runtime check: 4 CPU devices, 2 host(s) simulated")
    assert any(
        line.startswith(
            "FAIL  rendezvous     host 1 died (signal 9, SIGKILL) in step 2 of 3 (train stage); "
            "the launcher stopped host 0"
        )
        for line in out
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert (
        report["rendezvous"]["died"][0]["host"] == 1
        and report["hosts"]["died"] == report["rendezvous"]["died"]
    )
    checks = {c["name"]: c for c in report["checks"]}
    assert (
        checks["rendezvous"]["rules"] == []
        and "out-of-memory" in checks["rendezvous"]["explanation"]
    )
    assert {c["status"] for n, c in checks.items() if n != "rendezvous"} == {"SKIP"}
    assert (
        checks["training"]["summary"] == "not run: host 1 did not finish the run (see rendezvous)"
    )


def test_progress_file_records_stage_step_and_a_normal_exit(tmp_path):
    path = str(tmp_path / "p.json")
    p = Progress(1, 10, path)
    p.update("train", 4)
    assert read_progress(path) | {"pid": 0} == {
        "host": 1,
        "pid": 0,
        "stage": "train",
        "step": 4,
        "steps": 10,
    }
    p.finish(0)
    assert read_progress(path)["stage"] == "exit" and read_progress(path)["status"] == 0


class FakeStore:
    """The TCPStore calls the checker makes, in memory; ``broken`` makes every call fail."""

    def __init__(self):
        self.data, self.broken = {}, False

    def _ok(self):
        if self.broken:
            raise RuntimeError(
                "Broken pipe\nException raised from sendBytes ...\nframe #0: c10::Error"
            )

    def set(self, key, value):
        self._ok()
        self.data[key] = value.encode() if isinstance(value, str) else value

    def get(self, key):
        self._ok()
        return self.data[key]

    def check(self, keys):
        self._ok()
        return all(k in self.data for k in keys)

    def add(self, key, n):
        self._ok()
        self.data[key] = str(int(self.data.get(key, b"0")) + n).encode()
        return int(self.data[key])


def test_a_host_that_loses_host_0s_store_stops_naming_host_0_where_it_was_last_seen():
    """Host 1 trained on for 26 s after host 0 died, then printed a C++ stack."""
    store = FakeStore()
    host0 = Progress(0, 10)
    host0.attach(store, f"{KEY}progress/0", raise_on_loss=True)
    host0.update("train", 2)
    host1 = Progress(1, 10)
    host1.attach(store, f"{KEY}progress/1", raise_on_loss=True)
    host1.update("train", 3)
    store.broken = True
    with pytest.raises(CoordinatorLost) as info:
        host1.update("train", 4)
    (lost,) = info.value.deaths
    assert (
        describe_death(lost).startswith("host 0 stopped answering")
        and lost["step"] == 2
        and lost["last_seen"]
    )
    assert "frame #" not in str(info.value) and info.value.where == "in step 4 of 10 (train stage)"
    simulated = Progress(1, 10)  # simulated hosts leave the death to the launcher
    store.broken = False
    simulated.attach(store, f"{KEY}progress/1", raise_on_loss=False)
    store.broken = True
    simulated.update("train", 1)


def test_host_0_names_the_hosts_that_never_reached_the_gather_and_does_not_wait_for_them():
    """Host 0 waited 60 s in the status exchange for a host it knew was dead, and the
    report said "joined but never delivered a run record"."""
    store = FakeStore()
    store.set(f"{KEY}done/0", "1")
    store.set(f"{KEY}progress/1", json.dumps({"host": 1, "stage": "train", "step": 3, "steps": 10}))
    group = HostGroup(
        HostLayout(0, 2, ("127.0.0.1", 1), "cli"), RendezvousResult(expected=2), store, pg=object()
    )
    (lost,) = group.lost_hosts()
    assert (
        describe_death(lost)
        == "host 1 never reached the gather (it died or hung); it was last seen in step 3 of 10 (train stage)"
    )
    t0 = time.monotonic()
    assert group.share_status(1, timeout=30, lost=[1]) == 1
    assert time.monotonic() - t0 < 5


def test_hosts_started_with_different_options_are_named_at_the_rendezvous():
    """--steps 20 on one host and 10 on another were told "hosts trained different models ...
    seed identically"."""
    store = FakeStore()
    for i, steps in enumerate((20, 10, 10)):
        payload = {
            "hostname": "h",
            "pid": i,
            "num_hosts": 3,
            "claim": 1,
            "options": RuntimeOptions(
                steps=steps, host_index=i, num_hosts=3, coordinator="h:1"
            ).comparable(),
        }
        store.set(f"{KEY}join/{i}", json.dumps(payload))
        store.add(f"{KEY}claim/{i}", 1)
    verdict = HostGroup._host0_collect(
        store, 3, time.monotonic(), 5.0, RendezvousResult(expected=3)
    )
    assert verdict["message"] == (
        "the hosts were started with different options: --steps 20 on host 0 but 10 on hosts 1, 2 "
        "(start the same command on every host)"
    )
    assert "options" not in verdict["hosts"]["0"]
    assert (
        option_differences(
            {
                0: RuntimeOptions(json_path="a", timeout=5).comparable(),
                1: RuntimeOptions().comparable(),
            }
        )
        == []
    )


def test_host_0_keeps_its_store_until_the_others_read_a_failed_verdict(monkeypatch):
    """CI, loaded machine: host 0 printed the failed rendezvous and exited, closing its
    store before host 1 had read the verdict, so host 1 said "host 0 gave no rendezvous
    verdict" instead of the options that differ."""
    monkeypatch.setattr("xla_lint.runtime.hosts.VERDICT_READ_S", 2.0)
    store = FakeStore()

    def reader():
        time.sleep(0.3)
        store.add(f"{KEY}verdict_read", 1)

    threading.Thread(target=reader, daemon=True).start()
    t0 = time.monotonic()
    HostGroup._await_verdict_read(store, 1)
    waited = time.monotonic() - t0
    assert 0.25 < waited < 1.5  # returned once host 1 had read it, not at the limit
    t0 = time.monotonic()
    HostGroup._await_verdict_read(store, 2)  # a host that never acknowledges: bounded
    assert 1.9 < time.monotonic() - t0 < 3.0
    store.broken = True  # the others' store calls fail: no wait at all
    t0 = time.monotonic()
    HostGroup._await_verdict_read(store, 2)
    assert time.monotonic() - t0 < 0.5


# --- issue 27, item 4: the runtime checker's exits and waits ---------------------------------------


@pytest.mark.parametrize(
    "call,prefix",
    [
        ("from xla_lint.runtime.cli import main; sys.exit(main([]))", "python -m xla_lint.runtime"),
        ("from xla_lint.cli import main; main(['runtime'])", "xla-lint runtime"),
    ],
)
def test_a_missing_runtime_extra_is_named_like_every_other_usage_error(call, prefix):
    """It printed "error: the runtime checker needs ..." without the command's name, unlike
    every other error line of xla-lint ("xla-lint runtime: error: ...")."""
    import subprocess

    from xla_lint.runtime import RUNTIME_EXTRA_HINT

    code = f"import sys; sys.modules['torch'] = None; sys.modules['torch_xla'] = None; {call}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [f"{prefix}: error: {RUNTIME_EXTRA_HINT}"]


def test_a_runtime_that_cannot_start_is_named_like_every_other_error(monkeypatch, capsys):
    import xla_lint.runtime.cli as cli
    import xla_lint.runtime.runner as runner

    def no_tpu(opts):
        raise RuntimeError("TPU initialization failed: no libtpu\nsecond line")

    monkeypatch.setattr(cli, "runtime_available", lambda: True)
    monkeypatch.setattr(runner, "run", no_tpu)
    assert main(["--device", "tpu"], prog_name="xla-lint runtime") == 2
    assert capsys.readouterr().err.splitlines() == [
        "xla-lint runtime: error: the runtime could not start or finish on this machine: "
        "RuntimeError: TPU initialization failed: no libtpu"
    ]


def test_host_0_says_once_that_it_waits_for_the_other_hosts(capsys):
    """Host 0 printed nothing until --timeout ran out (120 s by default)."""
    store = FakeStore()
    store.set(f"{KEY}join/0", json.dumps({"hostname": "h", "pid": 0, "num_hosts": 3, "claim": 1}))
    store.add(f"{KEY}claim/0", 1)
    t0 = time.monotonic()
    verdict = HostGroup._host0_collect(store, 3, t0, 0.35, RendezvousResult(expected=3))
    assert verdict["missing"] == [1, 2] and time.monotonic() - t0 < 5
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["waiting up to 0.35 s for 3 hosts to join (joined: 0)"]
    for i in (1, 2):  # every host already there: no wait, no line
        store.set(f"{KEY}join/{i}", json.dumps({"hostname": "h", "pid": i, "num_hosts": 3}))
        store.add(f"{KEY}claim/{i}", 1)
    HostGroup._host0_collect(store, 3, time.monotonic(), 5.0, RendezvousResult(expected=3))
    assert capsys.readouterr().err == ""


def test_an_unreachable_coordinator_is_given_up_on_after_timeout_without_a_cpp_stack(capfd):
    """--timeout 15 took 32 s (torch's TCPStore client tried twice, 15 s each) and printed
    c10d's 40-frame C++ stack on the terminal."""
    pytest.importorskip("torch.distributed")
    import socket

    from xla_lint.runtime.hosts import RendezvousError

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(RendezvousError) as info:
        HostGroup.join(HostLayout(1, 2, ("127.0.0.1", port), "cli"), 2.0, 30.0)
    waited = time.monotonic() - t0
    assert 2.0 <= waited < 3.5, waited
    assert str(info.value).startswith(
        f"host 1 of 2 could not reach the coordinator 127.0.0.1:{port} (host 0) within 2 s"
    )
    captured = capfd.readouterr()  # file descriptors 1 and 2: what C++ would print
    assert captured.out == "" and captured.err == "", captured.err[:2000]


class HungStore(FakeStore):
    """A store whose server stopped answering: every call that reads an answer blocks."""

    def __init__(self, hang: bool = True):
        super().__init__()
        self.hang, self.release = hang, threading.Event()

    def check(self, keys):
        if self.hang:
            self.release.wait(60)
        return super().check(keys)

    def wait(self, keys, timeout):
        if self.hang:
            self.release.wait(60)


def test_a_store_that_stops_answering_is_given_up_on_and_names_host_0_as_hung():
    """torch's TCPStore client waits for host 0's answer with no time limit: a stopped
    host 0 hung host 1 forever (seen: 630 s, then killed)."""
    from datetime import timedelta

    from xla_lint.runtime.hosts import BoundedStore, StoreTimeout

    hung = HungStore()
    store = BoundedStore(hung, 0.3)
    store.set(f"{KEY}progress/1", "{}")  # calls that get their answer are passed through
    assert hung.data[f"{KEY}progress/1"] == b"{}"
    t0 = time.monotonic()
    with pytest.raises(StoreTimeout, match="did not answer a check within 0.3 s"):
        store.check([f"{KEY}progress/0"])
    assert time.monotonic() - t0 < 2
    with pytest.raises(StoreTimeout):  # lost: every later call fails at once
        store.get(f"{KEY}progress/0")
    slow = HungStore()
    t0 = time.monotonic()
    with pytest.raises(StoreTimeout, match="within 5.2 s"):  # a wait: its own timeout + 5 s
        BoundedStore(slow, 0.1).wait([f"{KEY}status"], timedelta(seconds=0.2))
    assert 5.0 < time.monotonic() - t0 < 7
    hung.release.set()
    slow.release.set()

    progress = Progress(1, 10)  # what host 1 reports when its progress write times out
    later = HungStore(hang=False)
    progress.attach(BoundedStore(later, 0.2), f"{KEY}progress/1", raise_on_loss=True)
    later.hang = True
    with pytest.raises(CoordinatorLost) as info:
        progress.update("train", 3)
    (lost,) = info.value.deaths
    assert describe_death(lost).startswith(
        "host 0 stopped answering (the host store it serves kept the connection but did not answer"
    )
    later.release.set()


def test_shards_that_do_not_divide_a_dimension_are_found():
    from xla_lint.runtime.spec import uneven_dims

    assert uneven_dims("{devices=[3,1]0,1,2}", (256, 64)) == [{"dim": 0, "size": 256, "shards": 3}]
    assert uneven_dims("{devices=[1,3]0,1,2}", (64, 256)) == [{"dim": 1, "size": 256, "shards": 3}]
    assert uneven_dims("{devices=[3]0,1,2}", (66,)) == []
    assert uneven_dims("{devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}", (6, 8)) == [
        {"dim": 0, "size": 6, "shards": 4}
    ]
    assert uneven_dims("{replicated}", (7,)) == [] and uneven_dims("", (7,)) == []


def test_a_checkpoint_of_unevenly_sharded_tensors_is_a_clear_failure_not_a_raw_exception():
    """--cpu-devices 3 failed the checkpoint check with "CheckpointException: CheckpointException
    ranks:dict_keys([0]) / Traceback ..." and nothing said that 3 does not divide 64."""
    rec = make_record()
    rec["checkpoint"].update(
        tensors=21,
        bytes=0,
        diff_before_load=0.0,
        mode="not written: no tensor the SPMD checkpoint planners can load",
        uneven=[
            {
                "name": "embed_tokens.weight",
                "shape": [256, 64],
                "sharding_spec": "{devices=[3,1]0,1,2}",
                "dims": [{"dim": 0, "size": 256, "shards": 3}],
            }
        ]
        * 21,
    )
    result = {r.name: r for r in run_all(context([rec]))}["checkpoint"]
    assert result.status == "FAIL"
    assert result.summary == (
        "host 0: 21 of 21 tensors have a sharded dimension their shards do not divide, e.g. "
        "embed_tokens.weight [256, 64]: dim 0 of 256 in 3 shards; torch_xla 2.9's SPMD checkpoint "
        "planners cannot load them"
    )
    assert "proves nothing" not in result.summary
    assert "'ellipsis' object is not iterable" in result.explanation
    assert "--cpu-devices 2, 4 or 8" in result.explanation


def test_an_interrupted_run_reports_the_checks_it_reached_and_marks_the_rest_not_run(
    tmp_path, capsys
):
    """Ctrl-C printed click's "Aborted!" and exited 1 ("a check failed"), with no report."""
    from xla_lint.runtime.report import report_interrupted

    rec = make_record()  # interrupted in step 3 of 6: the model was built, training not finished
    rec["steps"], rec["losses"] = rec["steps"][:2], rec["losses"][:2]
    rec["completed"] = ["environment", "mesh", "model"]
    rec["interrupted"] = {"stage": "train", "step": 3, "steps": 6}
    where = "in step 3 of 6 (train stage)"
    rv = {"ok": True, "expected": 1, "joined": [0], "missing": [], "source": "single"}
    code = report_interrupted(
        RuntimeOptions(steps=6).to_json(),
        rv,
        [rec],
        {"cpu_devices": 8},
        4.2,
        {"signal": "SIGINT", "where": where, "joined": True},
        str(tmp_path / "r.json"),
    )
    assert code == 130
    out = capsys.readouterr().out.splitlines()
    status = {
        line.split()[1]: line.split()[0] for line in out if line[:4] in ("PASS", "SKIP", "FAIL")
    }
    assert status == {
        "environment": "PASS",
        "rendezvous": "PASS",
        "mesh": "PASS",
        "sharding": "PASS",
        **dict.fromkeys(
            ("training", "recompilation", "consistency", "convergence", "checkpoint", "throughput"),
            "SKIP",
        ),
    }
    assert f"SKIP  training       not run: interrupted (Ctrl-C) {where}" in out
    assert out[-1] == "4 passed, 0 failed, 6 skipped in 4.2 s (exit 130)"
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["status"], report["exit_code"]) == ("interrupted", 130)
    assert report["interrupted"]["where"] == where

    # interrupted before the job: no record, nothing reached
    ctx = CheckContext(
        RuntimeOptions().to_json(), [None], rv, interrupted={"where": where, "joined": True}
    )
    results = {r.name: r for r in run_all(ctx)}
    assert results["environment"].summary == f"not run: interrupted (Ctrl-C) {where}"
    # --coordinator, host 0 interrupted: the other hosts' records were never gathered
    ctx = CheckContext(
        RuntimeOptions(num_hosts=2, host_index=0, coordinator="h:1").to_json(),
        [rec, None],
        {**rv, "expected": 2, "joined": [0, 1]},
        interrupted={"where": f"on host 0 {where}", "joined": True},
    )
    results = {r.name: r for r in run_all(ctx)}
    assert results["rendezvous"].status == "PASS"  # joined; the records were not gathered
    assert results["mesh"].summary == (
        f"not run: interrupted (Ctrl-C) on host 0 {where}; no run record from host(s) 1"
    )


def test_ctrl_c_before_the_run_can_report_exits_130_in_one_line(monkeypatch, capsys):
    """click printed "Aborted!" and the checker exited 1, the status of a failed check."""
    import xla_lint.runtime.cli as cli
    import xla_lint.runtime.runner as runner

    def interrupted(opts):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "runtime_available", lambda: True)
    monkeypatch.setattr(runner, "run", interrupted)
    assert main([], prog_name="xla-lint runtime") == 130
    assert capsys.readouterr().err.splitlines() == ["xla-lint runtime: interrupted"]
