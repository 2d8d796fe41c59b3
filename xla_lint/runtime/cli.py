"""Command line of the runtime checker: click options -> :class:`RuntimeOptions` -> exit code.

``python -m xla_lint.runtime [OPTIONS]`` calls :func:`main`. The click command object
is :data:`command`, so the top-level ``xla-lint`` group can mount it as
``xla-lint runtime`` (``group.add_command(command, name="runtime")``); the command ends
with ``ctx.exit(status)`` so the status survives either way.

Exit status: 0 every check passed, 1 a check failed (or a host broke), 2 usage error
(including a missing runtime extra), 130 interrupted (Ctrl-C; the partial report is
printed). This module imports neither torch nor torch_xla.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

import click

from . import RUNTIME_EXTRA_HINT
from .options import OPTIMIZERS, Injection, OptionsError, RuntimeOptions, parse_betas, parse_shape
from .progress import EXIT_INTERRUPTED

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
#: counts that must be at least 1; click refuses others with one line naming the option and the range
POSITIVE = click.IntRange(min=1)
#: seconds (and the learning rate): greater than 0
SECONDS = click.FloatRange(min=0, min_open=True)
PROG_NAME = "python -m xla_lint.runtime"


def runtime_available() -> bool:
    """True when torch and torch_xla can be imported (checked without importing them)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("torch", "torch_xla"))
    except (ImportError, ValueError):  # a broken or blocked installation
        return False


