"""Reading JSON with errors a person can act on, and writing it atomically and stably."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from .errors import PtregError


class DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKey(key)
        result[key] = value
    return result


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)


def parse_json(text: str, where: str) -> Any:
    """Parse ``text``; a syntax error or a duplicate key raises PtregError naming ``where``."""
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise PtregError(f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except DuplicateKey as exc:
        raise PtregError(f"{where}: duplicate key {exc.args[0]!r} in a JSON object") from None
    except RecursionError:
        raise PtregError(f"{where}: JSON nested too deeply to read") from None


def read_json(path: Path) -> Any:
    """Read and parse a JSON file; every failure is one PtregError naming the file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PtregError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PtregError(f"{path}: is a directory, not a JSON file") from None
    except OSError as exc:
        raise PtregError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PtregError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    return parse_json(text, str(path))


def dumps_pretty(obj: Any) -> str:
    """The on-disk form: two-space indent, the caller's key order, UTF-8, final newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


# Read once, at import, while no other thread can be creating files.
_NEW_FILE_MODE = _default_mode()


def stage_text(directory: Path, text: str, *, prefix: str, mode: Optional[int] = None) -> str:
    """Write ``text`` to a new temporary file in ``directory``, flushed and fsynced; return its path.

    The temporary file gets the mode a plain new file would get (mkstemp's 0600 would
    otherwise survive the rename), or ``mode`` when it replaces a file whose mode to keep.
    """
    import tempfile  # off the read-only commands' start-up path

    fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            os.fchmod(handle.fileno(), _NEW_FILE_MODE if mode is None else mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        discard(tmp_name)
        raise
    return tmp_name


def discard(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` so that ``path`` holds either its old content or the new, never a part.

    Temporary file in the same directory (so the rename stays on one file system), flushed
    and fsynced, renamed over the target, then the directory fsynced so the rename is durable.
    """
    try:
        mode: Optional[int] = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    tmp_name = stage_text(path.parent, text, prefix=f".{path.name}.", mode=mode)
    try:
        os.replace(tmp_name, path)
    except BaseException:
        discard(tmp_name)
        raise
    fsync_directory(path.parent)


def create_text_exclusive(path: Path, text: str) -> None:
    """Create ``path`` holding ``text`` whole, or raise FileExistsError and leave it alone.

    The staged file is hard-linked to the target name: link(2) refuses an existing name, so
    of two writers racing for one name exactly one wins, and no reader sees a partial file.
    """
    tmp_name = stage_text(path.parent, text, prefix=f".{path.name}.")
    try:
        os.link(tmp_name, path)
    finally:
        discard(tmp_name)
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # some platforms cannot open directories; the rename itself is still atomic
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
