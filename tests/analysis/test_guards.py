"""xla_lint/analysis/guards.py: version-guarded rules are silent in code that does not run on the target version.

Each source marks the lines that must be reported with ``# reported``; every other line must not be.
"""

from __future__ import annotations

import textwrap

import pytest

from xla_lint.analysis import guards
from xla_lint.analysis.guards import compare_target, name_truth, parse_version, requirement_truth
from xla_lint.linter import lint_text
from xla_lint.rules.deprecated import (
    DeprecatedEnvVar,
    DeprecatedMarkStep,
    DeprecatedXlaDevice,
    PreferLaunch,
    RemovedApi,
)

RULES = (RemovedApi, DeprecatedMarkStep)


def reported(src: str, target=(2, 9), rules=RULES) -> list[int]:
    diagnostics, _ = lint_text(src, "example.py", list(rules), target_version=target)
    assert not [d for d in diagnostics if d.code == "XLA000"], diagnostics
    return sorted({d.line for d in diagnostics})


def marked(src: str) -> list[int]:
    return [i for i, line in enumerate(src.splitlines(), 1) if "# reported" in line]


def check(src: str, target=(2, 9), rules=RULES) -> None:
    src = textwrap.dedent(src)
    assert reported(src, target, rules) == marked(src)


# -- version tests in if / elif / else --------------------------------------------------


def test_packaging_version_comparison_if_else():
    check("""\
        import torch_xla
        import torch_xla.core.xla_model as xm
        from packaging import version
        if version.parse(torch_xla.__version__) >= version.parse("2.1"):
            n = xm.xrt_world_size()  # reported
        else:
            n = xm.xrt_world_size()
        if version.parse(torch_xla.__version__) < version.parse("2.5"):
            import torch_xla.experimental.xla_sharding as xs
        elif version.parse(torch_xla.__version__) < version.parse("2.7"):
            xm.mark_step()
        else:
            xm.mark_step()  # reported
    """)


def test_other_spellings_of_the_version():
    check("""\
        import torch
        import packaging.version
        from distutils.version import LooseVersion
        from torch_xla import __version__ as xla_version
        import torch_xla.core.xla_model as xm
        if LooseVersion(torch.__version__) < LooseVersion("2.0"):
            xm.mark_step()
        if packaging.version.Version(torch.__version__.split("+")[0]).release < (2, 0):
            xm.mark_step()
        if xla_version < "2.1":
            xm.mark_step()
        if torch.__version__.startswith("1."):
            xm.mark_step()
        if torch.__version__.startswith("2."):
            xm.mark_step()  # reported
        V = packaging.version.parse(torch.__version__)
        if V.major == 2 and V.minor < 3:
            xm.mark_step()
        if V.major == 2 and V.minor >= 3:
            xm.mark_step()  # reported
    """)


def test_unrelated_tests_are_unknown():
    check("""\
        import sys
        import torch_xla.core.xla_model as xm
        if sys.version_info < (3, 8):
            xm.mark_step()  # reported
        if verbose:
            xm.mark_step()  # reported
        else:
            xm.mark_step()  # reported
        if "2.1" < "2.0":
            xm.mark_step()  # reported
    """)


def test_the_target_version_decides():
    src = textwrap.dedent("""\
        import torch_xla
        import torch_xla.core.xla_model as xm
        if torch_xla.__version__ >= "2.5":
            pass
        else:
            xm.mark_step()
    """)
    assert reported(src, (2, 9)) == []
    assert reported(src, (2, 4)) == [6]


def test_same_minor_release_only_decides_ge_and_lt():
    check("""\
        import torch_xla
        import torch_xla.core.xla_model as xm
        if torch_xla.__version__ >= "2.9":
            xm.mark_step()  # reported
        if torch_xla.__version__ < "2.9.0":
            xm.mark_step()
        if torch_xla.__version__ == "2.9":
            xm.mark_step()  # reported
        if torch_xla.__version__ >= "2.9.1":
            xm.mark_step()  # reported
    """)