def _shape(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        return parse_shape(value, f"--{param.name.replace('_', '-')}")
    except OptionsError as exc:
        raise click.BadParameter(str(exc)) from None


def _betas(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[float, float] | None:
    if value is None:
        return None
    try:
        return parse_betas(value)
    except OptionsError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command(context_settings=CONTEXT_SETTINGS, name="runtime")
@click.option(
    "--mesh",
    "mesh",
    default="fsdp",
    show_default=True,
    help="Mesh axes: fsdp | fsdp,tensor | data.",
)
@click.option(
    "--mesh-shape",
    callback=_shape,
    help="Axis sizes, e.g. 4,2 (default: all devices on the first axis).",
)
@click.option(
    "--dcn-mesh-shape",
    callback=_shape,
    help="Multi-slice: DCN axis sizes; builds xs.HybridMesh(ici_mesh_shape=, dcn_mesh_shape=, axis_names=).",
)
@click.option("--dim", type=POSITIVE, default=64, show_default=True, help="Model width.")
@click.option(
    "--layers",
    type=POSITIVE,
    default=2,
    show_default=True,
    help="Decoder layers (each wrapped in FSDPv2).",
)
@click.option("--heads", type=POSITIVE, default=4, show_default=True, help="Attention heads.")
@click.option("--vocab", type=POSITIVE, default=256, show_default=True, help="Vocabulary size.")
@click.option(
    "--seq-len", type=POSITIVE, default=32, show_default=True, help="Tokens per sequence."
)
@click.option(
    "--model",
    "model",
    default=None,
    help="module:function building your own nn.Module instead of the decoder.",
)
@click.option(
    "--input-shape",
    callback=_shape,
    help="With --model: shape of ONE example, without the batch dimension.",
)
@click.option(
    "--input-dtype",
    type=click.Choice(["float32", "bfloat16", "int64"]),
    default="float32",
    show_default=True,
    help="With --model: input dtype (int64 draws ids below --vocab).",
)
@click.option("--steps", type=POSITIVE, default=10, show_default=True, help="Training steps.")
@click.option(
    "--warmup-steps",
    type=click.IntRange(min=0),
    default=None,
    help="Steps allowed to compile, below --steps [default: min(2, --steps)].",
)
@click.option(
    "--batch-per-device",
    type=POSITIVE,
    default=2,
    show_default=True,
    help="Examples per device; global batch = this x global devices.",
)
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="adamw", show_default=True)
@click.option("--lr", type=SECONDS, default=3e-3, show_default=True, help="Learning rate.")
@click.option(
    "--betas",
    callback=_betas,
    help="Adam betas B1,B2, each in [0, 1) [default: the optimizer's, 0.9,0.999].",
)
@click.option(
    "--weight-decay",
    type=float,
    default=None,
    help="Weight decay, at least 0 [default: the optimizer's, AdamW 0.01, SGD 0].",
)
@click.option(
    "--fast-forward-step",
    "fast_forward",
    is_flag=True,
    help="After the warm-up, set the Adam step counter a few steps below the one whose bias correction rounds to 1.0 (XLA204), so that late recompile shows up in seconds.",
)
@click.option(
    "--compile-cache",
    default=None,
    metavar="DIR",
    help="Call xr.initialize_cache(DIR) before any graph, then check that a second process loads the training graphs from it.",
)
@click.option("--seed", default=0, show_default=True)
@click.option(
    "--shard-threshold-bytes",
    type=click.IntRange(min=0),
    default=1024,
    show_default=True,
    help="Parameters of at least this many bytes must be sharded along fsdp.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "tpu", "cuda"]),
    default="auto",
    show_default=True,
    help="auto: PJRT_DEVICE if set, TPU if found, else CPU.",
)
@click.option(
    "--cpu-devices",
    type=POSITIVE,
    default=None,
    help="Virtual CPU devices when running on CPU [default: $CPU_NUM_DEVICES or 8].",
)
@click.option(
    "--coordinator", default=None, help="HOST:PORT of host 0 (multi-host without xla://)."
)
@click.option(
    "--num-hosts", type=POSITIVE, default=None, help="Number of hosts (with --coordinator)."
)
@click.option(
    "--host-index",
    type=click.IntRange(min=0),
    default=None,
    help="This host's index, 0..num-hosts-1.",
)
@click.option(
    "--simulate-hosts",
    type=POSITIVE,
    default=None,
    help="Start N local processes on 127.0.0.1 acting as N hosts.",
)
@click.option(
    "--timeout",
    type=SECONDS,
    default=120.0,
    show_default=True,
    help="Seconds every host has to join.",
)
@click.option(
    "--job-timeout",
    type=SECONDS,
    default=900.0,
    show_default=True,
    help="Seconds a joined host may keep the others waiting (at the gather, or host 0's store not answering) before they give up on it.",
)
@click.option(
    "--checkpoint-dir",
    default=None,
    help="Where the checkpoint round trip writes [default: a temporary directory]; missing folders are created and removed afterwards. Shared storage on a pod.",
)
@click.option(
    "--json", "json_path", default=None, help="Write the full report as JSON to this path."
)
@click.option("--quiet", is_flag=True, help="Print no text report (use with --json).")
@click.option(
    "--bare",
    is_flag=True,
    help="Benchmark helper: run the same training loop without the checker, print timings as JSON.",
)
@click.option(
    "--inject",
    multiple=True,
    help="Developer fault injection: replicated-params | shape-change-at:STEP | diverge-seeds | missing-host:H | crash-at:STEP | sigkill:H@STEP.",
)
@click.option("--simulated-host", "simulated", is_flag=True, hidden=True)
@click.pass_context
def command(
    ctx: click.Context,
    mesh: str,
    simulated: bool,
    inject: tuple[str, ...],
    **kw: Any,  # the other options, each converted by click to its RuntimeOptions field's type
) -> None:
    """Train a small FSDPv2 job on every device and check the SPMD setup: environment,
    rendezvous, mesh, sharding, training, recompilation, consistency, convergence,
    checkpoint and throughput. Exit 0 when every check passes, 1 when one fails or a host
    dies, 2 on a usage error (options are checked before any device work), 130 when
    interrupted (Ctrl-C: the checks reached so far are reported, the rest marked not run)."""
    try:
        opts = RuntimeOptions(
            mesh_axes=tuple(a.strip() for a in mesh.split(",") if a.strip()),
            simulated=simulated,
            inject=tuple(Injection.parse(i) for i in inject),
            **kw,
        )
    except OptionsError as exc:
        raise click.UsageError(str(exc), ctx) from None
    json_path = kw.get("json_path")
    if json_path:
        folder = os.path.dirname(os.path.abspath(str(json_path)))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise click.UsageError(
                f"--json {json_path}: folder {folder} does not exist or is not writable", ctx
            )
    if not runtime_available():  # named like the usage errors main() prints
        click.echo(f"{ctx.command_path}: error: {RUNTIME_EXTRA_HINT}", err=True)
        ctx.exit(2)
    try:
        from .runner import run
    except KeyboardInterrupt:
        click.echo(f"{ctx.command_path}: interrupted", err=True)
        ctx.exit(EXIT_INTERRUPTED)

    try:
        status = run(opts)
    except OptionsError as exc:
        raise click.UsageError(str(exc), ctx) from None
    except KeyboardInterrupt:  # Ctrl-C before the run could report (run() prints a partial report)
        if not simulated:  # a simulated host leaves that to its launcher
            click.echo(f"{ctx.command_path}: interrupted", err=True)
        ctx.exit(EXIT_INTERRUPTED)
    except (click.exceptions.Exit, click.ClickException, SystemExit):
        raise
    except (
        Exception
    ) as exc:  # e.g. --device tpu on a machine without libtpu: one line, no traceback
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        click.echo(
            f"{ctx.command_path}: error: the runtime could not start or finish on this machine: "
            f"{type(exc).__name__}: {first}",
            err=True,
        )
        ctx.exit(2 if kw.get("device") not in (None, "auto", "cpu") else 1)
    ctx.exit(status)


def main(argv: list[str] | None = None, prog_name: str = PROG_NAME) -> int:
    """Run the checker with ``argv`` (default ``sys.argv[1:]``) and return the exit status
    instead of exiting: 0 pass, 1 a check failed, 2 usage error, 130 interrupted. ``prog_name`` is the
    command named in usage errors (``xla-lint runtime`` when called from xla_lint/cli.py)."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        result = command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:  # one line, as every other usage error of xla-lint
        where = exc.ctx.command_path if exc.ctx is not None else prog_name
        click.echo(f"{prog_name}: error: {exc.format_message()} (see {where} --help)", err=True)
        return 2
    except click.ClickException as exc:
        exc.show()
        return 2
    except (
        click.Abort
    ):  # click's form of Ctrl-C (it printed "Aborted!" and exited 1, "a check failed")
        click.echo(f"{prog_name}: interrupted", err=True)
        return EXIT_INTERRUPTED
    return int(result) if isinstance(result, int) else 0
