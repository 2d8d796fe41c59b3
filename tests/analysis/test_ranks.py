"""xla_lint.analysis.ranks: the identity a value carries and which tests split the replicas,
asked from inside the traversal as rules ask (``ident(x)`` -> an Identity or None, ``guard(x)``
-> the guard's Identity or None, ``rtest(x)`` -> a bool)."""

from __future__ import annotations

import libcst as cst

from xla_lint.analysis import ranks
from xla_lint.analysis.context import Dispatcher, FileContext
from xla_lint.analysis.walk import walk

HEAD = (
    "import os\nimport torch.distributed as dist\nimport torch_xla\n"
    "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
)


def ask(source: str) -> list:
    ctx = FileContext(cst.parse_module(source))
    out: list = []

    class Probe:
        def visit_Call(self, node: cst.Call) -> None:
            if not isinstance(node.func, cst.Name) or not node.args:
                return
            arg = node.args[0].value
            if node.func.value == "ident":
                out.append(ranks.identity_of(ctx, arg))
            elif node.func.value == "guard":
                out.append(ranks.replica_guard(ctx, arg))
            elif node.func.value == "rtest":
                out.append(ranks.is_replica_test(ctx, arg))

    walk(ctx.module, Dispatcher(ctx, [Probe()]))
    return out


def kinds(found: list) -> list:
    return [None if i is None else (i.kind, i.source, i.variable) for i in found]


def test_identities_from_torch_xla_distributed_and_the_environment():
    got = ask(
        HEAD + "def f():\n"
        "    ident(xr.global_ordinal())\n    ident(xm.get_local_ordinal())\n"
        "    ident(xr.process_index())\n    ident(xr.world_size())\n    ident(xr.process_count())\n"
        "    ident(dist.get_rank())\n    ident(dist.get_world_size())\n"
        "    ident(int(os.environ['LOCAL_RANK']))\n    ident(os.environ.get('RANK', 0))\n"
        "    ident(int(os.getenv('WORLD_SIZE', '1')))\n    ident(os.environ.get('HOME', 0))\n"
        "    ident(xr.device_type())\n"
    )
    assert kinds(got) == [
        (ranks.GLOBAL_ORDINAL, ranks.TORCH_XLA, None),
        (ranks.LOCAL_ORDINAL, ranks.TORCH_XLA, None),
        (ranks.PROCESS_INDEX, ranks.TORCH_XLA, None),
        (ranks.WORLD_SIZE, ranks.TORCH_XLA, None),
        (ranks.PROCESS_COUNT, ranks.TORCH_XLA, None),
        (ranks.GLOBAL_ORDINAL, ranks.DISTRIBUTED, None),
        (ranks.WORLD_SIZE, ranks.DISTRIBUTED, None),
        (ranks.LOCAL_ORDINAL, ranks.ENVIRONMENT, "LOCAL_RANK"),
        (ranks.GLOBAL_ORDINAL, ranks.ENVIRONMENT, "RANK"),
        (ranks.WORLD_SIZE, ranks.ENVIRONMENT, "WORLD_SIZE"),
        None,
        None,
    ]
    assert got[7].default is None  # os.environ[...]: no default
    assert isinstance(got[8].default, cst.Integer) and got[8].default.value == "0"
    assert got[8].from_launcher and not got[0].from_launcher