def test_conditional_expression():
    check("""\
        import torch
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr
        n = xm.get_ordinal() if torch.__version__ < "2.1" else xr.global_ordinal()
        m = xr.global_ordinal() if torch.__version__ >= "2.1" else xm.get_ordinal()
        k = xm.get_ordinal() if torch.__version__ >= "2.1" else 0  # reported
        j = xm.get_ordinal() if flag else 0  # reported
    """)


# -- names --------------------------------------------------------------------------


def test_module_constants_from_comparisons_and_requirements():
    check("""\
        import operator
        import torch_xla
        import torch_xla.core.xla_model as xm
        from lightning_utilities.core.imports import RequirementCache, compare_version
        from packaging.version import Version
        _XLA_GE_2_1 = RequirementCache("torch_xla>=2.1")
        _TORCH_OLD = compare_version("torch", operator.lt, "2.0")
        XLA_VERSION = Version(torch_xla.__version__)
        TORCH_29 = RequirementCache("torch>=2.9.0,<2.10.0")
        def f():
            if not _XLA_GE_2_1:
                xm.mark_step()
            if _TORCH_OLD:
                xm.mark_step()
            if XLA_VERSION < Version("2.0"):
                xm.mark_step()
            if TORCH_29:
                xm.mark_step()  # reported
            else:
                xm.mark_step()
    """)


def test_helper_functions_of_accelerate_and_transformers():
    check("""\
        import torch_xla.core.xla_model as xm
        from accelerate.utils import is_torch_version, is_torch_xla_available
        from transformers.utils import is_torch_greater_or_equal
        if is_torch_version("<", "2.0"):
            xm.mark_step()
        if not is_torch_greater_or_equal("2.1"):
            xm.mark_step()
        if is_torch_xla_available():
            xm.mark_step()  # reported
        else:
            xm.mark_step()  # no torch_xla here: runs_on_xla, not a version test
    """)


def test_a_module_helper_that_returns_a_version_test_is_that_test():
    """neuronx-distributed parallel_layers/utils.py: `if requires_init_pg_override():` guards
    the torch 2.0 PJRT import; a helper with arguments, more statements or a rebinding is not read."""
    check("""\
        import torch
        import torch_xla.core.xla_model as xm
        def requires_init_pg_override():
            \"\"\"Torch 2.0 needs the PJRT import.\"\"\"
            return torch.__version__.startswith("2.0")
        def is_new():
            return not requires_init_pg_override()
        def unknown(flag):
            return flag
        def init():
            if requires_init_pg_override():
                import torch_xla.experimental.pjrt as pjrt
            if not is_new():
                xm.mark_step()
            if unknown(True):
                xm.mark_step()  # reported
    """)


def test_branches_for_other_platforms_are_not_xla_code():
    check("""\
        import torch
        import torch_xla.core.xla_model as xm
        if is_sagemaker_dp_enabled():
            xm.mark_step()
        elif torch.cuda.is_available() and cfg.fast:
            xm.mark_step()
        elif not is_torch_xla_available():
            xm.mark_step()
        else:
            xm.mark_step()  # reported
        if not torch.cuda.is_available():
            xm.mark_step()  # reported
        if torch.distributed.is_available():
            xm.mark_step()  # reported
        step = xm.mark_step() if _XLA_AVAILABLE else None  # reported
    """)


