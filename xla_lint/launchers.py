"""Launchers: shell scripts and the shell blocks of docs that run the tree's Python files.

``export XLA_USE_SPMD=1`` then ``python train.py`` in ``run.sh`` makes ``train.py`` an SPMD
program even though its code never calls ``use_spmd()`` (torch_xla 2.9 still reads the
variable: ``torch_xla/runtime.py``, ``is_spmd``/``use_spmd``, and the C++ runtime reads
``XLA_USE_SPMD`` at start). A launcher can also make a program one process per device
(``torchrun``) or unbuffered (``python -u``, ``PYTHONUNBUFFERED``).

Read here: ``*.sh``/``*.bash`` files, and in ``*.md``/``*.rst`` pages the fenced blocks
marked ``bash``, ``sh``, ``shell``, ``console`` or ``zsh`` and ``.. code-block::`` blocks
of those languages. Each script (or block) is read as lines of simple commands (``;``,
``&&``, ``||``, ``|`` split them; a trailing ``\\`` joins lines; ``$`` prompts are
dropped): ``export VAR=value`` holds for the commands after it, ``VAR=value cmd`` for one
command. Commands recognised: ``python``/``python3``/``python3.X`` (``-u``, ``-m MODULE``,
then the script), behind ``nohup``, ``time``, ``exec``, ``env``, ``sudo``; ``torchrun``
and ``python -m torch.distributed.run``/``launch`` (the script or ``-m MODULE`` after
their options). Nothing is run and no variable is expanded: a path that needs expansion
is matched by its literal tail (``$ROOT/examples/train.py`` -> ``examples/train.py``).
"""

from __future__ import annotations

import os
import re
import shlex

from .program import Launch

SHELL_SUFFIXES = (".sh", ".bash")
DOC_SUFFIXES = (".md", ".markdown", ".rst")
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console", "zsh", "shell-session", "shellsession"})

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*\{?\.?(?P<lang>[\w-]*)[^\n]*$", re.M)
_RST_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\.\.[ \t]+(?:code-block|code|sourcecode)::[ \t]*(?P<lang>[\w-]+)[ \t]*$", re.M)
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = frozenset({"nohup", "time", "exec", "sudo", "command", "builtin"})
_TORCHRUN_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})
# Python options that take a value (the next word): python -W ignore train.py.
_PY_VALUE_OPTIONS = frozenset({"-W", "-X", "-Q"})
_SPMD_VALUES = frozenset({"1", "true", "True", "TRUE", "yes"})


def scan(path: str, text: str) -> list[Launch]:
    """Every command in ``text`` (the file at ``path``) that runs a Python file or module."""
    folder = os.path.dirname(path)
    lower = path.lower()
    if lower.endswith(SHELL_SUFFIXES):
        return _scan_shell(text, path, folder, 1)
    if lower.endswith(DOC_SUFFIXES):
        out: list[Launch] = []
        for first_line, block in _shell_blocks(text, lower.endswith(".rst")):
            out.extend(_scan_shell(block, path, folder, first_line))
        return out
    return []


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
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        fence, lang = m.group("fence"), m.group("lang").lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence[:3] if fence[0] == "`" else fence):
            j += 1
        if lang in SHELL_LANGUAGES:
            out.append((i + 2, "\n".join(line.strip() for line in lines[i + 1:j])))
        i = j + 1
    return out


def _logical_lines(text: str, first_line: int):
    """``(line number, text)`` of each line, with ``\\``-continued lines joined and prompts dropped."""
    buffer, start = "", None
    for number, line in enumerate(text.splitlines(), first_line):
        stripped = line.strip()
        if start is None:
            start = number
            if stripped.startswith("$ "):
                stripped = stripped[2:]
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        yield start, buffer + stripped
        buffer, start = "", None
    if buffer:
        yield start, buffer


def _scan_shell(text: str, path: str, folder: str, first_line: int) -> list[Launch]:
    exported: dict[str, str] = {}
    out: list[Launch] = []
    for number, line in _logical_lines(text, first_line):
        if "python" not in line and "torchrun" not in line and "export" not in line and "=" not in line \
                and "unset" not in line:
            continue
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            words = list(lexer)
        except ValueError:  # an unbalanced quote: not a line we can read
            continue
        command: list[str] = []
        for word in [*words, ";"]:
            if word and set(word) <= set(";&|"):
                launch = _command(command, exported, f"{path}:{number}", folder)
                if launch is not None:
                    out.append(launch)
                command = []
            else:
                command.append(word)
    return out


