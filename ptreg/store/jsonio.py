"""Reading JSON with errors a person can act on, and writing it atomically and stably."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import PtregError, UnusableInput
from ..text import SHOWN_MAX, shorten
from .faults import crash_point

# No file ptreg writes nests deeper than a few levels. A fixed bound makes a hostile file fail
# the same way however deep the caller's stack already is, and keeps every later recursive
# consumer (pydantic, jsonschema, json.dumps) far from Python's recursion limit.
MAX_JSON_DEPTH = 256


class JsonError(PtregError):
    """A file or text that cannot be used as JSON: ``problem`` says why, ``pointer`` where."""

    def __init__(self, where: str, problem: str, pointer: str = ""):
        super().__init__(f"{where}#{pointer}: {problem}" if pointer else f"{where}: {problem}")
        self.where = where
        self.problem = problem
        self.pointer = pointer


class DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKey(key)
        result[key] = value
    return result


class NonFinite(ValueError):
    pass


def _finite(literal: str) -> float:
    """A number as JSON defines one: Python's reader also takes NaN, Infinity and -Infinity, and
    reads a literal too large for a double (1e999) as infinity. No reader of ptreg's files can use
    such a value (a timing divided by, an integer stored), so none is read."""
    value = float(literal)
    if not math.isfinite(value):
        raise NonFinite(literal)
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_float=_finite, parse_constant=_finite)
# Only to find where a refused number stands, once it has been refused.
_LENIENT = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _too_deep(value: Any) -> bool:
    """Whether arrays and objects nest deeper than MAX_JSON_DEPTH in ``value`` (iteratively)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def _pointer_part(key: str) -> str:
    return key[:SHOWN_MAX].replace("~", "~0").replace("/", "~1")


def _lone_surrogate(value: Any) -> str | None:
    """The JSON Pointer of the first string (or key) holding a lone UTF-16 surrogate, which
    JSON's \\u escapes can spell but UTF-8 cannot store; None when there is none."""
    stack = [(value, "")]
    while stack:  # iterative: the value may nest up to MAX_JSON_DEPTH
        item, pointer = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return pointer
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, pointer))
                stack.append((child, f"{pointer}/{_pointer_part(key)}"))
        elif isinstance(item, list):
            stack.extend((child, f"{pointer}/{index}") for index, child in enumerate(item))
    return None