def test_device_strings_and_xla_flags_mark_the_branches_of_other_platforms():
    """ronghanghu/moco_v3_tpu: `if is_xla(): ...; return`, then NCCL set-up with prints that
    XLA004 flagged as torch_xla code."""
    check("""\
        import torch_xla.core.xla_model as xm
        def init(cfg, device):
            if cfg.device == "xla":
                xm.mark_step()  # reported
            else:
                xm.mark_step()
            if device.type != "xla":
                xm.mark_step()
            if "cuda" == cfg.device:
                xm.mark_step()
            if cfg.device == "cuda" and cfg.fast:
                xm.mark_step()
            if args.use_tpu:
                xm.mark_step()  # reported
            else:
                xm.mark_step()
            if cfg.device == mode:
                xm.mark_step()  # reported
            if is_xla():
                xm.mark_step()  # reported
                return
            xm.mark_step()
            for step in range(3):
                xm.mark_step()
        def train(cfg):
            if not is_xla():
                return
            xm.mark_step()  # reported
        def spmd(cfg):
            if is_xla():
                log("xla")
            xm.mark_step()  # reported
        for batch in loader:
            if USE_TPU:
                continue
            xm.mark_step()
        if HAS_XLA:
            xm.mark_step()  # reported
        else:
            xm.mark_step()
        xm.mark_step()  # reported
    """)


def test_a_private_method_called_only_from_other_platforms_branches_is_not_xla_code():
    """Beomi/pytorch-tpu-transformers trainer.py: save_model sends XLA to _save_tpu and calls
    _save only in the elif/else branches; XLA003 flagged torch.save in _save."""
    check("""\
        import torch_xla.core.xla_model as xm
        class Trainer:
            def save_model(self, d):
                if is_torch_xla_available():
                    self._save_tpu(d)
                elif is_sagemaker_mp_enabled():
                    self._save(d)
                else:
                    self._save(d)
                self._both(d)
                self._callback_only = self._passed
            def _save_tpu(self, d):
                xm.mark_step()  # reported
            def _save(self, d):
                xm.mark_step()
            def _both(self, d):
                xm.mark_step()  # reported
            def _passed(self, d):
                xm.mark_step()  # reported
            def public(self, d):
                xm.mark_step()  # reported
        def _helper():
            xm.mark_step()
        def _unused():
            xm.mark_step()  # reported
        if torch.cuda.is_available():
            _helper()
    """)


def test_imported_flags_are_read_from_their_conventional_name():
    check("""\
        import torch_xla.core.xla_model as xm
        from mylib.imports import _XLA_GREATER_EQUAL_2_1, _TORCH_LESS_THAN_2_5, _XLA_AVAILABLE, _TORCH_EQUAL_2_9
        if not _XLA_GREATER_EQUAL_2_1:
            xm.mark_step()
        if _TORCH_LESS_THAN_2_5:
            xm.mark_step()
        if _XLA_AVAILABLE:
            xm.mark_step()  # reported
        if _TORCH_EQUAL_2_9:
            pass
        else:
            xm.mark_step()
    """)


def test_names_whose_value_is_not_one_plain_assignment_are_unknown():
    check("""\
        import torch
        import torch_xla.core.xla_model as xm
        new = torch.__version__ >= "2.1"
        if cond:
            new = False
        old = torch.__version__ < "2.0"
        for old in flags:
            pass
        gone = torch.__version__ < "2.0"
        def reset():
            global gone
            gone = True
        if not new:
            xm.mark_step()  # reported
        if old:
            xm.mark_step()  # reported
        if gone:
            xm.mark_step()  # reported
    """)


def test_local_names_in_functions():
    check("""\
        import torch
        import torch_xla.core.xla_model as xm
        NEW = True
        def f():
            NEW = torch.__version__ >= "2.1"
            if not NEW:
                xm.mark_step()
        def g():
            if not NEW:
                xm.mark_step()  # reported
    """)


def test_three_valued_logic():
    check("""\
        import torch_xla.core.xla_model as xm
        from mylib import _XLA_GREATER_EQUAL_2_1
        if _XLA_GREATER_EQUAL_2_1 and flag:
            xm.mark_step()  # reported
        if not _XLA_GREATER_EQUAL_2_1 and flag:
            xm.mark_step()
        if flag or _XLA_GREATER_EQUAL_2_1:
            pass
        else:
            xm.mark_step()
        if flag or not _XLA_GREATER_EQUAL_2_1:
            xm.mark_step()  # reported
    """)


# -- early exits --------------------------------------------------------------------------


