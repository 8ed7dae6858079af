"""Cold-process cost of ptreg commands against the floor of any Typer + pydantic CLI.

Interleaves, in one run, `python -c "import typer, pydantic"` (the floor), the same plus
building and using one pydantic model (what validating with pydantic costs at start-up), and
each command (`ptreg show ID` by default, or every `--command`) for each given ptreg
executable, e.g. two checkouts installed in two virtual environments. Prints medians and
ranges in seconds, and each median's ratio to the floor.

    python benchmarks/cold_start.py --id <attempt id> --repeats 30
    python benchmarks/cold_start.py --id <attempt id> --ptreg venv-a/bin/ptreg venv-b/bin/ptreg
    python benchmarks/cold_start.py --command=--help --command list --command backends --ptreg A B
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from functools import partial
from pathlib import Path

from timing import interleaved, table

_ONE_MODEL = """
import typer
from pydantic import BaseModel
class Record(BaseModel):
    id: str
Record.model_validate({"id": "x"})
"""


def version_of(ptreg: str, package: str) -> str:
    python = Path(ptreg).parent / "python"
    done = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registry", default="attempts")
    parser.add_argument("--id", help="measure `ptreg show ID`")
    parser.add_argument("--command", action="append", default=[], help="a ptreg command line to measure (repeatable)")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--ptreg", nargs="+", default=[str(Path(sys.executable).parent / "ptreg")])
    args = parser.parse_args()
    commands = [shlex.split(c) for c in args.command] + ([["show", args.id]] if args.id else [])
    if not commands:
        parser.error("give --id or at least one --command")
    variants = {
        "python -c 'import typer, pydantic'": [sys.executable, "-c", "import typer, pydantic"],
        # `import pydantic` is lazy; the first model class pulls in its machinery. This row is the
        # floor of any CLI that validates with a pydantic model, before any of ptreg's own work.
        "python: typer + one pydantic model": [sys.executable, "-c", _ONE_MODEL],
    }
    for command in commands:
        for exe in args.ptreg:
            label = f"ptreg {shlex.join(command)} (typer {version_of(exe, 'typer')}, {exe})"
            variants[label] = [exe, "-r", args.registry, *command]
    runs = {
        name: partial(subprocess.run, argv, stdout=subprocess.DEVNULL, check=True) for name, argv in variants.items()
    }
    samples = interleaved(runs, args.repeats)
    print(f"cold process, {args.repeats} repeats, seconds (floor: typer {version_of(sys.executable, 'typer')})")
    print(table(samples, "command", reference=next(iter(variants))))


if __name__ == "__main__":
    main()
