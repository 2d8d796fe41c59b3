"""Launchers: shell scripts and the shell blocks of docs that run the tree's Python files.

``export XLA_USE_SPMD=1`` then ``python train.py`` in ``run.sh`` makes ``train.py`` an SPMD
program even though its code never calls ``use_spmd()`` (torch_xla 2.9 still reads the
variable: ``torch_xla/runtime.py`` ``is_spmd()``/``use_spmd()`` and ``torch_xla/torch_xla.py``
through ``torch_xla/utils/utils.py`` ``check_env_flag``, see :func:`spmd_flag_on`). A launcher
can also make a program one process per device (``torchrun``) or unbuffered (``python -u``,
``PYTHONUNBUFFERED`` set to a non-empty string, unless ``python -E``/``-I`` ignores it).

What is read: ``*.sh``/``*.bash`` files of at most :data:`MAX_LAUNCHER_BYTES` (1 MB; a larger
"launcher" is data and is skipped), the fenced blocks of ``*.md``/``*.rst`` pages marked
``bash``, ``sh``, ``shell``, ``console`` or ``zsh`` and ``.. code-block::`` blocks of those
languages, and ``pyproject.toml`` ``[project.scripts]``. Nothing is run.

How a script is read, as bash would, without running or expanding anything:

- Lines are split into simple commands at ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines; a
  trailing ``\\`` joins lines, a quote left open continues on the next lines (up to 30),
  prompts (``$ ``, ``(venv)$ ``, ``user@host:~/dir$ ``) and comments are dropped, and
  redirections (``> log 2>&1``) skipped; a doc's ``<PLACEHOLDER>`` is a word, not a redirection.
- The environment: ``export VAR=value`` (or ``declare -x``) exports ``VAR`` for the commands
  after it; a plain ``VAR=value`` line only sets a shell variable, which a child process does
  not see unless ``export VAR`` (or ``set -a``/``set -o allexport``) exports it; ``unset`` and
  ``export -n`` undo it; ``VAR=value cmd`` holds for one command. ``( ... )`` subshells and
  ``$(...)`` keep their exports to themselves. Control flow is not followed: leading ``if``,
  ``then``, ``do``, ``else``, ``{``, ``!`` and the keyword ``time [-p]`` (so ``time VAR=1 cmd``
  sets VAR for cmd) are dropped, and an ``export`` inside an ``if`` (or a ``case`` arm) counts
  for every later command.
- Commands recognised: ``python``/``python3``/``python3.X`` (options such as ``-u``, ``-E``,
  ``-I``, ``-W arg``; then ``-m MODULE`` or the ``*.py`` script); ``torchrun`` and
  ``python -m torch.distributed.run``/``launch`` (the script or ``-m MODULE`` after their
  options); ``pytest``, ``py.test`` and ``python -m pytest`` (see :func:`is_pytest_launch`).
  Behind the wrappers ``env`` (``-i``/``-``/``-u NAME``/``-S``/``--``: its environment edits
  apply), ``sudo`` (which resets the environment, sudoers' default ``env_reset``, unless ``-E``,
  ``--preserve-env`` or ``--preserve-env=LIST`` keeps it; ``sudo VAR=value`` sets it),
  ``nohup``, ``time``, ``exec`` (``-c`` clears the environment), ``command``, ``builtin``,
  ``nice``, ``timeout``, ``numactl``, ``stdbuf`` (its ``-oL``/``-o0`` do not change Python's
  own buffering: not unbuffered), ``taskset``, ``ionice``, ``setsid``, each with its options.
- Nested command lines: the commands inside ``$(...)`` and backquotes, ``bash -c 'CMD'``
  (``sh``, ``zsh``, ``dash``, ``ksh``; with the caller's exported environment), and the
  remote command of ``ssh HOST 'CMD'`` and ``gcloud ... ssh NAME --command="CMD"`` (the TPU
  pod form ``gcloud compute tpus tpu-vm ssh NAME --worker=all --command=...``). A remote
  command starts with an empty environment: only its own ``export``s apply.

No variable is expanded: ``XLA_USE_SPMD=$MODE`` is not SPMD, and a path that needs expansion is
matched by its literal tail (``$ROOT/examples/train.py`` -> ``examples/train.py``). ``source``
and ``.`` are not followed, nor are functions or ``cd`` (paths are taken as written).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from ..sources.text import MAX_CONFIG_BYTES, read_source
from .model import Launch

SHELL_SUFFIXES = (".sh", ".bash")
DOC_SUFFIXES = (".md", ".markdown", ".rst")
SHELL_LANGUAGES = frozenset(
    {"bash", "sh", "shell", "console", "zsh", "shell-session", "shellsession"}
)
MAX_LAUNCHER_BYTES = 1 << 20  # a larger "launcher" is data, not a script someone wrote
_MAX_JOINED_LINES = 30  # a quote left open continues on at most this many lines
_MAX_NESTING = 8  # bash -c "ssh h 'bash -c ...'": deeper command lines are not read

_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*\{?\.?(?P<lang>[\w-]*)[^\n]*$", re.M
)
_RST_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)\.\.[ \t]+(?:code-block|code|sourcecode)::[ \t]*(?P<lang>[\w-]+)[ \t]*$",
    re.M,
)
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_PROMPT = re.compile(r"(?:\([\w.-]+\)[ \t]*)?(?:[\w.-]+@[\w.-]+(?::[^\s$#]*)?[ \t]*)?\$[ \t]+")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_ARRAY_START = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=$")
_TORCHRUN_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})
_ACCELERATE_MODULE = "accelerate.commands.launch"
# accelerate launch's options that take no value (accelerate/commands/launch.py
# launch_command_parser, HEAD and 1.x: action="store_true"); every other option takes one.
_ACCELERATE_FLAGS = frozenset(
    {
        "--cpu",
        "--debug",
        "--downcast_bf16",
        "--dynamo_use_dynamic",
        "--dynamo_use_fullgraph",
        "--dynamo_use_regional_compilation",
        "--enable_cpu_affinity",
        "--fp8_use_autocast_during_eval",
        "--module",
        "--multi_gpu",
        "--no_python",
        "--no_tpu_cluster",
        "--quiet",
        "--same_network",
        "--tpu",
        "--tpu_cluster",
        "--tpu_use_cluster",
        "--tpu_use_sudo",
        "--use_deepspeed",
        "--use_fsdp",
        "--use_megatron_lm",
        "--use_parallelism_config",
        "--help",
        "-m",
        "-q",
        "-h",
    }
)
_CONFIG_KEY = re.compile(
    r"^[ \t]*['\"]?(distributed_type|tpu_use_cluster)['\"]?[ \t]*:[ \t]*['\"]?([\w.]+)", re.M
)
_PYTEST_MODULES = frozenset({"pytest", "py.test"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
# Words that open or close a compound command; dropped (control flow is not followed).
_LEADING_WORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "{", "!"})
_CLOSING_WORDS = frozenset({"fi", "done", "}", "for", "select", "function"})


def spmd_flag_on(value: str) -> bool:
    """Whether torch_xla 2.9 takes ``XLA_USE_SPMD=value`` as SPMD on.

    The rule is ``torch_xla/utils/utils.py`` ``check_env_flag`` (torch_xla 2.9.0):
    ``flag == 'true' or (flag.isdigit() and int(flag) > 0)``, which ``torch_xla/runtime.py``
    ``is_spmd()``/``use_spmd()`` and ``torch_xla/torch_xla.py`` apply to ``XLA_USE_SPMD``.
    So ``"1"``, ``"2"``, ``"007"`` and ``"true"`` are on; ``"0"``, ``""``, ``"True"``,
    ``"TRUE"``, ``"yes"``, ``" 1"`` and ``"-1"`` are off. A string of digits that ``int``
    rejects (``"²"``) makes torch_xla raise ``ValueError``: not on.
    """
    if value == "true":
        return True
    if not value.isdigit():
        return False
    try:
        return int(value) > 0
    except ValueError:
        return False


_SHEBANG = re.compile(r"#![ \t]*(?:\S*/)?(?:env[ \t]+(?:-\S+[ \t]+)*)?(ba|da|z|k)?sh\b")
_SHEBANG_BYTES = 128


def is_shell_script(path: str, head: str) -> bool:
    """Whether the file at ``path``, whose text starts with ``head``, is a shell script: a
    ``*.sh``/``*.bash`` name, or a first line ``#!/bin/bash``, ``#!/bin/sh``, ``#!/usr/bin/env
    bash`` (``dash``, ``zsh``, ``ksh`` too)."""
    return path.lower().endswith(SHELL_SUFFIXES) or bool(_SHEBANG.match(head))


def is_pytest_launch(launch: Launch) -> bool:
    """Whether ``launch`` is a pytest run (``pytest``, ``py.test``, ``python -m pytest``,
    ``torchrun -m pytest``): ``launch.tests``. Such a launch has one record per path argument,
    ``runs`` being the path as written without ``::test`` node ids (a test file, or a folder
    whose test files it runs; ``"."`` when no path is given: the folder the command runs in,
    taken as the launcher's), ``module=False`` (``True`` with ``--pyargs``: ``runs`` is then
    a dotted package or module name); ``why`` starts with the pytest command."""
    return launch.tests


def scan(path: str, text: str) -> list[Launch]:
    """Every command in ``text`` (the file at ``path``) that runs a Python file or module."""
    folder = os.path.dirname(path)
    lower = path.lower()
    scanner = _Scanner(path, folder)
    if lower.endswith(SHELL_SUFFIXES) or is_shell_script(path, text[:_SHEBANG_BYTES]):
        scanner.script(text, 1)
    elif lower.endswith(DOC_SUFFIXES):
        for first_line, block in _shell_blocks(text, lower.endswith(".rst")):
            scanner.script(block, first_line)
    return scanner.out


def _shell_blocks(text: str, rst: bool) -> list[tuple[int, str]]:
    """``(first line, code)`` of each shell block of a Markdown or reST page."""
    lines = text.splitlines()
    out = []
    if rst:
        for m in _RST_BLOCK.finditer(text):
            if m.group("lang").lower() not in SHELL_LANGUAGES:
                continue
            start = text.count("\n", 0, m.start()) + 1  # index of the line after the directive
            base = len(m.group("indent"))
            body: list[str] = []
            i = start
            while i < len(lines):
                line = lines[i]
                if line.strip() and len(line) - len(line.lstrip()) <= base:
                    break
                body.append(line)
                i += 1
            out.append((start + 1, "\n".join(line.strip() for line in body)))
        return out
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, lang = opening.group("fence"), opening.group("lang").lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(
            fence[:3] if fence[0] == "`" else fence
        ):
            j += 1
        body = lines[i + 1 : j]
        if lang in SHELL_LANGUAGES or (not lang and _starts_a_command(body)):
            out.append((i + 2, "\n".join(line.strip() for line in body)))
        i = j + 1
    return out


# The first word of an untagged block that makes it a shell block: a Python launch, as READMEs
# write them without a language (``` followed by `python3 launch_xla.py --num-devices 8 ...`).
_COMMAND_START = re.compile(
    r"^(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:python3?(?:\.\d+)?|torchrun|accelerate|"
    r"deepspeed|bash|sh|export|cd|pip3?)\s"
)


def _starts_a_command(body: list[str]) -> bool:
    """Whether an untagged fenced block is a shell block: its first non-blank line starts with
    a command that runs or sets up a Python program (``python3 train.py``, ``$ torchrun ...``,
    ``XLA_USE_SPMD=1 python ...``, ``export PJRT_DEVICE=TPU``), not Python code or output."""
    first = next((line.strip() for line in body if line.strip()), "")
    return _COMMAND_START.match(first + " ") is not None


def _logical_lines(text: str, first_line: int):
    """``(line number, text)`` of each line, with ``\\``-continued lines joined and prompts
    (``$ ``, ``(venv) $ ``, ``user@host:~/dir$ ``) dropped."""
    buffer, start = "", None
    for number, line in enumerate(text.splitlines(), first_line):
        stripped = line.strip()
        if start is None:
            start = number
            prompt = _PROMPT.match(stripped)
            if prompt:
                stripped = stripped[prompt.end() :]
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        yield start, buffer + stripped
        buffer, start = "", None
    if buffer:
        yield start, buffer


# ---- words: bash's quoting, substitutions and operators -----------------------------------

# Words split on blanks only, as bash does with the default IFS: `\s` would also stop at a
# no-break space or \x1c-\x1f, which bash keeps inside the word (a doc's U+00A0 once ended the
# run). A carriage return is a blank too, for scripts saved with Windows line ends.
_PLAIN = re.compile(r"[^ \t\r\n'\"\\`$<>&;|()#]+")
_DQ_PLAIN = re.compile(r'[^"\\$`]+')
_PLACEHOLDER = re.compile(r"<[A-Za-z][\w.:/-]*>")
_REDIRECT = re.compile(r"&>>?|>>|>&|>\||<<<|<<-?|<&|<>|>|<")
_OPERATORS = (";;&", "&&", "||", ";;", ";&", "|&", ";", "&", "|")


def _tokens(s: str) -> list[tuple]:
    """``s`` as bash splits it: ``("w", word, substitutions)`` with quotes removed (a ``$(...)``,
    ``${...}`` or backquoted part is kept as written; ``substitutions`` holds the command
    lines inside ``$(...)``/backquotes), ``("op", operator)`` (a newline is ``;``) and
    ``("redir", operator, fd)`` (the next word is its target; ``fd`` is the file descriptor
    written before it, ``"2"`` for ``2>``, or ``""``). Raises ValueError for a quote or
    substitution left open."""
    out: list[tuple] = []
    buf: list[str] = []
    subs: list[str] = []
    word = False  # a word is open ('' is a word)
    i, n = 0, len(s)

    def flush() -> None:
        nonlocal word
        if word:
            out.append(("w", "".join(buf), tuple(subs)))
        buf.clear()
        subs.clear()
        word = False

    while i < n:
        m = _PLAIN.match(s, i)
        if m:
            buf.append(m.group())
            word, i = True, m.end()
            continue
        c = s[i]
        if c in " \t\r":
            flush()
            i += 1
        elif c == "\n":
            flush()
            out.append(("op", ";"))
            i += 1
        elif c == "#":
            if word:
                buf.append(c)
                i += 1
            else:
                j = s.find("\n", i)
                i = n if j < 0 else j
        elif c == "\\":
            if i + 1 < n and s[i + 1] != "\n":
                buf.append(s[i + 1])
                word = True
            i += 2
        elif c == "'":
            j = s.find("'", i + 1)
            if j < 0:
                raise ValueError("unterminated '")
            buf.append(s[i + 1 : j])
            word, i = True, j + 1
        elif c == '"':
            i = _double_quoted(s, i + 1, buf, subs)
            word = True
        elif c == "`":
            i = _backquoted(s, i, buf, subs)
            word = True
        elif c == "$":
            i = _dollar(s, i, buf, subs, quoted=False)
            word = True
        elif c == "<" and (
            placeholder := _PLACEHOLDER.match(s, i)
        ):  # --nodes=<NUM_NODES>: a doc's placeholder, not a redirection
            buf.append(placeholder.group())
            word, i = True, placeholder.end()
        elif c in "<>" and s.startswith("(", i + 1):  # <(cmd): process substitution
            j = _closing(s, i + 2, "(", ")")
            subs.append(s[i + 2 : j])
            buf.append(s[i : j + 1])
            word, i = True, j + 1
        elif c in "<>" or s.startswith("&>", i):
            fd = ""
            if word and not subs and "".join(buf).isdigit():  # 2>&1: a file descriptor
                fd = "".join(buf)
                buf.clear()
                word = False
            flush()
            redirect = _REDIRECT.match(s, i)
            assert redirect is not None  # _REDIRECT matches every `<`, `>` and `&>`
            op = redirect.group()
            out.append(("redir", op, fd))
            i += len(op)
        elif c == "(":
            if word and _ARRAY_START.match("".join(buf)):  # a=(1 2 3)
                j = _closing(s, i + 1, "(", ")")
                buf.append(s[i : j + 1])
                i = j + 1
            else:
                flush()
                out.append(("op", "("))
                i += 1
        elif c == ")":
            flush()
            out.append(("op", ")"))
            i += 1
        else:  # ; & |
            flush()
            op = next(o for o in _OPERATORS if s.startswith(o, i))
            out.append(("op", op))
            i += len(op)
    flush()
    return out


def _double_quoted(s: str, i: int, buf: list[str], subs: list[str]) -> int:
    """Read a ``"..."`` string from ``s[i]`` (after the quote) into ``buf``; the index after it."""
    n = len(s)
    while i < n:
        m = _DQ_PLAIN.match(s, i)
        if m:
            buf.append(m.group())
            i = m.end()
            continue
        c = s[i]
        if c == '"':
            return i + 1
        if c == "\\":
            nxt = s[i + 1 : i + 2]
            if nxt in ('"', "\\", "$", "`"):
                buf.append(nxt)
            elif nxt and nxt != "\n":
                buf.append(c + nxt)
            i += 2
        elif c == "`":
            i = _backquoted(s, i, buf, subs)
        else:
            i = _dollar(s, i, buf, subs, quoted=True)
    raise ValueError('unterminated "')


def _backquoted(s: str, i: int, buf: list[str], subs: list[str]) -> int:
    j = i + 1
    while j < len(s) and s[j] != "`":
        j += 2 if s[j] == "\\" else 1
    if j >= len(s):
        raise ValueError("unterminated `")
    subs.append(s[i + 1 : j].replace("\\`", "`"))
    buf.append(s[i : j + 1])
    return j + 1


def _dollar(s: str, i: int, buf: list[str], subs: list[str], quoted: bool) -> int:
    """Read what starts with ``$`` at ``s[i]``; ``$(...)`` adds its command line to ``subs``."""
    nxt = s[i + 1 : i + 2]
    if nxt == "(":
        j = _closing(s, i + 2, "(", ")")
        if not s.startswith("(", i + 2):  # $(( arithmetic )) runs nothing
            subs.append(s[i + 2 : j])
        buf.append(s[i : j + 1])
        return j + 1
    if nxt == "{":
        j = _closing(s, i + 2, "{", "}")
        buf.append(s[i : j + 1])
        return j + 1
    if nxt == "'" and not quoted:  # $'...': ANSI-C quoting
        j = i + 2
        while j < len(s) and s[j] != "'":
            j += 2 if s[j] == "\\" else 1
        if j >= len(s):
            raise ValueError("unterminated $'")
        buf.append(s[i + 2 : j])
        return j + 1
    buf.append("$")
    return i + 1


def _closing(s: str, i: int, opening: str, closing: str) -> int:
    """The index of the ``closing`` bracket that matches an ``opening`` one before ``s[i]``."""
    depth, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = s.find("'", i + 1)
            if j < 0:
                raise ValueError("unterminated '")
            i = j + 1
            continue
        if c == '"':
            i = _double_quoted(s, i + 1, [], [])
            continue
        if c == "`":
            i = _backquoted(s, i, [], [])
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            if depth == 0:
                return i
            depth -= 1
        i += 1
    raise ValueError(f"unterminated {opening}")


# ---- the shell's state and commands ---------------------------------------------------------


class _Value(str):
    """A variable's value that remembers where the script set it (``run.sh:3``): the place a
    finding about the variable (``export XLA_USE_BF16=1``) is reported, not the command's."""

    __slots__ = ("where",)
    where: str

    def __new__(cls, value: str, where: str) -> _Value:
        made = super().__new__(cls, value)
        made.where = where
        return made