def test_early_exit_after_a_true_test():
    check("""\
        import torch_xla.core.xla_model as xm
        from lightning_utilities.core.imports import RequirementCache
        _XLA_GREATER_EQUAL_2_1 = RequirementCache("torch_xla>=2.1")
        def world_size():
            if _XLA_GREATER_EQUAL_2_1:
                from torch_xla import runtime as xr
                return xr.world_size()
            return xm.xrt_world_size()
        def ordinal():
            if _XLA_GREATER_EQUAL_2_1:
                from torch_xla import runtime as xr
                n = xr.global_ordinal()
            return xm.get_ordinal()  # reported
        def rank():
            if flag:
                return 0
            return xm.get_ordinal()  # reported
        def pjrt():
            if not _XLA_GREATER_EQUAL_2_1:
                raise RuntimeError("old")
            else:
                raise RuntimeError("new")
            xm.mark_step()
    """)


def test_statements_after_an_unconditional_exit_never_run():
    """projectt rqvae/utils/dist.py: `raise ValueError(...)` then a removed API in the same block."""
    check("""\
        import torch_xla
        import torch_xla.core.xla_model as xm
        def f(flag):
            if flag:
                xm.mark_step()  # reported
            else:
                raise ValueError('Single processed is currently not supported')
                n = xm.mark_step()
            xm.mark_step()  # reported
        def g(flag):
            return 1
            xm.mark_step()
        def h(flag):
            if flag:
                return 1
            else:
                raise ValueError
            xm.mark_step()
        for batch in data:
            continue
            xm.mark_step()
        xm.mark_step()  # reported
    """)


def test_early_exit_through_nested_branches_and_elif_chains():
    check("""\
        import torch_xla
        import torch_xla.core.xla_model as xm
        def f():
            if torch_xla.__version__ >= "2.5":
                if flag:
                    return 1
                else:
                    raise ValueError
            xm.mark_step()
        def g():
            if torch_xla.__version__ < "2.1":
                pass
            elif flag:
                return 1
            else:
                return 2
            xm.mark_step()
        def h():
            if torch_xla.__version__ >= "2.5":
                if flag:
                    return 1
            xm.mark_step()  # reported
        for batch in data:
            if torch_xla.__version__ >= "2.5": continue
            xm.mark_step()
        xm.mark_step()  # reported
    """)


# -- hasattr / getattr -----------------------------------------------------------------------


def test_hasattr_of_removed_and_present_torch_xla_names():
    check("""\
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr
        if hasattr(xr, "world_size"):
            n = xr.world_size()
        else:
            n = xm.xrt_world_size()
        if not hasattr(xm, "get_ordinal"):
            r = xr.global_ordinal()
        else:
            r = xm.get_ordinal()
        if getattr(xm, "get_ordinal", None) is None:
            xm.mark_step()  # reported
        else:
            xm.mark_step()
        if hasattr(model, "world_size"):
            pass
        else:
            n = xm.xrt_world_size()  # reported
    """)


def test_hasattr_depends_on_the_target_version():
    src = textwrap.dedent("""\
        import torch_xla.core.xla_model as xm
        if hasattr(xm, "xrt_world_size"):
            pass
        else:
            xm.mark_step()
    """)
    assert reported(src, (2, 9)) == [5]
    assert reported(src, (2, 6)) == []


# -- try / except ---------------------------------------------------------------------------


def test_import_error_handlers_and_protected_try_bodies():
    # A removed API in a `try` body raises into the handler: the program works (XLA013 silent);
    # a deprecated API there still runs on the target and is reported (XLA302).
    check("""\
        import torch_xla.core.xla_model as xm
        try:
            xm.xrt_world_size()
            xm.mark_step()  # reported
        except AttributeError:
            xm.mark_step()
        try:
            import torch_xla.experimental.pjrt as pjrt
            xm.xrt_world_size()  # reported
        except (ValueError, ModuleNotFoundError):
            xm.mark_step()
        except RuntimeError:
            xm.mark_step()  # reported
        try:
            xm.mark_step()  # reported
        except Exception:
            xm.mark_step()  # reported
        try:
            xm.mark_step()  # reported
        except:
            xm.mark_step()  # reported
        else:
            xm.mark_step()  # reported
    """)


