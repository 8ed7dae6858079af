"""numba's disk cache never hands back code compiled from sources that have since changed.

numba checks a cached kernel against the file that defines it only; the backend's kernels
compile in functions from its other modules. Each test here uses a pair of tiny modules in
tmp_path (a kernel in one, the function it inlines in the other) and new processes, as a
later run would be: compiling the real backend cold takes minutes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

from numba.core.registry import CPUDispatcher

import ptreg_backends
from ptreg_backends import numba_cache

KERNEL = """\
import numba
{install}
from .inlined import step


@numba.njit(cache=True)
def kernel(x):
    return step(x)
"""

INLINED = """\
import numba


@numba.njit(inline="always")
def step(x):
    return x + {amount}
"""

# prints: the kernel's result, its cache hits, its cache misses
RUN = (
    "from pair.kernel import kernel; r = kernel(1); s = kernel.stats; "
    "print(r, sum(s.cache_hits.values()), sum(s.cache_misses.values()))"
)


def _pair(root: Path, *, located: bool) -> Path:
    """A package ``pair`` under ``root``: ``kernel`` inlines ``inlined.step`` (adds 1). Located:
    it files its kernel as the backend does, with a copy of the backend's ``numba_cache``."""
    package = root / "pair"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    install = ""
    if located:
        shutil.copy(Path(numba_cache.__file__), package / "numba_cache.py")
        install = "from .numba_cache import install_cache_locator\ninstall_cache_locator()"
    (package / "kernel.py").write_text(KERNEL.format(install=install))
    (package / "inlined.py").write_text(INLINED.format(amount=1))
    return package


def _run(root: Path, cache: Path | None) -> list[str]:
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(root)
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_numba_alone_keeps_running_the_old_code_of_an_inlined_module(tmp_path: Path) -> None:
    """Why the backend files its cache by a digest: without it, the edit below is not seen."""
    package = _pair(tmp_path / "src", located=False)
    assert _run(tmp_path / "src", tmp_path / "cache") == ["2", "0", "1"]
    (package / "inlined.py").write_text(INLINED.format(amount=2))
    # the new code would give 3: numba loads the kernel compiled with the old step
    assert _run(tmp_path / "src", tmp_path / "cache") == ["2", "1", "0"]


def test_an_edit_to_an_inlined_module_compiles_afresh_and_an_unchanged_one_reuses_the_cache(
    tmp_path: Path,
) -> None:
    package = _pair(tmp_path / "src", located=True)
    cache = tmp_path / "cache"
    assert _run(tmp_path / "src", cache) == ["2", "0", "1"]
    assert _run(tmp_path / "src", cache) == ["2", "1", "0"]  # unchanged: loaded, not compiled
    (package / "inlined.py").write_text(INLINED.format(amount=2))
    assert _run(tmp_path / "src", cache) == ["3", "0", "1"]
    assert _run(tmp_path / "src", cache) == ["3", "1", "0"]
    # under the user's NUMBA_CACHE_DIR, one digest's folder: the old one was removed
    folders = [path.name for path in cache.rglob(numba_cache.PREFIX + "*")]
    assert len(folders) == 1, folders
    assert next(cache.rglob("*.nbi")).parent.name == folders[0]


def test_without_numba_cache_dir_the_digest_folder_is_in_the_package_pycache(tmp_path: Path) -> None:
    package = _pair(tmp_path / "src", located=True)
    assert _run(tmp_path / "src", None) == ["2", "0", "1"]
    indexes = list((package / "__pycache__").glob(numba_cache.PREFIX + "*/kernel.kernel-*.nbi"))
    assert len(indexes) == 1, indexes


def test_a_symlink_under_a_digest_name_is_neither_written_through_nor_removed(tmp_path: Path) -> None:
    package = _pair(tmp_path / "src", located=True)
    cache = tmp_path / "cache"
    assert _run(tmp_path / "src", cache) == ["2", "0", "1"]
    (folder,) = cache.rglob(numba_cache.PREFIX + "*")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "kept").write_text("someone's")
    shutil.rmtree(folder)
    folder.symlink_to(elsewhere)  # the current digest's name
    older = folder.with_name(numba_cache.PREFIX + "0" * 16)
    older.symlink_to(elsewhere)  # an older digest's name
    # not filed through the link: numba's next folder (the package's __pycache__), compiled anew
    assert _run(tmp_path / "src", cache) == ["2", "0", "1"]
    assert sorted(path.name for path in elsewhere.iterdir()) == ["kept"]
    assert folder.is_symlink() and older.is_symlink()
    assert list((package / "__pycache__").glob(numba_cache.PREFIX + "*/kernel.kernel-*.nbi"))


def test_every_cached_kernel_of_the_backend_is_filed_under_its_sources_digest() -> None:
    """Importing the kernels defines them (nothing is compiled): each cached one must already
    have the package's locator, so none is filed where an inlined module's edit goes unseen."""
    from ptreg_backends import numba_attention, numba_fused, numba_gemm, numba_ops, numba_softmax

    modules = (numba_attention, numba_fused, numba_gemm, numba_ops, numba_softmax)
    kernels = []
    for module in modules:
        for value in vars(module).values():
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, CPUDispatcher) and item._cache.cache_path:
                    kernels.append(item)
    assert len(kernels) > 20
    folder = numba_cache.PREFIX + numba_cache.sources_digest()
    for kernel in kernels:
        assert isinstance(kernel._cache._impl.locator, numba_cache.PackageSourcesLocator), kernel
        assert Path(kernel._cache.cache_path).name == folder, kernel


def test_the_digest_covers_every_source_file_of_the_package(tmp_path: Path) -> None:
    """A copy of the package's sources with one byte changed in any file has another digest."""
    names = sorted(path.name for path in Path(ptreg_backends.__file__).parent.glob("*.py"))
    assert "numba_softmax.py" in names and "numba_cache.py" in names
    code = "from pkg import numba_cache; print(numba_cache.sources_digest())"

    def digest(root: Path) -> str:
        env = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    source = Path(ptreg_backends.__file__).parent
    shutil.copytree(source, tmp_path / "base" / "pkg", ignore=shutil.ignore_patterns("__pycache__"))
    unchanged = digest(tmp_path / "base")
    assert unchanged == numba_cache.sources_digest()
    for name in ("numba_softmax.py", "naive.py"):
        root = tmp_path / name
        shutil.copytree(tmp_path / "base" / "pkg", root / "pkg")
        (root / "pkg" / name).write_text((root / "pkg" / name).read_text() + "\n")
        assert digest(root) != unchanged, name
