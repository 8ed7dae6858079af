"""Cold-process cost of ptreg commands against the floor of any Typer + pydantic CLI.

The floor is a minimal Typer program that validates one pydantic model: what any command line
built on those two libraries pays before doing anything of its own. Interleaves, in one run,
the floor, `python -c "import typer, pydantic"` (which leaves pydantic's machinery unloaded,
so it is below the floor) and each command (`ptreg show ID`, or every `--command`) for each
given ptreg executable, e.g. two checkouts installed in two virtual environments. Prints
medians and ranges in seconds, each median's ratio to the floor, and, with `--targets`, each
command's ratio against its target (exit 1 when one is missed).

    python benchmarks/cold_start.py --targets --id tinygpt-step-attribution --repeats 20
    python benchmarks/cold_start.py --id <attempt id> --ptreg venv-a/bin/ptreg venv-b/bin/ptreg
    python benchmarks/cold_start.py --command=--help --command list --command backends --ptreg A B
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
from functools import partial
from pathlib import Path

from timing import interleaved, table

from ptreg.engine.environment import BEHAVIOUR_VARIABLES, cpu_model, usable_cores

# The floor: one Typer command that validates one pydantic model and prints it.
FLOOR = """
import typer
from pydantic import BaseModel

class Record(BaseModel):
    id: str
    repeats: int

app = typer.Typer()

@app.command()
def show(id: str = typer.Argument("x"), repeats: int = typer.Option(3)) -> None:
    typer.echo(Record.model_validate({"id": id, "repeats": repeats}).model_dump_json())

app()
"""
FLOOR_LABEL = "floor: a Typer command validating one pydantic model"
# The most a command's median may be, as a multiple of the floor's median in the same run.
TARGETS = {"--help": 1.5, "list": 1.5, "show": 1.5, "backends": 2.0}


def describe_machine() -> str:
    """The CPU, and the variables that steer OpenBLAS and thread pools, as found (never set here)."""
    found = ", ".join(f"{k}={v}" for k, v in os.environ.items() if k in BEHAVIOUR_VARIABLES) or "none set"
    return f"machine: {cpu_model() or 'unknown CPU'}, {usable_cores()} usable cores; variables: {found}"


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
    parser.add_argument(
        "--targets", action="store_true", help=f"measure {', '.join(TARGETS)} and check each against its target"
    )
    args = parser.parse_args()
    commands = [shlex.split(c) for c in args.command] + ([["show", args.id]] if args.id else [])
    if args.targets:
        if not args.id:
            parser.error("--targets measures `show ID`: give --id")
        commands = [[word] for word in TARGETS if word != "show"] + [["show", args.id]]
    if not commands:
        parser.error("give --id or at least one --command")
    variants = {
        FLOOR_LABEL: [sys.executable, "-c", FLOOR],
        # `import pydantic` is lazy; the first model class pulls in its machinery.
        "python -c 'import typer, pydantic'": [sys.executable, "-c", "import typer, pydantic"],
    }
    targets = {}
    for command in commands:
        for exe in args.ptreg:
            label = f"ptreg {shlex.join(command)} (typer {version_of(exe, 'typer')}, {exe})"
            variants[label] = [exe, "-r", args.registry, *command]
            targets[label] = TARGETS.get(command[0])
    runs = {
        name: partial(subprocess.run, argv, stdout=subprocess.DEVNULL, check=True) for name, argv in variants.items()
    }
    samples = interleaved(runs, args.repeats)
    print(describe_machine())
    print(f"cold process, {args.repeats} repeats, seconds (floor: typer {version_of(sys.executable, 'typer')})")
    print(table(samples, "command", reference=FLOOR_LABEL))
    if args.targets:
        floor = statistics.median(samples[FLOOR_LABEL])
        missed = 0
        for label, most in targets.items():
            ratio = statistics.median(samples[label]) / floor
            verdict = "ok" if most is not None and ratio <= most else "MISSED"
            missed += verdict == "MISSED"
            print(f"{verdict:<6} {label}: {ratio:.2f}x the floor (target at most {most}x)")
        sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