def _origin(value: str, default: str) -> str:
    """Where ``value`` (a variable's value) was set, or ``default`` when not known."""
    return value.where if isinstance(value, _Value) and value.where else default


class _Shell:
    """Shell variables (``vars``), which of them are exported, and ``set -a``; ``here`` is the
    place of the command being read (each value keeps the place that set it: :class:`_Value`)."""

    __slots__ = ("vars", "exported", "allexport", "cases", "here")

    def __init__(self, environment: dict[str, str] | None = None, here: str = "") -> None:
        self.vars: dict[str, str] = dict(environment or {})
        self.exported: set[str] = set(self.vars)
        self.allexport = False
        self.cases = 0  # `case` statements open when this subshell started
        self.here = here

    def copy(self, cases: int) -> _Shell:
        shell = _Shell(here=self.here)
        shell.vars, shell.exported, shell.allexport = (
            dict(self.vars),
            set(self.exported),
            self.allexport,
        )
        shell.cases = cases
        return shell

    def assign(self, word: str, export: bool = False) -> str:
        m = _ASSIGN.match(word)
        assert m is not None  # callers pass VAR=value words only
        name, value = m.group(1), word[m.end() :]
        self.vars[name] = _Value(
            self.vars.get(name, "") + value if m.group(2) else value, self.here
        )
        if export or self.allexport:
            self.exported.add(name)
        return name

    def environment(self) -> dict[str, str]:
        """What a child process gets: the exported variables."""
        return {name: self.vars[name] for name in self.exported if name in self.vars}


