"""LoaderFlows: every file's device-loader flow joined and closed, tested on plain facts."""

from __future__ import annotations

from xla_lint.diagnostics import Diagnostic
from xla_lint.program.facts import FileFacts
from xla_lint.program.flow import LoaderFlows
from xla_lint.program.model import ProgramModel


def _facts(
    module: str, flows: dict[str, list[str]], functions=(), makes=False, calls=(), **kw
) -> FileFacts:
    """The facts of a parsed torch_xla file: ``calls`` are the functions it calls."""
    return FileFacts(
        module=module,
        flows=flows,
        flow_functions=frozenset(functions),
        flow_calls=frozenset(calls),
        makes_device_loader=makes,
        **kw,
    )


def _flows(files: dict[str, FileFacts]) -> LoaderFlows:
    return LoaderFlows(files, {path: f.references for path, f in files.items()})


def test_a_loader_passed_to_a_slot_reaches_its_parameter_by_position_or_keyword():
    files = {
        "train.py": _facts(
            "train",
            {"loop.run_epoch#2": ["loader"], "loop.evaluate#data": ["loader"]},
            calls=["loop.run_epoch", "loop.evaluate", "loop.other"],
        ),
        "loop.py": _facts("loop", {}, ["loop.run_epoch", "loop.evaluate", "loop.other"]),
    }
    flows = _flows(files)
    assert flows.may_be_loader(["loop.run_epoch#2:loader"], False)
    assert flows.may_be_loader(["loop.evaluate#0:data"], False)
    assert not flows.may_be_loader(["loop.run_epoch#1:opt"], True)
    assert not flows.may_be_loader(["loop.other#0:loader"], True)  # called, never with a loader


def test_forwarding_through_two_functions_and_a_return_closes_transitively():
    files = {
        "train.py": _facts(
            "train", {"outer.outer#1": ["ret:data.get_loader"]}, calls=["outer.outer"]
        ),
        "data.py": _facts("data", {"ret:data.get_loader": ["loader"]}, ["data.get_loader"]),
        "outer.py": _facts("outer", {"inner.inner#1": ["outer.outer#1:batches"]}, ["outer.outer"]),
        "inner.py": _facts("inner", {}, ["inner.inner"]),
    }
    flows = _flows(files)
    assert flows.may_be_loader(["inner.inner#1:loader"], False)
    assert flows.may_be_loader(["ret:data.get_loader"], False)
    assert not flows.may_be_loader(["inner.inner#0:model"], False)


def test_a_re_exported_name_is_matched_by_its_last_name():
    files = {
        "train.py": _facts("train", {"pkg.run_epoch#0": ["loader"]}, calls=["pkg.run_epoch"]),
        "pkg/loop.py": _facts("pkg.loop", {}, ["pkg.loop.run_epoch"]),
    }
    flows = _flows(files)
    assert flows.may_be_loader(["pkg.loop.run_epoch#0:loader"], False)


def test_methods_are_matched_by_attribute_name():
    files = {
        "train.py": _facts("train", {"*.fit#0": ["loader"]}, references={"fit", "evaluate"}),
        "trainer.py": _facts("trainer", {}, ["*.fit", "*.evaluate"]),
    }
    flows = _flows(files)
    assert flows.may_be_loader(["*.fit#0:loader"], False)
    assert not flows.may_be_loader(["*.evaluate#0:loader"], True)


def test_unknown_values_count_only_in_a_program_that_makes_a_loader():
    files = {
        "lib.py": _facts(
            "lib",
            {"lib.inner#0": ["lib.outer#0:loader"]},
            ["lib.outer", "lib.inner", "lib.star"],
            calls=["lib.inner"],
        ),
        "run.py": _facts("run", {"lib.star#*": ["?"]}, calls=["lib.star"]),
    }
    flows = _flows(files)  # nobody calls `outer`
    for key in ("lib.outer#0:loader", "lib.inner#0:loader", "lib.star#0:loader"):
        assert flows.may_be_loader([key], True), key
        assert not flows.may_be_loader([key], False), key


