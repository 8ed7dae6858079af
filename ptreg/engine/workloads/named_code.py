"""What a command evaluator's command lines name of the project: every argument of every stage,
arm and seed, the scripts a Python interpreter runs and the folders it imports from, looking
into the strings a shell is given. Consent to the evaluator covers these files
(``store/code_digests.py`` freezes them); what a shell expands at run time is not followed.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from ...records.evaluator import ArmsSpec
from .stages import SEED, command_line, placeholders, stages_of

# A program that is Python, by its name: python, python3, python3.11, pypy3, a virtualenv's.
PYTHON = re.compile(r"^(?:python|pypy)(?:[0-9]+(?:\.[0-9]+)*)?$")
# Options of Python's own command line that take the next argument (or the rest of theirs).
PYTHON_VALUED = "WX"
PYTHON_LONG_VALUED = ("--check-hash-based-pycs",)
# Looked at for files at most, over every arm and seed: a command line is a few dozen.
MAX_ARGUMENTS_LOOKED_AT = 1_000_000


@dataclass(frozen=True)
class NamedCode:
    """What a command line names of the project, as ``store/code_digests.py`` freezes it."""

    arguments: list[str]  # every argument (and the value of every --flag=value) of every arm and seed
    scripts: list[str]  # the scripts a Python interpreter runs: their folders are imported from first
    import_folders: list[str]  # other folders Python imports from ('' is the project root)
    # arguments of command lines that name no Python interpreter: one that is a Python script
    # (by its #! line, or its name) has its folder imported from first, whatever runs it
    maybe_scripts: list[str] = field(default_factory=list)


def command_lines(spec: ArmsSpec) -> list[list[str]]:
    """Every command line the spec runs, of every stage: one per arm, and per seed where an
    argument holds one. ValueError when that is more than is worth looking at."""
    found: set[tuple[str, ...]] = set()
    every_seed = spec.seed_values()
    for stage in stages_of(spec.settings):
        seeds = every_seed if SEED in placeholders(stage.argv) else every_seed[:1]
        if len(spec.arms) * len(seeds) * len(stage.argv) > MAX_ARGUMENTS_LOOKED_AT:
            raise ValueError(
                f"{stage.name} has {len(stage.argv)} arguments over {len(spec.arms)} arms and {len(seeds)} seeds, "
                f"more than the {MAX_ARGUMENTS_LOOKED_AT:,} ptreg looks at for the files they name"
            )
        found.update(
            tuple(command_line(stage.argv, params, seed, arm)) for arm, params in spec.arms.items() for seed in seeds
        )
    return [list(line) for line in sorted(found)]


def named_code(spec: ArmsSpec) -> NamedCode:
    """The paths the spec's command lines may name, and where Python imports from when a Python
    interpreter runs them: what consent to the evaluator must cover. A shell given a command as
    one string (``bash -c "python3 bench.py"``) is looked into: the words of each command in
    that string are named too."""
    arguments: set[str] = set()
    scripts: set[str] = set()
    folders: set[str] = set()
    maybe: set[str] = set()
    lines = command_lines(spec)
    split = ShellStrings()  # each once: arms and seeds repeat most of them
    for depth in range(SHELL_DEPTH + 1):
        inner: list[list[str]] = []
        for argv in lines:
            for arg in argv:
                arguments.add(arg)
                if arg.startswith("-") and "=" in arg:
                    arguments.add(arg.split("=", 1)[1])
                if arg.startswith("PYTHONPATH="):  # through env: each folder is imported from
                    folders.update(p for p in arg.removeprefix("PYTHONPATH=").split(":") if p)
            script, folder = python_path(argv)
            if script is not None:
                scripts.add(script)
            if folder is not None:
                folders.add(folder)
            if not names_python(argv):
                maybe.update(arg for arg in argv if not arg.startswith("-"))
            if depth < SHELL_DEPTH:
                inner += shell_commands(argv, split)
        lines = inner
    return NamedCode(sorted(arguments), sorted(scripts), sorted(folders), sorted(maybe))


# A program that runs a command line given as one string: sh -c '...', bash -lc '...'.
SHELL = re.compile(r"^(?:sh|bash|dash|zsh|ksh|mksh|ash|busybox)$")
SHELL_OPERATORS = frozenset("();<>|&")
SHELL_DEPTH = 3  # a shell's string that runs a shell, and so on: deeper is not a command line anyone writes
MAX_SHELL_CHARS = 1_000_000  # of distinct strings given to shells, over every arm and seed


@dataclass
class ShellStrings:
    """The strings given to shells, split into commands, each once; bounded in characters."""

    commands: dict[str, list[list[str]]] = field(default_factory=dict)
    chars: int = 0

    def of(self, text: str) -> list[list[str]]:
        if text not in self.commands:
            self.chars += len(text)
            if self.chars > MAX_SHELL_CHARS:
                raise ValueError(f"command gives a shell more than the {MAX_SHELL_CHARS:,} characters ptreg looks into")
            self.commands[text] = _shell_split(text)
        return self.commands[text]


def shell_commands(argv: list[str], split: ShellStrings | None = None) -> list[list[str]]:
    """The commands a shell in ``argv`` is given as strings, each split into its words at the
    shell's operators (``a && b; c | d`` is four): every argument after the shell that is no
    option is taken as such a string, a script's name included (one word). What the shell
    expands (``$VAR``, ``cd``) is not followed. ValueError when ``split``, the strings split so
    far, adds up to more than is worth looking at."""
    start = next((i for i, arg in enumerate(argv) if SHELL.fullmatch(os.path.basename(arg))), None)
    if start is None:
        return []
    split = ShellStrings() if split is None else split
    found: list[list[str]] = []
    for arg in argv[start + 1 :]:
        if not arg.startswith(("-", "+")):
            found += split.of(arg)
    return found


def _shell_split(text: str) -> list[list[str]]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote: the shell refuses it too; its words as written
        words = text.split()
    commands: list[list[str]] = []
    command: list[str] = []
    for word in [*words, ";"]:
        if word and set(word) <= SHELL_OPERATORS:
            if command:
                commands.append(command)
            command = []
        else:
            command.append(word)
    return commands


def names_python(argv: list[str]) -> bool:
    """Whether ``argv`` names a Python interpreter to run (``python_path`` then says what it imports)."""
    return any(PYTHON.fullmatch(os.path.basename(arg)) for arg in argv)


def python_path(argv: list[str]) -> tuple[str | None, str | None]:
    """Where a Python interpreter in ``argv`` puts first on its import path: (its script, whose
    folder it is) or (None, '' for the working directory: ``-c``, ``-m``, no script); (None,
    None) when no Python runs, or ``-I``/``-P`` keeps that folder off the path."""
    start = next((i for i, arg in enumerate(argv) if PYTHON.fullmatch(os.path.basename(arg))), None)
    if start is None:
        return None, None
    safe, index = False, start + 1
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            index += 1
            break
        if arg == "-" or not arg.startswith("-"):
            break
        if arg.startswith("--"):
            index += 2 if arg in PYTHON_LONG_VALUED else 1
            continue
        flags = arg[1:]
        for at, flag in enumerate(flags):
            if flag in "IP":
                safe = True
            if flag in "cm":  # the rest is the code or the module: the working directory comes first
                return None, (None if safe else "")
            if flag in PYTHON_VALUED:
                index += 1 if at == len(flags) - 1 else 0  # its value is the next argument, or the rest of this one
                break
        index += 1
    if safe:
        return None, None
    if index >= len(argv) or argv[index] == "-":
        return None, ""
    return argv[index], None