def test_functions_defined_in_a_try_body_run_outside_it():
    check("""\
        import torch_xla.core.xla_model as xm
        try:
            import torch_xla.runtime as xr
            class Env:
                rank = xm.xrt_world_size()
                def world(self):
                    return xm.xrt_world_size()  # reported
            step = lambda: xm.xrt_world_size()  # reported
        except AttributeError:
            def world():
                return xm.mark_step()
    """)


def test_a_local_class_named_import_error_is_not_the_builtin():
    check("""\
        import torch_xla.core.xla_model as xm
        class ImportError(Exception):
            pass
        try:
            xm.mark_step()  # reported
        except ImportError:
            xm.mark_step()  # reported
    """)


# -- the rules ---------------------------------------------------------------------------------


def test_every_removed_or_deprecated_api_rule_is_version_guarded():
    src = textwrap.dedent("""\
        import os
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.xla_multiprocessing as xmp
        if torch_xla.__version__ < "2.0":
            os.environ["XLA_USE_BF16"] = "1"
            device = xm.xla_device()
            xm.mark_step()
            n = xm.xrt_world_size()
            xmp.spawn(fn, args=())
    """)
    rules = (RemovedApi, DeprecatedXlaDevice, DeprecatedMarkStep, PreferLaunch, DeprecatedEnvVar)
    assert all(rule.version_guarded for rule in rules)
    assert reported(src, rules=rules) == []
    assert reported(src.replace('< "2.0"', '>= "2.0"'), rules=rules) == [6, 7, 8, 9, 10]


def test_the_analysis_runs_once_per_file(monkeypatch):
    built = []
    original = guards._Guards.__init__

    def counting(self, ctx):
        built.append(ctx)
        original(self, ctx)

    monkeypatch.setattr(guards._Guards, "__init__", counting)
    src = "import torch_xla.core.xla_model as xm\n" + "xm.mark_step()\n" * 5
    assert reported(src) == [2, 3, 4, 5, 6]
    assert len(built) == 1


# -- the version arithmetic -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, literal, expected",
    [
        (">=", "2.1", True),
        ("<", "2.1", False),
        (">", "2.10", False),
        ("<", "3.0", True),
        ("!=", "2.4", True),
        ("==", "2.4.0", False),
        (">=", "2.9", True),
        ("<", "2.9.0", False),
        ("==", "2.9", None),
        (">", "2.9", None),
        ("<=", "2.9", None),
        (">=", "2.9.1", None),
        (">=", "2.9.0rc1", None),
        (">=", "1.13.0a0", True),
    ],
)
def test_compare_target(op, literal, expected):
    assert compare_target((2, 9), op, parse_version(literal)) is expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("torch_xla>=2.1", True),
        ("torch-xla >= 2.1", True),
        ("torch>=2.9.0,<2.10.0", True),
        ("torch<2.0", False),
        ("torch_xla", True),
        ("torch_xla==2.9.*", True),
        ("torch==2.4.*", False),
        ("torch>=2.9.1", None),
        ("lightning>=2.0", None),
        ("torch>=2.0; python_version>'3.8'", None),
        ("torch_xla[tpu]>=2.5", True),
    ],
)
def test_requirement_truth(text, expected):
    assert requirement_truth((2, 9), text) is expected


@pytest.mark.parametrize(
    "name, expected",
    [
        ("_XLA_GREATER_EQUAL_2_1", True),
        ("_TORCH_GREATER_EQUAL_2_11", False),
        ("_XLA_LESS_THAN_2_5", False),
        ("_TORCH_LESS_EQUAL_2_6", False),
        ("_TORCH_EQUAL_2_9", True),
        ("_TORCH_EQUAL_2_4_0", False),
        ("_TORCH_XLA_GREATER_EQUAL_2_1", True),
        ("_TORCHMETRICS_GREATER_EQUAL_1_0_0", None),
        ("_PYTHON_GREATER_EQUAL_3_10_0", None),
        ("_XLA_AVAILABLE", None),
        ("xla_greater_equal_2_1", None),
    ],
)
def test_name_truth(name, expected):
    assert name_truth((2, 9), name) is expected