def _non_finite(value: Any) -> str:
    """The JSON Pointer of the first number in ``value`` that is not finite ("" when none is)."""
    stack = [(value, "")]
    while stack:  # iterative: the value may nest up to MAX_JSON_DEPTH
        item, pointer = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return pointer
        if isinstance(item, dict):
            stack.extend((child, f"{pointer}/{_pointer_part(key)}") for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((child, f"{pointer}/{index}") for index, child in reversed(list(enumerate(item))))
    return ""


def parse_json(text: str, where: str) -> Any:
    """Parse ``text``; a syntax error, a duplicate key, a number that is not finite (NaN,
    Infinity, 1e999), nesting deeper than MAX_JSON_DEPTH or a lone surrogate escape raises
    JsonError naming ``where``."""
    too_deep = f"JSON nested deeper than {MAX_JSON_DEPTH} levels; not read"
    try:
        value = _DECODER.decode(text)
    except NonFinite as exc:
        problem = f"not a finite number: {shorten(exc.args[0], 40)} (JSON has no NaN or Infinity)"
        try:
            at = _non_finite(_LENIENT.decode(text))
        except (ValueError, RecursionError):  # any other fault of the text: the number is named anyway
            at = ""
        raise JsonError(where, problem, at) from None
    except json.JSONDecodeError as exc:
        raise JsonError(where, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except DuplicateKey as exc:
        raise JsonError(where, f"duplicate key {shorten(exc.args[0])} in a JSON object") from None
    except RecursionError:  # deeper than the stack allows, so deeper than MAX_JSON_DEPTH too
        raise JsonError(where, too_deep) from None
    except ValueError:  # Python refuses integers of more than sys.get_int_max_str_digits() digits
        raise JsonError(where, "invalid JSON: a number too long to read") from None
    # Fewer brackets than the limit cannot nest deeper than it: most files skip the walk.
    if isinstance(value, (dict, list)) and text.count("[") + text.count("{") > MAX_JSON_DEPTH and _too_deep(value):
        raise JsonError(where, too_deep)
    if _SURROGATE_ESCAPE.search(text):
        pointer = _lone_surrogate(value)
        if pointer is not None:
            raise JsonError(where, "a \\u escape spells a lone surrogate, which is not valid Unicode", pointer)
    return value


def read_json(path: Path, max_bytes: int | None = None) -> Any:
    """Read and parse a JSON file; every failure is one JsonError naming the file.

    Only a regular file is read (a FIFO or device would block or never end), and none larger
    than ``max_bytes`` when given.
    """
    return decode_json(read_bytes(path, max_bytes), str(path))


def read_bytes(path: Path, max_bytes: int | None = None, *, follow: bool = True) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; every failure is one JsonError.
    With ``follow`` false, a symlink is refused instead of read through."""
    where = str(path)
    nofollow = 0 if follow else os.O_NOFOLLOW
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | nofollow)
    except FileNotFoundError:
        raise JsonError(where, "no such file") from None
    except IsADirectoryError:
        raise JsonError(where, "is a directory, not a JSON file") from None
    except OSError as exc:
        if not follow and exc.errno == errno.ELOOP:
            raise JsonError(where, "is a symlink; not followed") from None
        raise JsonError(where, f"cannot read: {exc.strerror}") from None
    except ValueError:  # a NUL byte in the path
        raise JsonError(where, "cannot read: the path holds a NUL byte") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise JsonError(where, "is a directory, not a JSON file")
        if not stat.S_ISREG(info.st_mode):
            raise JsonError(where, "not a regular file; not read")
        if max_bytes is not None and info.st_size > max_bytes:
            raise JsonError(where, _too_large(info.st_size, max_bytes))
        data = _read_all(fd, info.st_size, max_bytes)
    except OSError as exc:
        raise JsonError(where, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if max_bytes is not None and len(data) > max_bytes:
        raise JsonError(where, _too_large(len(data), max_bytes))
    return data


def decode_json(data: bytes, where: str) -> Any:
    """Parse the bytes of a JSON file: UTF-8 without a byte order mark, then ``parse_json``."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise JsonError(where, "starts with a UTF-8 byte order mark; save it as UTF-8 without one")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonError(where, f"not UTF-8 text (bad byte at offset {exc.start})") from None
    return parse_json(text, where)


def _read_all(fd: int, size: int, max_bytes: int | None) -> bytes:
    """The file's bytes, up to one past ``max_bytes``: plain os.read calls sized by fstat
    (a buffered reader costs a third of reading a large registry's small records)."""
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, size - total + 1 if size > total else 65536)  # the file may have grown
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            return b"".join(parts)


def outside(root: Path, path: Path) -> Path | None:
    """Where ``path`` really leads when a symlink (of it or of a folder on the way) takes it
    out of ``root``; None when it stays inside, or cannot be resolved (reading it then says why)."""
    try:
        target = path.resolve()
        base = root.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None
    return None if target.is_relative_to(base) else target


def refuse_outside(root: Path, path: Path, consequence: str = "not read") -> None:
    """Raise when a symlink takes ``path`` out of ``root``: a file there could pass for one of
    the registry's, and a write there would land outside it."""
    target = outside(root, path)
    if target is not None:
        raise UnusableInput(f"{path}: leads to {target}, outside the registry (a symlink); {consequence}")


def _too_large(size: int, limit: int) -> str:
    mib = f" ({limit // 2**20} MiB)" if limit % 2**20 == 0 else ""
    return f"file of {size} bytes is larger than the {limit}-byte limit{mib}; not read"


def dumps_pretty(obj: Any) -> str:
    """The on-disk form: two-space indent, the caller's key order, UTF-8, final newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


# Read once, at import, while no other thread can be creating files.
_NEW_FILE_MODE = _default_mode()


# The name stage_text gives: hidden, a prefix, mkstemp's random part, ".tmp".
STAGED_NAME = re.compile(r"\.[^/\x00]+\.tmp")


@contextlib.contextmanager
def staged_file(directory: Path, *, prefix: str, mode: int | None = None) -> Iterator[tuple[BinaryIO, str]]:
    """A new temporary file in ``directory`` to write to, and its path: flushed and fsynced when
    the block ends, removed when it raises. The caller renames it into place.

    The temporary file gets the mode a plain new file would get (mkstemp's 0600 would
    otherwise survive the rename), or ``mode`` when it replaces a file whose mode to keep.
    """
    fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), _NEW_FILE_MODE if mode is None else mode)
            yield handle, tmp_name
            crash_point()  # written but not flushed: the file may be empty or partial
            handle.flush()
            os.fsync(handle.fileno())
        crash_point()
    except BaseException:
        discard(tmp_name)
        raise


def stage_text(directory: Path, text: str, *, prefix: str, mode: int | None = None) -> str:
    """Write ``text`` to a new temporary file in ``directory``, flushed and fsynced; return its path."""
    with staged_file(directory, prefix=prefix, mode=mode) as (handle, tmp_name):
        handle.write(text.encode("utf-8"))
    return tmp_name


def discard(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` so that ``path`` holds either its old content or the new, never a part.

    Temporary file in the same directory (so the rename stays on one file system), flushed
    and fsynced, renamed over the target, then the directory fsynced so the rename is durable.
    """
    try:
        mode: int | None = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    tmp_name = stage_text(path.parent, text, prefix=f".{path.name}.", mode=mode)
    try:
        os.replace(tmp_name, path)
    except BaseException:
        discard(tmp_name)
        raise
    crash_point()
    fsync_directory(path.parent)


def replace_text_unsynced(path: Path, text: str) -> None:
    """Write ``text`` whole over ``path`` (a temporary file renamed over it), without fsync: for
    many derived files written together (a site's pages), where one fsync each cost more than
    the rest of the build. ``sync_everything`` then makes them durable at once, before the file
    that records them is written with ``atomic_write_text``."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            os.fchmod(handle.fileno(), _NEW_FILE_MODE)
            handle.write(text)
        os.replace(tmp_name, path)
    except BaseException:
        discard(tmp_name)
        raise


def sync_everything() -> None:
    """Flush every written file to disk (sync(2)): one call for thousands of files."""
    os.sync()


def create_text_exclusive(path: Path, text: str) -> None:
    """Create ``path`` holding ``text`` whole, or raise FileExistsError and leave it alone.

    The staged file is hard-linked to the target name: link(2) refuses an existing name, so
    of two writers racing for one name exactly one wins, and no reader sees a partial file.
    """
    tmp_name = stage_text(path.parent, text, prefix=f".{path.name}.")
    try:
        os.link(tmp_name, path)
        crash_point()  # both names exist; the staged one is a leftover `ptreg repair` removes
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
    crash_point()