class _Session:
    """One command line's stack of (sub)shells and the ``case`` statements open in it."""

    def __init__(self, shell: _Shell) -> None:
        self.shells = [shell]
        self.cases = 0


def _split_options(
    words: list[str], short_values: str, long_values: frozenset[str] | tuple = ()
) -> tuple[list[tuple[str, str | None]], list[str]]:
    """GNU-style options at the start of ``words``: ``([(option, value)], rest)``. An option in
    ``short_values`` (one letter) or ``long_values`` (without ``--``) takes a value, attached
    (``-N0``, ``--membind=0``) or the next word; ``--`` ends the options."""
    options: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return options, words[i + 1 :]
        if not word.startswith("-") or word == "-":
            break
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            if not eq and name in long_values and i + 1 < len(words):
                value = words[i + 1]
                i += 1
            options.append(("--" + name, value if (eq or name in long_values) else None))
            i += 1
            continue
        j = 1
        while j < len(word):
            letter = word[j]
            if letter in short_values:
                value = word[j + 1 :]
                if not value and i + 1 < len(words):
                    value = words[i + 1]
                    i += 1
                options.append(("-" + letter, value))
                break
            options.append(("-" + letter, None))
            j += 1
        i += 1
    return options, words[i:]


# Wrappers that run the rest of their words as a command: (options taking a value: one-letter,
# long ones; how many operands come before the command).
_WRAPPERS: dict[str, tuple[str, frozenset[str], int]] = {
    "nohup": ("", frozenset(), 0),
    "time": ("of", frozenset({"output", "format"}), 0),
    "exec": ("a", frozenset(), 0),
    "command": ("", frozenset(), 0),
    "builtin": ("", frozenset(), 0),
    "nice": ("n", frozenset({"adjustment"}), 0),
    "timeout": ("sk", frozenset({"signal", "kill-after"}), 1),
    "numactl": (
        "CNmpiPwLoMISf",
        frozenset(
            {
                "cpunodebind",
                "membind",
                "physcpubind",
                "interleave",
                "preferred",
                "preferred-many",
                "weighted-interleave",
                "length",
                "offset",
                "shmmode",
                "shmid",
                "shm",
                "file",
            }
        ),
        0,
    ),
    "stdbuf": ("ioe", frozenset({"input", "output", "error"}), 0),
    "taskset": ("", frozenset(), 1),
    "ionice": ("cnpPu", frozenset({"class", "classdata", "pid", "pgid", "uid"}), 0),
    "setsid": ("", frozenset(), 0),
}
_SUDO_SHORT_VALUES = "CDghpRrTtUuc"
_SUDO_LONG_VALUES = frozenset(
    {
        "close-from",
        "chdir",
        "group",
        "host",
        "prompt",
        "chroot",
        "role",
        "type",
        "command-timeout",
        "other-user",
        "user",
        "login-class",
    }
)
_SUDO_NO_COMMAND = frozenset(
    {
        "-e",
        "-l",
        "-v",
        "-V",
        "-K",
        "--edit",
        "--list",
        "--validate",
        "--version",
        "--remove-timestamp",
        "--help",
        "-h",
    }
)
_SSH_SHORT_VALUES = "BbcDEeFIiJLlmOoPpQRSWw"
_PYTEST_SHORT_VALUES = "kmnpcoWr"
_PYTEST_LONG_VALUES = frozenset(
    {
        "maxfail",
        "rootdir",
        "confcutdir",
        "basetemp",
        "junitxml",
        "junit-xml",
        "junit-prefix",
        "durations",
        "durations-min",
        "tb",
        "log-level",
        "log-file",
        "log-file-level",
        "log-format",
        "log-date-format",
        "log-cli-level",
        "log-cli-format",
        "log-cli-date-format",
        "ignore",
        "ignore-glob",
        "deselect",
        "cov",
        "cov-report",
        "cov-config",
        "cov-fail-under",
        "timeout",
        "dist",
        "tx",
        "count",
        "reruns",
        "reruns-delay",
        "capture",
        "import-mode",
        "html",
        "override-ini",
        "config-file",
        "show-capture",
        "color",
        "code-highlight",
        "numprocesses",
        "maxprocesses",
        "randomly-seed",
        "doctest-glob",
        "pdbcls",
        "rsyncdir",
        "assert",
        "hypothesis-profile",
        "hypothesis-seed",
        "benchmark-json",
        "benchmark-save",
        "cache-show",
        "last-failed-no-failures",
        "lfnf",
        "keyword",
        "markers-expr",
        "junit-family",
        "ds",
        "dc",
        "base-url",
    }
)
_PYTEST_OPTIONAL_VALUES = frozenset(
    {"--cov", "--cache-show"}
)  # nargs="?": take a next word not starting with "-"


