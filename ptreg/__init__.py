"""ptreg: an honest registry of training-runtime attempts."""

import os

__version__ = "0.1.0"
# Where ptreg runs at all: its locks (fcntl), signals (SIGHUP) and process trees are POSIX, and
# a tree is held on Linux (cgroups, a subreaper, /proc) and macOS (psutil alone).
PLATFORMS = ("linux", "darwin")


def without_working_directory(path: list[str]) -> list[str]:
    """``path`` less the working directory, which ``python -m``, PYTHONPATH=. or an empty entry
    put on it: a file there must not stand in for a module ptreg imports (json, NumPy, a backend)."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # a working directory removed under it: nothing can be imported from it
        return [p for p in path if p]
    return [p for p in path if p and os.path.realpath(p) != here]