def _command(words: list[str], exported: dict[str, str], where: str, folder: str) -> Launch | None:
    """The launch one simple command makes, or None; ``export`` updates ``exported``."""
    if not words:
        return None
    if words[0] == "export":
        for word in words[1:]:
            if _ASSIGN.match(word):
                name, _, value = word.partition("=")
                exported[name] = value
        return None
    if words[0] == "unset":
        for word in words[1:]:
            exported.pop(word, None)
        return None
    env = dict(exported)
    i = 0
    while i < len(words):
        word = words[i]
        if _ASSIGN.match(word):
            name, _, value = word.partition("=")
            env[name] = value
        elif word in _WRAPPERS or word == "env":
            pass
        else:
            break
        i += 1
    if i == len(words):  # only assignments: they set shell variables, exported or not
        for word in words:
            name, _, value = word.partition("=")
            if name in exported or name in ("XLA_USE_SPMD", "PYTHONUNBUFFERED"):
                exported[name] = value
        return None
    program = os.path.basename(words[i])
    rest = words[i + 1:]
    facts: set[str] = set()
    why: list[str] = []
    target: tuple[str, bool] | None = None
    if _PYTHON.match(program):
        target = _python_target(rest, facts, why)
    elif program == "torchrun":
        facts.add("multiprocess")
        why.append("torchrun")
        target = _torchrun_target(rest)
    if target is None:
        return None
    if env.get("XLA_USE_SPMD") in _SPMD_VALUES:
        facts.add("spmd")
        why.append(f"XLA_USE_SPMD={env['XLA_USE_SPMD']}")
    if env.get("PYTHONUNBUFFERED"):
        facts.add("unbuffered")
        why.append("PYTHONUNBUFFERED")
    return Launch(where, target[0], target[1], folder, frozenset(facts), ", ".join(why))


def _python_target(words: list[str], facts: set[str], why: list[str]) -> tuple[str, bool] | None:
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-m" and i + 1 < len(words):
            module = words[i + 1]
            if module in _TORCHRUN_MODULES:
                facts.add("multiprocess")
                why.append(f"python -m {module}")
                return _torchrun_target(words[i + 2:])
            return module, True
        if word == "-c" or word == "-":
            return None
        if word.startswith("-"):
            if "u" in word[1:] and not word.startswith("--") and word[1:].isalpha():
                facts.add("unbuffered")
                why.append("python -u")
            if word in _PY_VALUE_OPTIONS:
                i += 1
            i += 1
            continue
        return (word, False) if word.endswith(".py") else None
    return None


def _torchrun_target(words: list[str]) -> tuple[str, bool] | None:
    for i, word in enumerate(words):
        if word in ("-m", "--module") and i + 1 < len(words):
            return words[i + 1], True
        if not word.startswith("-") and word.endswith(".py"):
            return word, False
    return None


MAX_LAUNCHER_BYTES = 1 << 20  # a larger "launcher" is data, not a script someone wrote


def read_launches(paths: list[str], folders: list[str] = ()) -> list[Launch]:
    """The launches in the files ``paths`` (shell scripts and docs, as discovery found them)
    and the ``[project.scripts]`` of each ``pyproject.toml`` in ``folders`` (the folders
    named on the command line). Unreadable files and bad TOML are skipped: a launcher only
    adds facts, it is never linted."""
    out: list[Launch] = []
    for path in paths:
        try:
            if os.path.getsize(path) > MAX_LAUNCHER_BYTES:
                continue
            with open(path, "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        out.extend(scan(path, text))
    for folder in folders:
        out.extend(project_scripts(folder))
    return out


def project_scripts(folder: str) -> list[Launch]:
    """``[project.scripts]`` (and ``[project.gui-scripts]``) of ``folder/pyproject.toml`` as
    module launches: ``train = "mypkg.cli:main"`` runs ``mypkg.cli``."""
    import tomllib

    path = os.path.join(folder, "pyproject.toml")
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
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
                    out.append(Launch(f"{os.path.normpath(path)} [project.{key}] {name}",
                                      value.split(":")[0].strip(), True, folder))
    return out