class _Scanner:
    """Reads the scripts of one launcher file into ``out``."""

    def __init__(self, path: str, folder: str) -> None:
        self.path, self.folder = path, folder
        self.out: list[Launch] = []
        # The first line and the physical lines of the logical line being read (``\\``-joined or
        # a quote left open): a command on its third line is reported there (:meth:`_line_of`).
        self._span: tuple[int, list[str]] = (0, [])
        self._program = ""  # the first word of the simple command being read
        # Where the output of the command being read goes when an enclosing command line, or the
        # script itself (a job scheduler's script), sends it elsewhere than the caller's terminal.
        self.output = ""

    def script(self, text: str, first_line: int) -> None:
        """A script or shell block: its logical lines run in one shell, in order. A script with
        job scheduler directives (``#SBATCH``, ``#PBS``, ``#BSUB``) runs as a job, whose output
        the scheduler writes to a file (Slurm's ``slurm-%j.out``)."""
        self.output = "run as a job of a scheduler" if _SCHEDULER.search(text) else ""
        session = _Session(_Shell())
        physical = text.splitlines()
        lines = list(_logical_lines(text, first_line))
        k = 0
        while k < len(lines):
            number, line = lines[k]
            k += 1
            tokens = None
            try:
                tokens = _tokens(line)
            except ValueError:  # a quote left open: it may close on a later line
                joined = line
                for extra in range(k, min(k + _MAX_JOINED_LINES, len(lines))):
                    joined += "\n" + lines[extra][1]
                    try:
                        tokens = _tokens(joined)
                    except ValueError:
                        continue
                    k = extra + 1
                    break
            if tokens is not None:  # else an unbalanced quote: not a line we can read
                end = lines[k][0] if k < len(lines) else first_line + len(physical)
                self._span = (number, physical[number - first_line : end - first_line])
                self.run(tokens, f"{self.path}:{number}", session, 0)
                self._span = (0, [])

    def nested(self, text: str, shell: _Shell, where: str, depth: int) -> None:
        """A command line inside another (``$(...)``, ``bash -c``, ``ssh``), run by ``shell``."""
        if depth > _MAX_NESTING:
            return
        try:
            tokens = _tokens(text)
        except ValueError:
            return
        self.run(tokens, where, _Session(shell), depth)

    def run(self, tokens: list[tuple], where: str, session: _Session, depth: int) -> None:
        """The simple commands of one command line, each with where its output goes: a
        redirection of its standard output to a file or a pipe after it (``> log``, ``| tee``)
        makes it :attr:`Launch.output` of what it runs, unless an enclosing command line's
        already is (:attr:`output`)."""
        words: list[tuple] = []
        redirected = function_parens = False
        redirect: tuple[str, str] | None = None  # the open redirection: (operator, fd)
        output = ""  # where the current simple command's standard output goes
        for token in [*tokens, ("op", ";")]:
            kind = token[0]
            if kind == "redir":
                redirected, redirect = True, (token[1], token[2])
                continue
            if kind == "w":
                if not redirected:
                    words.append(token)
                elif redirect is not None and not output:
                    output = _stdout_redirect(redirect[0], redirect[1], token[1])
                redirected, redirect = False, None
                continue
            op, redirected = token[1], False
            if op in ("|", "|&") and not output:
                output = "output piped to another command"
            if op == "(":
                if any(
                    word[1] not in _LEADING_WORDS for word in words
                ):  # name () { ...; }: a function
                    function_parens, words = True, []
                else:
                    session.shells.append(session.shells[-1].copy(session.cases))
                continue
            if op == ")" and function_parens:
                function_parens = False
                continue
            outer = self.output
            self.output = outer or output
            try:
                self.command(words, where, session, depth)
            finally:
                self.output = outer
            words, output = [], ""
            # `)` ends a subshell, unless it ends the pattern of a case arm opened inside it
            if op == ")" and len(session.shells) > 1 and session.shells[-1].cases == session.cases:
                session.shells.pop()

    def command(self, tokens: list[tuple], where: str, session: _Session, depth: int) -> None:
        """One simple command: its substitutions run first, then it updates the shell or runs."""
        shell = session.shells[-1]
        shell.here = where
        for token in tokens:
            for inner in token[2]:
                self.nested(inner, shell.copy(session.cases), where, depth + 1)
        words = [token[1] for token in tokens]
        while words and (words[0] in _LEADING_WORDS or words[0] == "time"):
            # `time` is a keyword here: `time VAR=1 cmd` sets VAR for cmd; `time -p`: POSIX output
            words = words[2:] if words[0] == "time" and words[1:2] == ["-p"] else words[1:]
        if not words:
            return
        head = words[0]
        if head == "case":
            session.cases += 1
            return
        if head == "esac":
            session.cases = max(0, session.cases - 1)
            return
        if head in _CLOSING_WORDS:
            return
        if head in ("export", "declare", "typeset", "local", "readonly"):
            _declare(shell, words)
            return
        if head == "unset":
            if "-f" not in words[1:]:
                for name in words[1:]:
                    shell.vars.pop(name, None)
                    shell.exported.discard(name)
            return
        if head == "set":
            _set(shell, words[1:])
            return
        i = 0
        while i < len(words) and _ASSIGN.match(words[i]):
            i += 1
        if i == len(words):  # only assignments: shell variables, exported if `set -a` is on
            for word in words:
                shell.assign(word)
            return
        env = shell.environment()
        scratch = _Shell(env, where)
        for word in words[:i]:  # VAR=value cmd: in the command's environment only
            scratch.assign(word)
        self.execute(words[i:], scratch.vars, where, depth)

    def execute(self, words: list[str], env: dict[str, str], where: str, depth: int) -> None:
        """A command run with environment ``env``: unwrap wrappers, then the Python launches."""
        while words:
            program = os.path.basename(words[0])
            rest = words[1:]
            if program == "env":
                unwrapped = _env(rest, env)
            elif program == "sudo":
                unwrapped = _sudo(rest, env)
            elif program in _WRAPPERS:
                if program == "nohup" and not self.output:
                    # nohup(1): output that would go to a terminal goes to nohup.out instead
                    self.output = "run under `nohup`"
                short, long_values, operands = _WRAPPERS[program]
                options, rest = _split_options(rest, short, long_values)
                names = {name for name, _ in options}
                if (
                    (program == "command" and names & {"-v", "-V"})
                    or (program == "taskset" and "-p" in names)
                    or (program == "ionice" and names & {"-p", "-P", "-u"})
                ):
                    return  # prints, or acts on a running process
                if program == "exec" and "-c" in names:
                    env = {}
                unwrapped = (rest[operands:], env)
            else:
                break
            if unwrapped is None:
                return
            words, env = unwrapped
            # env and sudo take VAR=value words before the command
            while words and _ASSIGN.match(words[0]) and program in ("env", "sudo"):
                scratch = _Shell(env, where)
                scratch.assign(words[0])
                env, words = scratch.vars, words[1:]
        if not words:
            return
        program, rest = os.path.basename(words[0]), words[1:]
        self._program = words[0]
        if _PYTHON.match(program):
            self.python(rest, env, where)
        elif program == "accelerate" and rest[:1] == ["launch"]:
            self.accelerate(rest[1:], env, where, ["accelerate launch"])
        elif program == "accelerate-launch":
            self.accelerate(rest, env, where, ["accelerate-launch"])
        elif program == "torchrun":
            self.torchrun(rest, env, where, ["torchrun"])
        elif program in _PYTEST_MODULES:
            self.pytest(rest, env, where, program, [])
        elif program in _SHELLS:
            options, arguments = _split_options(rest, "oO", frozenset({"rcfile", "init-file"}))
            if any(name == "-c" for name, _ in options) and arguments:
                self.nested(arguments[0], _Shell(env, where), where, depth + 1)
        elif program == "ssh":
            command = _ssh_command(rest)
            if command:
                self._remote(
                    command, where, depth, _ssh_terminal(_split_options(rest, _SSH_SHORT_VALUES)[0])
                )
        elif program == "gcloud" and "ssh" in rest:
            for k, word in enumerate(rest):
                command = None
                if word.startswith("--command="):
                    command = word[len("--command=") :]
                elif word == "--command" and k + 1 < len(rest):
                    command = rest[k + 1]
                if command:
                    flags = [w.partition("=")[2] for w in rest if w.startswith("--ssh-flag=")]
                    flags += [rest[j + 1] for j, w in enumerate(rest[:-1]) if w == "--ssh-flag"]
                    terminal = any(
                        _ssh_terminal(_split_options(shlex.split(f), _SSH_SHORT_VALUES)[0])
                        for f in flags
                        if _balanced(f)
                    )
                    self._remote(command, where, depth, terminal)

    def _remote(self, command: str, where: str, depth: int, terminal: bool) -> None:
        """The remote command of ``ssh`` or ``gcloud ... ssh --command``, in a remote shell that
        has none of the local environment. Its output reaches no terminal unless ssh allocates
        one (``-t``; ssh(1): a command is run without a terminal by default): Python buffers it."""
        outer = self.output
        if not terminal and not outer:
            self.output = "run over ssh without a terminal"
        try:
            self.nested(command, _Shell(here=where), where, depth + 1)
        finally:
            self.output = outer

    def python(self, words: list[str], env: dict[str, str], where: str) -> None:
        why: list[str] = []
        facts: set[str] = set()
        ignore_env = False
        i = 0
        while i < len(words):
            word = words[i]
            if word == "-" or word.startswith("--") and word != "--":
                if word == "--check-hash-based-pycs":
                    i += 1
                if word == "-":
                    return  # the program is read from standard input
                i += 1
                continue
            if word == "--":
                i += 1
                break
            if not word.startswith("-"):
                break
            for j, letter in enumerate(word[1:], 1):
                if letter in "mcWXQ":
                    value = word[j + 1 :]
                    if not value:
                        i += 1
                        value = words[i] if i < len(words) else ""
                    if letter == "c":
                        return
                    if letter == "m":
                        unbuffered = "unbuffered" in facts
                        self.module(value, words[i + 1 :], env, where, why, unbuffered, ignore_env)
                        return
                    break
                if letter == "u" and "unbuffered" not in facts:
                    facts.add("unbuffered")
                    why.append("python -u")
                elif letter in "EI":
                    ignore_env = True
            i += 1
        if i < len(words) and words[i].endswith(".py"):
            self.emit(where, words[i], False, env, facts, why, ignore_env, argv=words[i + 1 :])

    def module(
        self,
        module: str,
        args: list[str],
        env: dict[str, str],
        where: str,
        why: list[str],
        unbuffered: bool,
        ignore_env: bool,
    ) -> None:
        facts = {"unbuffered"} if unbuffered else set()
        if module in _TORCHRUN_MODULES:
            self.torchrun(args, env, where, [f"python -m {module}", *why], facts, ignore_env)
        elif module in _PYTEST_MODULES:
            self.pytest(args, env, where, f"python -m {module}", why, facts, ignore_env)
        elif module == _ACCELERATE_MODULE:
            self.accelerate(args, env, where, [f"python -m {module}", *why], facts, ignore_env)
        elif module:
            self.emit(where, module, True, env, facts, why, ignore_env, argv=args)

    def torchrun(
        self,
        words: list[str],
        env: dict[str, str],
        where: str,
        why: list[str],
        facts: AbstractSet[str] = frozenset(),
        ignore_env: bool = False,
    ) -> None:
        facts = {
            *facts,
            "multiprocess",
            "torchrun",
        }  # torchrun exports RANK, LOCAL_RANK, WORLD_SIZE...
        processes = "1"  # torchrun's --nproc-per-node default
        for i, word in enumerate(words):
            name, eq, value = word.partition("=")
            if name in ("--nproc_per_node", "--nproc-per-node"):
                processes = value if eq else words[i + 1] if i + 1 < len(words) else processes
            if word in ("-m", "--module") and i + 1 < len(words):
                if words[i + 1] in _PYTEST_MODULES:
                    self.pytest(
                        words[i + 2 :],
                        env,
                        where,
                        f"{why[0]} -m {words[i + 1]}",
                        why[1:],
                        facts,
                        ignore_env,
                    )
                else:
                    self.emit(
                        where,
                        words[i + 1],
                        True,
                        env,
                        facts,
                        why,
                        ignore_env,
                        argv=words[i + 2 :],
                        launcher="torchrun",
                        processes=processes,
                    )
                return
            if not word.startswith("-") and word.endswith(".py"):
                self.emit(
                    where,
                    word,
                    False,
                    env,
                    facts,
                    why,
                    ignore_env,
                    argv=words[i + 1 :],
                    launcher="torchrun",
                    processes=processes,
                )
                return

    def accelerate(
        self,
        words: list[str],
        env: dict[str, str],
        where: str,
        why: list[str],
        facts: AbstractSet[str] = frozenset(),
        ignore_env: bool = False,
    ) -> None:
        """``accelerate launch [OPTIONS] SCRIPT [ARGS]`` as accelerate's own launcher reads it
        (``accelerate/commands/launch.py`` ``launch_command``): ``--tpu`` (or a ``--config_file``
        whose ``distributed_type`` is ``XLA``/``TPU``) runs ``tpu_launcher``, which imports the
        script as a module and calls ``xmp.spawn(PrepareForLaunch(main), args=())`` with no
        ``nprocs`` (so ``--num_processes`` reaches no spawn): one process per device, each with
        the launcher's environment; ``--tpu_cluster``/``--tpu_use_cluster`` runs
        ``tpu_pod_launcher``, which imports ``torch_xla.distributed.xla_dist`` (a launch of that
        module). Without them (``--cpu``, ``--multi_gpu``, DeepSpeed, FSDP, or no mode at all)
        the launch is not an XLA one and sets no mode; the script still runs."""
        options: dict[str, str] = {}
        i = 0
        while i < len(words):
            word = words[i]
            if word == "--":
                i += 1
                break
            if not word.startswith("-") or word == "-":
                break
            name, eq, value = word.partition("=")
            key = "--" + name.lstrip("-").replace("-", "_") if name.startswith("--") else name
            if not eq and key not in _ACCELERATE_FLAGS:
                i += 1
                value = words[i] if i < len(words) else ""
            options[key] = value
            i += 1
        if i >= len(words):
            return
        script, argv = words[i], words[i + 1 :]
        module = "--module" in options or "-m" in options
        if "--no_python" in options:
            return
        distributed, cluster = "", False
        config = options.get("--config_file")
        if config:
            distributed, cluster = _accelerate_config(self.folder, config)
        tpu = "--tpu" in options or (
            distributed in ("XLA", "TPU")
            and not {"--multi_gpu", "--cpu", "--use_deepspeed", "--use_fsdp"} & set(options)
        )
        if "--cpu" in options:
            tpu = False
        cluster = tpu and ("--tpu_cluster" in options or "--tpu_use_cluster" in options or cluster)
        if "--no_tpu_cluster" in options:
            cluster = False
        why = [why[0] + (" --tpu" if "--tpu" in options else f" --config_file {config}"), *why[1:]]
        if cluster:
            self.emit(
                where,
                "torch_xla.distributed.xla_dist",
                True,
                env,
                facts,
                [why[0] + " --tpu_cluster", *why[1:]],
                ignore_env,
                launcher="accelerate",
            )
            return
        if tpu:
            self.emit(
                where,
                script,
                module,
                env,
                {*facts, "multiprocess"},
                why,
                ignore_env,
                argv=argv,
                launcher="accelerate",
                processes="per-device",
            )
        elif not {"--multi_gpu", "--use_deepspeed", "--use_fsdp"} & set(options):
            self.emit(where, script, module, env, facts, why[1:], ignore_env, argv=argv)

    def pytest(
        self,
        words: list[str],
        env: dict[str, str],
        where: str,
        command: str,
        why: list[str],
        facts: AbstractSet[str] = frozenset(),
        ignore_env: bool = False,
    ) -> None:
        """``pytest ARGS``: one launch per path argument (``"."`` when there is none)."""
        paths: list[str] = []
        pyargs = False
        i = 0
        while i < len(words):
            word = words[i]
            i += 1
            if word == "--":
                paths.extend(words[i:])
                break
            if not word.startswith("-") or word == "-":
                paths.append(word)
                continue
            if word.startswith("--"):
                name, eq, _ = word.partition("=")
                if name == "--pyargs":
                    pyargs = True
                elif not eq and name in _PYTEST_OPTIONAL_VALUES:
                    if i < len(words) and not words[i].startswith("-"):
                        i += 1
                elif not eq and name[2:] in _PYTEST_LONG_VALUES:
                    i += 1
                continue
            for j, letter in enumerate(word[1:], 1):
                if letter in _PYTEST_SHORT_VALUES:
                    if j == len(word) - 1:
                        i += 1
                    break
        for path in paths or ["."]:
            runs = path.split("::", 1)[0]
            if runs:
                self.emit(where, runs, pyargs, env, facts, [command, *why], ignore_env, tests=True)

    def _line_of(self, number: int, runs: str) -> int:
        """The physical line where the command that runs ``runs`` (a script or module) starts,
        in the logical line starting at ``number`` being read: the last line at or before the
        one naming ``runs`` that holds the command's first word (``torchrun``, ``python3``).
        A `gcloud ... --command` string continued over ten lines reports its `python -m ...`
        on the line that holds it; ``torchrun \\`` then ``train.py`` on the next line is
        reported on torchrun's line. Else ``number``."""
        first, physical = self._span
        if number != first or len(physical) < 2 or not runs:
            return number
        named = next((k for k, text in enumerate(physical) if runs in text), None)
        if named is None:
            return number
        word = self._program
        for k in range(named, -1, -1):
            if word and word in physical[k]:
                return first + k
        return first + named

    def emit(
        self,
        where: str,
        runs: str,
        module: bool,
        env: dict[str, str],
        facts: AbstractSet[str],
        why: list[str],
        ignore_env: bool,
        tests: bool = False,
        argv: Sequence[str] = (),
        launcher: str = "",
        processes: str = "",
    ) -> None:
        found, why = set(facts), list(why)
        value = env.get("XLA_USE_SPMD")
        if value is not None and spmd_flag_on(value):
            found.add("spmd")
            why.append(f"XLA_USE_SPMD={value}")
        if env.get("PYTHONUNBUFFERED") and not ignore_env:  # Python: "set to a non-empty string"
            found.add("unbuffered")
            why.append("PYTHONUNBUFFERED")
        path, _, line = where.rpartition(":")
        number = self._line_of(int(line) if line.isdigit() else 0, runs)
        where = f"{path}:{number}" if number else where
        self.out.append(
            Launch(
                where,
                runs,
                module,
                self.folder,
                frozenset(found),
                ", ".join(why),
                tests,
                line=number,
                argv=tuple(argv),
                env=tuple(
                    (name, str(value), _origin(value, where)) for name, value in sorted(env.items())
                ),
                document=path.lower().endswith(DOC_SUFFIXES),
                launcher=launcher or ("pytest" if tests else "python"),
                processes=processes,
                output="" if tests else self.output,
            )
        )