@pytest.mark.parametrize(
    "test,dead",
    [
        ("False", True),
        ("0", True),
        ("debug and False", True),
        ("not True", True),
        ("False or None", True),
        ("debug", False),
        ("debug or False", False),
        ("True", False),
    ],
)
def test_code_under_a_constant_false_test_reports_nothing_and_sets_no_fact(tmp_path, test, dead):
    from helpers import lint_tree, write_tree

    src = (
        f"import torch\nimport torch_xla.runtime as xr\nimport torch_xla.core.xla_model as xm\nxr.use_spmd()\n"
        f"if {test}:\n    model = torch.nn.parallel.DistributedDataParallel(model)\n"
    )
    write_tree(tmp_path, {"train.py": src})
    result, _, _ = lint_tree(tmp_path, select=["XLA008"], entry_points={"train.py": "single"})
    assert [d.line for d in result.diagnostics] == ([] if dead else [6])


def test_where_code_runs_costs_one_pass_per_block_not_one_per_finding(monkeypatch):
    # Each finding asked whether an `if is_xla(): ...; return` came before it in its block by
    # scanning the block again: 10,000 findings in one block cost 10,000 scans (7 s).
    from xla_lint.analysis import guards
    from xla_lint.linter import lint_text
    from xla_lint.rules import rule_by_code

    calls = []
    real = guards._branch_platforms
    monkeypatch.setattr(guards, "_branch_platforms", lambda test: calls.append(1) or real(test))
    n = 400
    code = "import torch_xla\nimport torch_xla.core.xla_model as xm\n"
    code += "if flag:\n    pass\nd = xm.xla_device()\n" * n  # n `if`s before the last finding
    diags, _ = lint_text(code, "a.py", [rule_by_code("XLA301")])
    assert len(diags) == n
    assert len(calls) < 4 * n  # one look at each statement's `if`, plus each node's own branches


# -- the version split into numbers -----------------------------------------------------


def test_tuple_of_split_version_numbers():
    check("""\
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm
        if tuple(map(int, torch.__version__.split(".")[:2])) >= tuple(map(int, "2.1".split("."))):
            n = xm.xrt_world_size()  # reported
        else:
            n = xm.xrt_world_size()
        if tuple(map(int, torch_xla.__version__.split(".")[:2])) < (2, 1):
            n = xm.xrt_world_size()
        if tuple(map(int, torch.__version__.split(".")[:2])) >= (2, 9):
            n = xm.xrt_world_size()  # reported
        if tuple(map(int, torch.__version__.split(".")[:2])) > (2, 9):
            n = xm.xrt_world_size()
        if int(torch.__version__.split(".")[0]) < 2:
            n = xm.xrt_world_size()
        if int(torch.__version__.split(".")[1]) >= 5:
            n = xm.xrt_world_size()  # reported
        # a longer slice leaves the patch release unknown; strings do not compare with ints
        if tuple(map(int, torch.__version__.split(".")[:3])) >= (2, 9, 1):
            n = xm.xrt_world_size()  # reported
        if tuple(torch.__version__.split(".")[:2]) < (2, 1):
            n = xm.xrt_world_size()  # reported
        if torch.__version__ >= "2.1":
            n = xm.xrt_world_size()  # reported
        else:
            n = xm.xrt_world_size()
    """)


def test_tuple_of_split_version_numbers_honours_the_target():
    src = textwrap.dedent("""\
        import torch
        import torch_xla.core.xla_model as xm
        if tuple(map(int, torch.__version__.split(".")[:2])) >= (2, 8):
            n = 1
        else:
            n = xm.xrt_world_size()
    """)
    assert reported(src, target=(2, 7)) == [6]
    assert reported(src, target=(2, 9)) == []