def test_followed_through_names_attributes_options_and_the_launch_index():
    got = ask(
        HEAD + "import argparse\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--local_rank', type=int, default=-1)\nargs = parser.parse_args()\n"
        "class T:\n    def __init__(self):\n        self.rank = dist.get_rank()\n"
        "        self.mixed = xr.global_ordinal()\n"
        "    def g(self):\n        self.mixed = xr.world_size()\n        ident(self.rank)\n"
        "        ident(self.mixed)\n"
        "def _mp_fn(index, flags):\n    rank = int(os.environ.get('RANK', 0))\n"
        "    ident(rank)\n    ident(index)\n    ident(flags)\n    ident(args.local_rank)\n"
        "def other(index):\n    ident(index)\n"
        "torch_xla.launch(_mp_fn, args=(1,))\n"
    )
    assert kinds(got) == [
        (ranks.GLOBAL_ORDINAL, ranks.DISTRIBUTED, None),
        None,  # assigned an ordinal in one method and a world size in another
        (ranks.GLOBAL_ORDINAL, ranks.ENVIRONMENT, "RANK"),
        (ranks.GLOBAL_ORDINAL, ranks.LAUNCH, "index"),
        None,  # the second parameter of the launched function
        (ranks.LOCAL_ORDINAL, ranks.OPTION, "local_rank"),
        None,  # `index` of a function nobody launches
    ]


def test_replica_guards():
    got = ask(
        HEAD + "IS_ROOT = xr.global_ordinal() == 0\n"
        "def f(is_main):\n    is_root = xm.is_master_ordinal()\n    rank = xr.process_index()\n"
        "    worker = not xm.is_master_ordinal(local=False)\n    r = dist.get_rank()\n"
        "    world = dist.get_world_size()\n    env = int(os.environ.get('LOCAL_RANK', -1))\n"
        "    rtest(is_root)\n    rtest(not is_root)\n    rtest(IS_ROOT)\n    rtest(rank == 0)\n"
        "    rtest(worker)\n    rtest(is_main)\n    rtest(xm.get_ordinal() != 0)\n    rtest(rank)\n"
        "    rtest(r == 0)\n    rtest(dist.get_rank() != 0)\n    rtest(world > 1)\n"
        "    rtest(env in (-1, 0))\n    guard(env in (-1, 0))\n"
        "    is_root = True\n    rtest(is_root)\n"
    )
    assert got[:-2] + got[-1:] == [
        True,
        True,
        True,
        True,
        True,
        False,
        True,
        False,  # `if rank:` is not read as a guard
        True,
        True,
        False,  # the world size is the same on every replica
        False,  # an environment rank splits the replicas only when the launcher sets it
        False,
    ]
    env_guard = got[-2]
    assert env_guard is not None and env_guard.from_launcher and env_guard.variable == "LOCAL_RANK"


def test_self_attribute_flags():
    got = ask(
        HEAD
        + "class T:\n    def __init__(self):\n        self.is_master = xm.is_master_ordinal()\n"
        "        self.local_rank = int(os.environ.get('LOCAL_RANK', 0))\n"
        "    def g(self):\n        guard(self.is_master)\n        guard(self.local_rank == 0)\n"
        "        guard(self.other == 0)\n"
    )
    assert [None if g is None else (g.kind, g.source) for g in got] == [
        (ranks.MASTER, ranks.TORCH_XLA),
        (ranks.LOCAL_ORDINAL, ranks.ENVIRONMENT),
        None,
    ]


def test_torch_xla_getenv_as_is_an_environment_read():
    got = ask(
        "import torch_xla.utils.utils as xu\n"
        "ident(xu.getenv_as('LOCAL_RANK', int, 0))\nident(xu.getenv_as('WORLD_SIZE', int))\n"
        "ident(xu.getenv_as('XLA_FLAGS', str, ''))\n"
    )
    assert kinds(got) == [
        (ranks.LOCAL_ORDINAL, ranks.ENVIRONMENT, "LOCAL_RANK"),
        (ranks.WORLD_SIZE, ranks.ENVIRONMENT, "WORLD_SIZE"),
        None,
    ]
    assert got[0].default is not None and got[1].default is None


