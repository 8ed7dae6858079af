"""Consent to run an evaluator's command, kept in the user's own configuration.

An evaluator whose workload runs code (``command``) names a command line that ``ptreg run``
executes. Freezing one is consent: the user wrote or read the spec. One that arrived any other
way (an import, a bundle, a pull of another clone's registry) runs only after
``ptreg evaluator trust NAME@HASH``. The consent lives outside every registry, in
``$PTREG_CONFIG_HOME`` (else ``$XDG_CONFIG_HOME/ptreg``, else ``~/.config/ptreg``), so no bundle
and no commit can carry it. It names the evaluator's full sha256, which covers its command,
arms and input digests: a changed evaluator is a new one, and needs consent again.
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from ..errors import UnusableInput
from ..text import shorten
from .jsonio import atomic_write_text, decode_json, dumps_pretty
from .workfiles import open_working_file, read_working_file

TRUST_FILE = "trusted-evaluators.json"
FORMAT = "ptreg-trust"
MAX_BYTES = 16 * 1024 * 1024
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def config_dir() -> Path:
    explicit = os.environ.get("PTREG_CONFIG_HOME")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "ptreg"


def trust_file() -> Path:
    return config_dir() / TRUST_FILE


def trusted() -> set[str]:
    """The sha256 of every evaluator this user consented to run; a damaged, linked or foreign
    file is refused in one line (never read as trusting nothing or everything)."""
    path = trust_file()
    data = read_working_file(path, MAX_BYTES, "a consent file is ptreg's own; move it away and trust again")
    if data is None:
        return set()
    raw = decode_json(data, str(path))
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("sha256"), list):
        raise UnusableInput(f"{path}: not a ptreg trust file (format {FORMAT!r} with a list sha256)")
    found = raw["sha256"]
    bad = next((v for v in found if not isinstance(v, str) or not SHA256.match(v)), None)
    if bad is not None:
        raise UnusableInput(f"{path}: sha256 holds {shorten(bad)}, not a sha256 digest")
    return set(found)


def is_trusted(sha256: str) -> bool:
    return sha256 in trusted()


def trust(sha256: str) -> bool:
    """Record consent to run this evaluator; False when it was recorded already."""
    directory = config_dir()
    directory.mkdir(parents=True, exist_ok=True)
    # two freezes at once must not drop each other's consent
    fd = open_working_file(directory / f".{TRUST_FILE}.lock", os.O_RDWR | os.O_CREAT, "remove it; ptreg makes it")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        known = trusted()
        if sha256 in known:
            return False
        atomic_write_text(trust_file(), dumps_pretty({"format": FORMAT, "sha256": sorted(known | {sha256})}))
    finally:
        os.close(fd)  # releases the flock
    return True
