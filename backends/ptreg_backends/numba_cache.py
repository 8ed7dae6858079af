"""Where numba keeps the compiled code of this package's kernels: a folder named by a digest of
the package's sources.

numba checks a cached kernel against the one source file that defines it. The kernels here
compile in functions and intrinsics from the package's other modules (``inline="always"``
helpers, ``@intrinsic`` code generators), so an edit to one of those alone would leave the old
machine code in the cache, and every later process would run it. Filing every kernel of the
package under a digest of all of the package's ``.py`` files makes any edit to any of them start
a fresh, empty folder; an unchanged package keeps finding its code there.

The folder sits where numba itself would have put the cache: under ``NUMBA_CACHE_DIR`` when that
is set, else in the package's ``__pycache__``, else (not writable) numba's per-user cache. Older
digests' folders beside it are removed when a process first files a kernel under a new digest,
so the cache holds one version of the package per checkout.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Any

from numba.core import caching

PACKAGE = Path(__file__).resolve().parent
PREFIX = "ptreg_backends-"
_DIGEST_FOLDER = re.compile(re.escape(PREFIX) + r"[0-9a-f]{16}")


def _numbas(name: str) -> Any:
    """numba's class ``name``: older numbas spelt these with a leading underscore."""
    return getattr(caching, name, None) or getattr(caching, "_" + name)


_IMPL = _numbas("CacheImpl")
_NUMBAS_OWN = tuple(
    _numbas(name) for name in ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator")
)


@functools.cache
def sources_digest() -> str:
    """A digest of every ``.py`` file of the package, names and contents, read once a process:
    the code in memory is the code read at import."""
    hasher = hashlib.sha256()
    for path in sorted(PACKAGE.glob("*.py")):
        content = path.read_bytes()
        hasher.update(f"{path.name}\0{len(content)}\0".encode())
        hasher.update(content)
    return hasher.hexdigest()[:16]


def _ours(py_file: str) -> bool:
    return Path(py_file).resolve().parent == PACKAGE


@functools.cache
def _drop_older_digests(base: str, keep: str) -> None:
    """Remove the other digests' folders under ``base`` (once a process): they hold code of
    sources that are no longer these. A process still running older code that finds its
    folder gone compiles again and writes a new one; numba loads a vanished file as a miss."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        if entry.name != keep and _DIGEST_FOLDER.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)


class PackageSourcesLocator(caching._CacheLocator):
    """numba's own choice of cache folder for a kernel of this package, plus a subfolder named
    by the package's sources digest. Source stamp and disambiguator stay numba's own."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._base = inner.get_cache_path()
        self._folder = PREFIX + sources_digest()

    def get_cache_path(self) -> str:
        return os.path.join(self._base, self._folder)

    def get_source_stamp(self) -> Any:
        return self._inner.get_source_stamp()

    def get_disambiguator(self) -> str:
        return str(self._inner.get_disambiguator())

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> PackageSourcesLocator | None:
        if not _ours(py_file):
            return None  # someone else's kernel: numba's locators as usual
        for own in _NUMBAS_OWN:
            inner = own.from_function(py_func, py_file)
            if inner is None:
                continue
            locator = cls(inner)
            if os.path.islink(locator.get_cache_path()):
                continue  # not ours to write through: numba's next choice of folder
            try:
                locator.ensure_cache_path()
            except OSError:
                continue
            _drop_older_digests(locator._base, locator._folder)
            return locator
        return None


def install_cache_locator() -> None:
    """Put the package's locator first in numba's list; call before defining a cached kernel."""
    if PackageSourcesLocator not in _IMPL._locator_classes:
        _IMPL._locator_classes.insert(0, PackageSourcesLocator)