def _declare(shell: _Shell, words: list[str]) -> None:
    """``export``/``declare``/``typeset``/``local``/``readonly`` and their ``-x``/``-n``/``+x``."""
    head, export, unexport = words[0], words[0] == "export", False
    for word in words[1:]:
        if word[:1] in "-+" and len(word) > 1 and not _ASSIGN.match(word):
            if "f" in word[1:] or "F" in word[1:]:
                return  # functions
            if head == "export" and word.startswith("-") and "n" in word[1:]:
                export, unexport = False, True
            elif head != "export" and "x" in word[1:]:
                export, unexport = word[0] == "-", word[0] == "+"
            continue
        if _ASSIGN.match(word):
            name = shell.assign(word, export)
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word):
            name = word
            if export:
                shell.exported.add(name)
        else:
            continue
        if unexport:
            shell.exported.discard(name)


def _set(shell: _Shell, words: list[str]) -> None:
    """``set -a``/``set +a``/``set -o allexport`` (alone or among other options)."""
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("--", "-") or word[:1] not in "-+" or len(word) < 2:
            return
        on = word[0] == "-"
        for letter in word[1:]:
            if letter == "a":
                shell.allexport = on
            elif letter == "o":
                i += 1
                if i < len(words) and words[i] == "allexport":
                    shell.allexport = on
        i += 1