def test_attributes_assigned_from_each_other_are_judged_once_each(monkeypatch):
    """Each of ten attributes is assigned from the next in four methods: following every path
    costs 4**8 definitions per question (a real 1,500-line trainer of this shape took minutes);
    judged once per attribute, site and depth it is a few hundred. The answers do not change."""
    chain = "".join(
        f"    def m{j}(self):\n"
        + "".join(f"        self.a{i} = self.a{i + 1}\n" for i in range(10))
        + "        self.a10 = xr.global_ordinal()\n"
        for j in range(4)
    )
    source = HEAD + "class T:\n" + chain + "    def run(self):\n        guard(self.a0 == 0)\n"
    looked_up = []
    real = ranks.file_values

    def counting(ctx):
        looked_up.append(1)
        return real(ctx)

    monkeypatch.setattr(ranks, "file_values", counting)
    (found,) = ask(source)
    assert found is None  # a0 is 8 assignments away from the ordinal: past the depth bound
    assert len(looked_up) < 2_000, len(looked_up)
    short = (
        HEAD + "class T:\n" + chain.replace("self.a3 = self.a4", "self.a3 = xr.global_ordinal()")
    )
    (found,) = ask(short + "    def run(self):\n        guard(self.a0 == 0)\n")
    assert found is not None and found.kind == ranks.GLOBAL_ORDINAL


def test_whether_a_rank_is_set_is_no_replica_guard():
    # timm-face train.py: `is_ddp = os.environ.get("RANK") is not None` holds on every rank
    got = ask(
        HEAD + "def f():\n    is_ddp = os.environ.get('RANK') is not None\n"
        "    rank = dist.get_rank()\n"
        "    guard(is_ddp)\n    guard(os.environ.get('LOCAL_RANK') is None)\n"
        "    guard(rank is not None)\n    rtest(rank is not None and rank == 0)\n"
    )
    assert got[:3] == [None, None, None] and got[3] is True


def tried(source: str) -> list[bool]:
    """``tried("RANK")``: whether that point runs only when torch_xla failed to give the kind
    of the variable (:func:`ranks.torch_xla_tried_first`)."""
    ctx = FileContext(cst.parse_module(source))
    out: list[bool] = []

    class Probe:
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "tried":
                variable = cst.ensure_type(node.args[0].value, cst.SimpleString).evaluated_value
                kind = ranks.ENV_IDENTITIES[str(variable)]
                out.append(ranks.torch_xla_tried_first(ctx, kind))

    walk(ctx.module, Dispatcher(ctx, [Probe()]))
    return out


def test_torch_xla_tried_first_in_a_handler_or_after_a_returning_try():
    got = tried(
        HEAD + "def rank():\n"
        "    if xr is not None:\n        try:\n            return int(xr.global_ordinal())\n"
        "        except Exception:\n            pass\n"
        "    try:\n        return int(xm.get_ordinal())\n"
        "    except Exception:\n        tried('RANK')\n        tried('WORLD_SIZE')\n"
        "def local():\n    try:\n        r = xm.get_local_ordinal()\n"
        "    except Exception:\n        tried('LOCAL_RANK')\n        tried('RANK')\n"
        "    tried('LOCAL_RANK')\n"
    )
    # RANK after `return xr.global_ordinal()`; not WORLD_SIZE (another kind); LOCAL_RANK in the
    # handler of a try that reads it; not RANK there; not after a try that does not return.
    assert got == [True, False, True, False, False]


def test_torch_xla_tried_first_not_after_a_removed_api_or_an_if_on_something_else():
    got = tried(
        HEAD + "def rank(args):\n"
        "    try:\n        return int(xm.get_ordinal())\n    except Exception:\n        pass\n"
        "    tried('RANK')\n"
        "    try:\n        world = xm.xrt_world_size()\n    except AttributeError:\n"
        "        tried('WORLD_SIZE')\n"
        "    if args.xla:\n        try:\n            return xr.global_ordinal()\n"
        "        except Exception:\n            pass\n"
        "    tried('RANK')\n"
        "    def inner():\n        tried('RANK')\n"
    )
    # xm.get_ordinal / xm.xrt_world_size are gone in 2.9.0 (AttributeError: the fallback runs);
    # `if args.xla:` may skip the try; a nested function is not after the outer try.
    assert got == [False, False, False, False]