def test_callers_are_calls_of_that_function_not_a_method_or_a_plain_file_naming_it():
    files = {
        "lib.py": _facts("lib", {}, ["lib.train", "lib.evaluate", "lib.fit"]),
        # `trainer.train()` is a method call: no caller of the function lib.train.
        "run.py": _facts("run", {}, calls=["lib.fit", "lib.evaluate"], references={"train", "fit"}),
        # A file that does not import torch_xla names `evaluate`: what it passes is not seen.
        "plain.py": FileFacts(module="plain", references={"evaluate"}),
    }
    flows = _flows(files)
    assert flows.may_be_loader(["lib.train#0:loader"], True)
    assert flows.may_be_loader(["lib.evaluate#0:loader"], True)
    assert not flows.may_be_loader(["lib.fit#0:loader"], True)  # called, never with a loader


def test_the_program_model_asks_the_programs_of_the_file():
    # lib.py is run by main.py, which makes a device loader: its uncalled function's parameter
    # may be one. other.py's program makes none: its parameter cannot be.
    files = {
        "main.py": _facts("main", {}, makes=True, entry=True, imports=frozenset({"lib"})),
        "lib.py": _facts("lib", {}, ["lib.run"]),
        "other.py": _facts("other", {}, ["other.run"], entry=True),
    }
    model = ProgramModel(files)
    assert model.may_be_loader("lib.py", ("lib.run#0:loader",))
    assert not model.may_be_loader("other.py", ("other.run#0:loader",))


def test_file_facts_and_diagnostics_round_trip_the_flow():
    facts = _facts("train", {"loop.run_epoch#2": ["loader"]}, ["train.main"], makes=True)
    back = FileFacts.from_json(facts.to_json())
    assert back.flows == facts.flows
    assert back.flow_functions == facts.flow_functions
    assert back.makes_device_loader
    old = facts.to_json()
    assert back.flow_calls == facts.flow_calls
    for key in ("flows", "flow_functions", "flow_calls", "makes_device_loader"):
        del old[key]
    assert FileFacts.from_json(old).flows == {}  # facts cached before the flow existed
    assert FileFacts.from_json(old).flow_calls is None
    d = Diagnostic("XLA203", "n", "m", "loop.py", 6, 5, 6, 9, unless=("loop.run_epoch#2:loader",))
    data = {**d.to_json(), "unless": list(d.unless)}
    assert Diagnostic.from_json(data) == d
    assert "unless" not in d.to_json()  # the public JSON shape is unchanged


# -- functions that run inside one step of a loop ---------------------------------------------
def test_a_closure_returned_by_a_factory_runs_in_the_callers_device_loader_loop():
    files = {
        "train.py": _facts(
            "train",
            {"run:batch": ["ret:fns.make"], "body:train.run": ["fns.make"]},
            ["train.run"],
            makes=True,
        ),
        "fns.py": _facts(
            "fns",
            {"ret:fns.make": ["fn:fns.train"], "body:fns.train": ["fns.helper"]},
            ["fns.make", "fns.train", "fns.helper", "fns.other"],
        ),
    }
    flows = _flows(files)
    assert flows.stepped == {"fns.train", "fns.helper"}  # transitively through what train calls
    assert flows.batched == flows.stepped
    assert flows.may_be_loader(["batched:fns.train"], False)
    assert flows.may_be_loader(["stepped:fns.helper"], False)
    assert not flows.may_be_loader(["stepped:fns.other"], True)  # no step loop calls it
    assert not flows.may_be_loader(["stepped:fns.make"], True)  # called outside the loop


def test_a_syncing_loop_steps_but_does_not_batch_and_a_parameter_loop_needs_a_loader():
    files = {
        "train.py": _facts(
            "train",
            {
                "run:sync": ["train.epoch"],
                "run:batch=loop.run#0:batches": ["loop.step"],
                "run:batch=loop.run#1:model": ["loop.never"],
                "loop.run#0": ["loader"],
            },
            ["train.epoch"],
            calls=["loop.run"],
        ),
        "loop.py": _facts("loop", {}, ["loop.run", "loop.step", "loop.never"]),
    }
    flows = _flows(files)
    assert flows.in_step("stepped:train.epoch") and not flows.in_step("batched:train.epoch")
    assert flows.in_step("batched:loop.step")  # loop.run's first parameter is a loader
    assert not flows.in_step("stepped:loop.never")  # no caller passes a loader to `model`
    assert not flows.in_step("stepped:loop.run")