def _env(words: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """``env [OPTIONS] [VAR=value...] CMD``: the command and its environment (None: no command).
    ``-i``/``-``/``--ignore-environment`` start from an empty one, ``-u NAME`` removes a name,
    ``-S STRING`` splits STRING into words; ``--`` ends the options."""
    env = dict(env)
    while words:
        word, words = words[0], words[1:]
        if word in ("-", "-i", "--ignore-environment"):
            env = {}
            continue
        if word == "--":
            break
        if not word.startswith("-"):
            words = [word, *words]
            break
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if not eq and name in ("--unset", "--chdir", "--split-string"):
                if not words:
                    return None
                value, words = words[0], words[1:]
            option = {"--unset": "-u", "--split-string": "-S"}.get(name, name)
        else:
            option = value = ""
            for j, letter in enumerate(word[1:], 1):
                if letter == "i":
                    env = {}
                elif letter in "uCSP":
                    option, value = "-" + letter, word[j + 1 :]
                    if not value:
                        if not words:
                            return None
                        value, words = words[0], words[1:]
                    break
        if option == "-u":
            env.pop(value, None)
        elif option == "-S":
            try:
                words = [*shlex.split(value), *words]
            except ValueError:
                return None
    return (words, env) if words else None


def _sudo(words: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """``sudo [OPTIONS] [VAR=value...] CMD``: the environment is reset (sudoers ``env_reset``)
    unless ``-E``/``--preserve-env`` keeps it (``--preserve-env=A,B``: those names)."""
    options, rest = _split_options(words, _SUDO_SHORT_VALUES, _SUDO_LONG_VALUES)
    kept: dict[str, str] = {}
    for name, value in options:
        if name in _SUDO_NO_COMMAND:
            return None
        if name == "-E" or (name == "--preserve-env" and value is None):
            kept = dict(env)
        elif name == "--preserve-env" and value:
            kept.update({k: env[k] for k in value.split(",") if k in env})
    return (rest, kept) if rest else None


_SCHEDULER = re.compile(r"^#(?:SBATCH|PBS|BSUB)\b", re.M)


def _stdout_redirect(op: str, fd: str, target: str) -> str:
    """What a redirection does to a command's standard output (``""``: nothing that makes its
    output lost): ``> log``, ``>> log``, ``&> log``, ``1> log`` write it to a file; ``2> err``,
    ``2>&1``, ``>&2`` (to stderr, whose terminal line-buffers it), input redirections and
    ``> /dev/null`` (thrown away on purpose) do not count."""
    if fd not in ("", "1") or target == "/dev/null":
        return ""
    if op in (">", ">>", ">|", "&>", "&>>") or (op == ">&" and not target.isdigit()):
        return "output redirected to a file"
    return ""


def _ssh_terminal(options: list[tuple[str, str | None]]) -> bool:
    """Whether ssh options force a terminal for the remote command (``-t``)."""
    return any(name == "-t" for name, _ in options)


def _balanced(text: str) -> bool:
    """Whether ``shlex`` can split ``text`` (its quotes close)."""
    try:
        shlex.split(text)
    except ValueError:
        return False
    return True


def _ssh_command(words: list[str]) -> str:
    """The remote command of ``ssh [OPTIONS] HOST [OPTIONS] CMD...`` (``""`` when none)."""
    options, rest = _split_options(words, _SSH_SHORT_VALUES)
    if not rest:
        return ""
    _, rest = _split_options(rest[1:], _SSH_SHORT_VALUES)  # ssh reads options after the host too
    return " ".join(rest)


def _accelerate_config(folder: str, config: str) -> tuple[str, bool]:
    """``(distributed_type, tpu_use_cluster)`` of an accelerate config file named by
    ``--config_file`` (beside the launcher, else from the current folder; YAML or JSON keys at the
    start of a line), ``("", False)`` when it cannot be read (a path to expand, outside the tree)."""
    if "$" in config or "{" in config:
        return "", False
    for base in (folder, ""):
        try:
            text = read_source(os.path.join(base, config), MAX_CONFIG_BYTES).decode(
                "utf-8", "replace"
            )
        except OSError:
            continue
        found = dict(_CONFIG_KEY.findall(text))
        kind = found.get("distributed_type", "").rsplit(".", 1)[-1].upper()
        return kind, found.get("tpu_use_cluster", "").lower() == "true"
    return "", False


def option_value(argv: Sequence[str], option: str) -> str | None:
    """The value ``argv`` (a launch's arguments) gives ``option`` (``--num_cores``) as argparse
    reads it: ``--num_cores 8`` or ``--num_cores=8`` (a ``-n`` option also as ``-n8``); the
    first occurrence, before a bare ``--`` (later words are often the arguments of a script the
    program runs in turn, ``argparse.REMAINDER``); None when it is not given."""
    for i, word in enumerate(argv):
        if word == "--":
            return None
        if word == option:
            return argv[i + 1] if i + 1 < len(argv) else None
        if word.startswith(option + "="):
            return word[len(option) + 1 :]
        if len(option) == 2 and option[0] == "-" and option[1] != "-" and word.startswith(option):
            return word[2:]
    return None


def read_launches(paths: Sequence[str], folders: Sequence[str] = ()) -> list[Launch]:
    """The launches in the files ``paths`` (shell scripts, docs and ``pyproject.toml`` files'
    ``[project.scripts]``, as discovery found them) and the ``[project.scripts]`` of the
    ``pyproject.toml`` in each of ``folders`` (the folders named on the command line). Unreadable files and bad TOML are skipped: a launcher only
    adds facts, it is never linted."""
    out: list[Launch] = []
    for path in paths:
        if os.path.basename(path) == "pyproject.toml":
            out.extend(project_scripts(os.path.dirname(path)))
            continue
        try:
            text = read_source(path, MAX_LAUNCHER_BYTES).decode("utf-8", "replace")
        except OSError:  # unreadable, not a regular file (a FIFO), or larger than a script
            continue
        try:
            out.extend(scan(path, text))
        except Exception:  # a launcher only adds facts: one we cannot read never ends the run
            continue
    seen = {
        os.path.normpath(os.path.dirname(p))
        for p in paths
        if os.path.basename(p) == "pyproject.toml"
    }
    for folder in folders:
        if os.path.normpath(folder) not in seen:
            out.extend(project_scripts(folder))
    return out


def project_scripts(folder: str) -> list[Launch]:
    """``[project.scripts]`` (and ``[project.gui-scripts]``) of ``folder/pyproject.toml`` as
    module launches: ``train = "mypkg.cli:main"`` runs ``mypkg.cli``."""
    import tomllib

    path = os.path.join(folder, "pyproject.toml")
    try:
        data = tomllib.loads(read_source(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    project = data.get("project")
    out = []
    if isinstance(project, dict):
        for key in ("scripts", "gui-scripts"):
            table = project.get(key)
            if not isinstance(table, dict):
                continue
            for name, value in table.items():
                if isinstance(value, str) and value.split(":")[0].strip():
                    out.append(
                        Launch(
                            f"{os.path.normpath(path)} [project.{key}] {name}",
                            value.split(":")[0].strip(),
                            True,
                            folder,
                        )
                    )
    return out
