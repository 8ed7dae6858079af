"""The environment variables an evaluator may let its command see (its spec's ``env``): what a
name looks like, and which names are never given."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

# The name of an environment variable a command may see: upper case, as the convention has it.
VariableName = Annotated[str, StringConstraints(pattern=r"^[A-Z_][A-Z0-9_]{0,127}$")]
# Variables that change what code runs (a library preloaded, another import path, a shell's or
# an interpreter's startup file): consent covers the files the evaluator freezes, not these.
CODE_VARIABLES = frozenset(
    [
        "BASH_ENV",
        "ENV",
        "GCONV_PATH",
        "IFS",
        "SHELLOPTS",
        "PS4",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5LIB",
        "PERL5OPT",
        "PERLLIB",
        "RUBYLIB",
        "RUBYOPT",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
    ]
)
CODE_VARIABLE_PREFIXES = ("LD_", "DYLD_", "PYTHON", "PTREG_")


def variable_problem(name: str) -> str | None:
    """Why a command may not be given the variable ``name``; None when it may. ``PTREG_*`` are
    ptreg's own; the others change what code the command runs."""
    if name.startswith("PTREG_"):
        return f"env: {name} is ptreg's own, set by ptreg"
    if name in CODE_VARIABLES or name.startswith(CODE_VARIABLE_PREFIXES):
        return f"env: {name} changes what code the command runs, which consent to the evaluator does not cover"
    return None
