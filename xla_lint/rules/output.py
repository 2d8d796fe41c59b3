"""Output that users see (or do not see) from a running job."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from ..analysis import apis
from ..analysis.context import find_arg, parse_expression
from ..analysis.seeds import replica_functions
from ..diagnostics import Severity
from ..program.facts import Fact
from ..rule import Invalid, PendingFix, Replacement, Rule, Valid


class PrintWithoutFlush(Rule):
    code = "XLA004"
    name = "print-without-flush"
    summary = "print() without flush= where the program's output can be lost."
    message = "`print` without `flush=True` in torch_xla code: the line may sit in a buffer and never appear"
    severity = Severity.WARNING
    fixable = True
    repl_quiet = True  # not run on `>>>` examples (xla_lint/linter.py, `repl_rules`)
    explanation = """\
## What it does
Flags `print(...)` calls without a `flush=` argument in modules that import torch_xla, in a
program whose standard output the tree shows is not a terminal, so that Python buffers it and a
process that dies loses it: a launcher of the tree (a shell script, a shell block of
the docs) runs the program

- with its output piped or redirected (`| tee log`, `2>&1 |`, `> log`), or under `nohup`;
- remotely: `ssh HOST CMD` without `-t`, `gcloud compute tpus tpu-vm ssh --worker=all
  --command=...` (a remote command has no terminal);
- as a job of a scheduler (a script with `#SBATCH`, `#PBS` or `#BSUB` lines);

or a Jupyter notebook starts replicas (`xmp.spawn`, `torch_xla.launch`) that run its functions:
the kernel's standard output, which the replicas inherit, is a pipe. The message names the
launcher's line. A program shows it with `xla-lint --show-programs --output-format json` (the fact
`unattended`).

Preview behaviour (reported only with `--preview`, or `preview = true`): where the loss is only
inferred, with no launcher in the tree to say where the output goes: the program starts replicas
(`xmp.spawn`, `torch_xla.launch`), initialises the `xla` process group, `torchrun` or
`accelerate launch --tpu` starts it, it is SPMD (on a pod it is usually started on every host
remotely), a library module no program of the tree reaches in a tree without scripts (its
programs are not in the tree), and a print followed in its function by `os._exit()` or
`os.abort()` (the fact `possibly_unattended`; the message names the reason).

