"""`python -m ptreg` and the `ptreg` command: take the working directory off the import path,
then run the command line.

Both put it there (`python -m` first of all, the command where PYTHONPATH=. or an empty entry
says so), and a json.py there would stand in for the standard library's in ptreg itself, which
imports json with its command line's packages: so the path is set before ptreg imports anything.
"""

import sys

from . import PLATFORMS, without_working_directory


def program() -> None:
    if not sys.platform.startswith(PLATFORMS):
        # before anything imports fcntl, which would fail with a traceback there
        print(f"ptreg: runs on Linux and macOS only, not on {sys.platform}", file=sys.stderr)
        raise SystemExit(2)
    sys.path[:] = without_working_directory(sys.path)
    from .cli import main

    main()


if __name__ == "__main__":
    program()