Left alone: a single-process script run from a terminal; a module that only programs the tree
launches from a terminal reach; a module no program reaches beside scripts that never import it,
and a function that nothing in the tree calls or names (its name occurs only in its `def`; not a
method, not decorated): no launch of the tree runs them. Calls that pass `**kwargs` (they may
carry `flush`), prints to `sys.stderr`, which Python 3.9+ line-buffers even when redirected, a
local function or parameter named `print`, prints followed later in the same function (or module
body) by `sys.stdout.flush()`, prints followed in their block only by more prints and `sys.exit()`
(`exit()`, `quit()`, `raise SystemExit`), since the interpreter writes the buffer as it exits
(except in a replica that `xmp.spawn` starts: its pool worker catches the `SystemExit`,
`concurrent.futures.process` `_process_worker`, and lives on until the pool shuts down), the
handler of a `try` that imports torch_xla (`except ImportError:` runs where torch_xla is absent:
not XLA code), programs whose output is unbuffered (`python -u`, `PYTHONUNBUFFERED`, stdout
reconfigured) and tests (pytest captures their output). In a notebook, prints at a cell's top
level run in the kernel, whose output the notebook shows, and so do prints in a function that
no function the notebook launches names (a later cell's `run_test(...)` after `xmp.spawn`). Examples written as an interactive
session (`>>>` examples in docstrings, `pycon` blocks of Markdown or reStructuredText) are not
checked: typed at a prompt, each line's output shows at once.

## Why is this bad
Python's `sys.stdout` is line-buffered only when it is an interactive terminal; otherwise (a
pipe, a file) it is block-buffered, in blocks of several kilobytes
(https://docs.python.org/3/library/sys.html#sys.stdout). A process that is killed, hangs until
a watchdog kills it, or aborts inside the runtime's C++ code never writes that buffer: the last
lines it printed, often the ones that say where it stopped, are lost. `os._exit()` exits
"without ... flushing stdio buffers" (https://docs.python.org/3/library/os.html#os._exit).

Where stdout is a terminal, nothing is lost, replicas included (verified with torch_xla 2.9.0
under a pseudo-terminal, `PYTHONUNBUFFERED` unset): `xmp.spawn` and `torch_xla.launch` run the
replicas in a `concurrent.futures.ProcessPoolExecutor` with the `spawn` context
(`torch_xla/_internal/pjrt.py` `run_multiprocess`), whose children inherit the parent's
descriptors 0-2 (`multiprocessing.popen_spawn_posix` passes them to the child), so each replica's
`sys.stdout.line_buffering` is True and every printed line is written at once; torchrun's
workers inherit its standard output too (unless `--redirects`/`--tee`), and before `os._exit`
the complete lines were written already. That is why the inferred reasons are preview only.

Where stdout is a pipe or a file, the replicas are where this bites: when one replica dies
abruptly the pool terminates the others (`concurrent.futures.process` `terminate_broken` calls
`terminate()` on each), which then never write their buffers; a replica that raises leaves the
others waiting at the next collective until someone kills the job. Over ssh, a command runs
without a terminal unless `-t` is given, so the remote Python buffers its output; on a
multi-host SPMD pod one host's silence looks exactly like that host hanging.

## Example
```python
import torch_xla

def _mp_fn(index):
    print(f"replica {index} starting")  # lost if another replica crashes

torch_xla.launch(_mp_fn)  # run.sh: python train.py 2>&1 | tee train.log
```

## Use instead
```python
print(f"replica {index} starting", flush=True)
```
or run Python unbuffered (`python -u`, `PYTHONUNBUFFERED=1`) on every host, and use
`logging` with a handler that flushes. The fix adds `flush=True`.

## References
- https://docs.python.org/3/library/sys.html#sys.stdout
- https://docs.python.org/3/library/functions.html#print
- https://docs.python.org/3/using/cmdline.html#cmdoption-u
- https://docs.python.org/3/library/os.html#os._exit
"""
    valid = (
        Valid("import torch_xla\ndef f():\n    print('x', flush=True)\ntorch_xla.launch(f)\n"),
        Valid("print('no torch_xla here')\n"),
        Valid("import torch_xla\nprint(*args, **kwargs)\n"),
        Valid("import sys\nimport torch_xla\nprint('warning', file=sys.stderr)\n"),
        Valid("import torch_xla\ndef log(print):\n    print('x')\n"),
        # flushed by hand after it, in the same function (a progress bar's idiom, seen in real code)
        Valid(
            "import sys\nimport torch_xla\ndef progress(n):\n    for i in range(n):\n"
            "        print('\\r%d' % i, end=' ')\n        sys.stdout.flush()\n"
        ),
        # a plain single-process script: run from a terminal, each line is written at once
        Valid(
            "import torch_xla\nimport torch_xla.core.xla_model as xm\n\n"
            "def main():\n    print('loss', xm.xla_device())\n\n"
            "if __name__ == '__main__':\n    main()\n"
        ),
        # an error print before sys.exit, in a plain script: the exit writes the buffer
        Valid(
            "import sys\nimport torch_xla\ntry:\n    import model\nexcept ImportError as e:\n"
            "    print(f'cannot import: {e}')\n    sys.exit(1)\n"
        ),
        # in an SPMD program too: `sys.exit` writes the buffer as the interpreter exits
        Valid(
            "import sys\nimport torch_xla.runtime as xr\nxr.use_spmd()\nif not ok:\n"
            "    print('bad config')\n    print('see --help')\n    sys.exit(1)\n"
        ),
        # a library that only a plain single-process script reaches
        Valid(
            "import torch_xla\ndef report(step):\n    print('step', step)\n",
            files=(
                (
                    "main.py",
                    "import example\nif __name__ == '__main__':\n    example.report(1)\n",
                ),
            ),
        ),
        # a launcher that runs the program unbuffered, even piped
        Valid(
            "import torch_xla\nimport torch_xla.runtime as xr\nxr.use_spmd()\nprint('step')\n",
            files=(("run.sh", "#!/bin/bash\npython -u example.py | tee log\n"),),
        ),
        # replicas started from a terminal inherit it and line-buffer (preview behaviour only)
        Valid(
            "import torch_xla\ndef _mp_fn(index):\n    print('replica', index)\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n"
        ),
        # SPMD with no launcher in the tree, and a print before os._exit (preview behaviour only)
        Valid(
            "import os\nimport torch_xla.runtime as xr\nxr.use_spmd()\nprint('a')\n"
            "def stop():\n    print('bye')\n    os._exit(1)\n"
        ),
        # a library checked alone: its programs are not in the tree (preview behaviour only)
        Valid(
            "import torch_xla\ndef report(step):\n    print('step', step)\n",
            files=(("tools/other.py", "print('not an import of example')\n"),),
        ),
        # the handler of a failed torch_xla import runs where torch_xla is absent: not XLA code
        Valid(
            "try:\n    import torch_xla.core.xla_model as xm\n    DEVICE = xm.xla_device()\n"
            "except Exception:\n    print('Unable to use the XLA device')\n",
            files=(("run.sh", "#!/bin/bash\npython example.py | tee log\n"),),
        ),
    )
    invalid = (
        Invalid(  # a flush before the print, or in another function, writes nothing of it
            "import sys\nimport torch_xla\nsys.stdout.flush()\nprint('a')\n"
            "def f():\n    print('b')\ndef g():\n    sys.stdout.flush()\nf()\ng()\n",
            (4, 6),
            fixed="import sys\nimport torch_xla\nsys.stdout.flush()\nprint('a', flush=True)\n"
            "def f():\n    print('b', flush=True)\ndef g():\n    sys.stdout.flush()\nf()\ng()\n",
            files=(("run.sh", "#!/bin/bash\npython example.py > train.log\n"),),
        ),
        Invalid(  # the replicas that torch_xla.launch starts, their output piped by the launcher
            "import torch_xla\ndef _mp_fn(index):\n    print(\n        'replica',\n        index\n    )\n"
            "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            (3,),
            fixed="import torch_xla\ndef _mp_fn(index):\n    print(\n        'replica',\n"
            "        index, flush=True\n    )\nif __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n",
            files=(("run.sh", "#!/bin/bash\npython example.py 2>&1 | tee train.log\n"),),
        ),
        Invalid(  # a library reached by a program a scheduler's job runs; a function nobody names
            "import torch_xla\ndef report(step):\n    print('a',\n          'b')\n"
            "def unused_debug_dump(x):\n    print(x)\n",
            (3,),
            fixed="import torch_xla\ndef report(step):\n    print('a',\n          'b', flush=True)\n"
            "def unused_debug_dump(x):\n    print(x)\n",
            files=(
                (
                    "train.py",
                    "import torch_xla.distributed.xla_multiprocessing as xmp\nimport example\n"
                    "def _mp_fn(i):\n    example.report(i)\n"
                    "if __name__ == '__main__':\n    xmp.spawn(_mp_fn)\n",
                ),
                ("job.sh", "#!/bin/bash\n#SBATCH --nodes=1\npython train.py\n"),
            ),
        ),
        Invalid(  # a launcher of the tree pipes the program's output
            "import torch_xla\nif __name__ == '__main__':\n    x = (print('a'))\n",
            (3,),
            fixed="import torch_xla\nif __name__ == '__main__':\n    x = (print('a', flush=True))\n",
            files=(("run.sh", "#!/bin/bash\npython example.py 2>&1 | tee train.log\n"),),
        ),
        Invalid(  # run remotely on every host of a pod
            "import torch_xla.core.xla_model as xm\nif __name__ == '__main__':\n    print()\n",
            (3,),
            fixed="import torch_xla.core.xla_model as xm\nif __name__ == '__main__':\n"
            "    print(flush=True)\n",
            files=(
                (
                    "run.sh",
                    "gcloud compute tpus tpu-vm ssh my-tpu --worker=all "
                    "--command='python3 example.py'\n",
                ),
            ),
        ),
        Invalid(  # an SPMD program run under nohup
            "import torch_xla\nimport torch_xla.runtime as xr\nxr.use_spmd()\n"
            "print('a', file=log,)\n",
            (4,),
            fixed="import torch_xla\nimport torch_xla.runtime as xr\nxr.use_spmd()\n"
            "print('a', file=log, flush=True,)\n",
            files=(("run.sh", "#!/bin/bash\nnohup python example.py &\n"),),
        ),
        Invalid(  # os._exit ends the process without writing the buffer of redirected output
            "import os\nimport torch_xla\ndef main():\n    try:\n        run()\n"
            "    except RuntimeError as e:\n        print('failed:', e)\n        os._exit(1)\n"
            "if __name__ == '__main__':\n    main()\n",
            (7,),
            fixed="import os\nimport torch_xla\ndef main():\n    try:\n        run()\n"
            "    except RuntimeError as e:\n        print('failed:', e, flush=True)\n        os._exit(1)\n"
            "if __name__ == '__main__':\n    main()\n",
            files=(("run.sh", "#!/bin/bash\npython example.py > train.log\n"),),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.imports_torch_xla:
            return
        if find_arg(node, "flush") is not None or any(a.star == "**" for a in node.args):
            return
        target = find_arg(node, "file")
        if target is not None and "sys.stderr" in self.ctx.qnames(target.value):
            return  # stderr is line-buffered even when redirected (Python 3.9+)
        if not self.ctx.is_call_to(node, apis.PRINT):
            return
        function = next(iter(self.ctx.enclosing(cst.FunctionDef)), None)
        if self.ctx.notebook and function is None:
            return  # a cell's top level runs in the kernel, whose output the notebook shows
        if self.ctx.notebook and function is not None and self._in_kernel():
            return  # a function no launched replica reaches runs in the kernel too
        flushed, exits = _after(self.ctx, node, function)
        if flushed:
            return  # `sys.stdout.flush()` follows in the same function: the line is written
        # Silent in test files (pytest captures output) and in programs whose output is
        # unbuffered (`python -u`, PYTHONUNBUFFERED, stdout reconfigured). By default only where
        # the tree shows the output is no terminal (Fact.UNATTENDED: xla_lint/program/model.py);
        # where that is only inferred (Fact.POSSIBLY_UNATTENDED: replicas, torchrun, SPMD, a
        # library checked alone) or the print comes before os._exit, as preview behaviour.
        requires = [(Fact.UNBUFFERED, False), (Fact.TEST, False)]
        if not exits:
            requires.append((Fact.POSSIBLY_UNATTENDED, True))
            if self._exits_next():
                # `print(...); sys.exit(1)`: the exit writes the buffer, except in a replica of
                # `xmp.spawn`, whose pool worker catches SystemExit and lives on (see explanation)
                requires.append((Fact.SPAWN, True))
        self.report(
            node,
            self.message + ", and `os._exit` below ends the process without writing it"
            if exits
            else None,
            fix=PendingFix(
                "add `flush=True`", [Replacement(node, add_keyword(node, "flush", "True"))]
            ),
            requires=requires,
            stable_requires=[(Fact.UNATTENDED, True)],
            runs_in=self._plain_functions(),
        )

    def _in_kernel(self) -> bool:
        """The notebook launches replicas and the print's function is none that they may run
        (:func:`xla_lint.analysis.seeds.replica_functions`): its cell calls it in the kernel
        (SIIM-ISIC's `run_test` after `xmp.spawn`)."""
        replicas = replica_functions(self.ctx)
        return bool(replicas) and not any(
            type(n) is cst.FunctionDef and id(n) in replicas for n in self.ctx.stack
        )

    def _plain_functions(self) -> list[str]:
        """The names of the functions the print is in that only a call by name runs: not a
        method (a framework may call it by its name), not decorated (a decorator may register
        it), not a dunder. The engine drops the finding when the tree never names one of them
        (:meth:`xla_lint.program.model.ProgramModel.never_named`)."""
        stack = self.ctx.stack
        out = []
        for i, node in enumerate(stack):
            if type(node) is not cst.FunctionDef or node.decorators:
                continue
            name = node.name.value
            if name.startswith("__") and name.endswith("__"):
                continue
            if i >= 2 and type(stack[i - 2]) is cst.ClassDef:
                continue  # stack: ClassDef, IndentedBlock, FunctionDef
            out.append(name)
        return out

    def _exits_next(self) -> bool:
        """Whether the statements after the print's, in its block, are only more prints and then
        ``sys.exit(...)``/``exit()``/``quit()``/``raise SystemExit``: the interpreter's exit
        writes what was printed, as it flushes ``sys.stdout``."""
        ctx = self.ctx
        line = next(iter(ctx.enclosing(cst.SimpleStatementLine)), None)
        if line is None:
            return False
        block = next(iter(ctx.enclosing(cst.IndentedBlock, cst.Module)), None)
        body: Sequence[cst.CSTNode] = (
            block.body if isinstance(block, (cst.IndentedBlock, cst.Module)) else ()
        )
        if line not in body:
            return False
        for statement in body[body.index(line) + 1 :]:
            if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
                return False
            small = statement.body[0]
            if isinstance(small, cst.Raise):
                exc = small.exc.func if isinstance(small.exc, cst.Call) else small.exc
                return exc is not None and "builtins.SystemExit" in ctx.qnames(exc)
            if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
                return False
            names = ctx.qnames(small.value.func)
            if not names.isdisjoint(_NORMAL_EXITS):
                return True
            if apis.PRINT not in names:
                return False
        return False


_NORMAL_EXITS = frozenset({"sys.exit", "builtins.exit", "builtins.quit"})
_FLUSH_TYPES = frozenset({cst.Call, cst.FunctionDef})
_EXITS = frozenset({"os._exit", "os.abort"})  # end the process without writing stdio buffers


def _after(ctx, call: cst.Call, function: cst.FunctionDef | None) -> tuple[bool, bool]:
    """Whether a ``sys.stdout.flush()`` call, and whether an ``os._exit()``/``os.abort()`` call,
    comes after ``call`` in the body of ``function`` (the module, for None), outside nested
    functions of its own: the first writes out what the print wrote, as ``flush=True`` would
    have; the second ends the process without writing it."""
    index, flushes, exits = ctx.memo("xla_lint.rules.output.flushes", lambda: _flushes(ctx))
    i = index.get(id(call))
    if i is None:
        return False, False
    owner = id(function) if function is not None else None
    return (
        any(j > i and o == owner for j, o in flushes),
        any(j > i and o == owner for j, o in exits),
    )


def _flushes(
    ctx,
) -> tuple[dict[int, int], list[tuple[int, int | None]], list[tuple[int, int | None]]]:
    """The flat index of every call, and each ``sys.stdout.flush()`` call's and each
    ``os._exit()``/``os.abort()`` call's index with the id of the function whose body it is
    directly in (None: the module)."""
    flat = ctx.flat
    index: dict[int, int] = {}
    flushes: list[tuple[int, int | None]] = []
    exits: list[tuple[int, int | None]] = []
    functions: list[tuple[int, int]] = []  # (end of subtree, id) of the open functions
    for i in flat.of_types(_FLUSH_TYPES):
        while functions and functions[-1][0] <= i:
            functions.pop()
        node = flat.nodes[i]
        if type(node) is cst.FunctionDef:
            functions.append((flat.ends[i], id(node)))
            continue
        index[id(node)] = i
        assert isinstance(node, cst.Call)
        names = ctx.qnames(node.func)
        if "sys.stdout.flush" in names:
            flushes.append((i, functions[-1][1] if functions else None))
        elif not names.isdisjoint(_EXITS):
            exits.append((i, functions[-1][1] if functions else None))
    return index, flushes, exits


def add_keyword(call: cst.Call, keyword: str, value: str) -> cst.Call:
    """``call`` with ``keyword=value`` appended, keeping a trailing comma where there was one."""
    new = cst.Arg(
        keyword=cst.Name(keyword),
        value=parse_expression(value),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    args = list(call.args)
    if args:
        last = args[-1]
        # The new argument goes right after the last one's value: it takes over the last
        # argument's trailing comma and the whitespace (a newline before `)`) that followed it.
        new = new.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
    return call.with_changes(args=[*args, new])
