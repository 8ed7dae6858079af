"""Provenance: the machine, software and settings a run was measured with.

Written as ``environment.json`` beside a run's results so that a reader can judge whether
the numbers apply to them. A value that cannot be found is recorded as null (unknown), never
guessed; an environment variable that is not set is recorded as null too.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from .. import __version__
from .accelerators import machine_facts
from .backends import describe, entries

# Variables that change how BLAS, OpenMP or numba behave (threads, kernels, cache sizes).
BEHAVIOUR_VARIABLES = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_VERBOSE",
    "GOTO_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "KMP_BLOCKTIME",
    "OPENBLAS_THREAD_TIMEOUT",
    "MKL_NUM_THREADS",
    "MKL_DEBUG_CPU_TYPE",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMBA_NUM_THREADS",
    "NUMBA_THREADING_LAYER",
    "NUMBA_OPT",
    "NUMBA_CACHE_DIR",
    "NUMBA_DISABLE_JIT",
    "NPY_DISABLE_CPU_FEATURES",
)


# One rule for every backend's worker, set before NumPy (and so the BLAS) loads in it: a thread
# pool spins about half a millisecond after its call, then sleeps. A training step mixes
# libraries (numba's or Python's threads for the kernels, NumPy's BLAS for attention), and a
# pool that keeps spinning takes a core from the next library's threads on a machine with few
# cores; one that sleeps at once makes each of its own back-to-back calls wait for its threads
# to wake. OpenBLAS spins 2^N cycles: by default 2^28, a tenth of a second, longer than the gap
# between any two of the step's attention products; 2^20 is about half a millisecond. GNU
# OpenMP (numba's omp layer from PyPI) spins GOMP_SPINCOUNT times, which it counts at about
# 100,000 a millisecond (how long a spin lasts depends on the CPU: docs/backends.md); under
# PASSIVE alone it would not spin at all. PASSIVE stays for other OpenMP runtimes (MKL's),
# which would otherwise spin on. A value the user set is kept; the values in effect are recorded
# in every environment.json (``worker_variables``).
WORKER_VARIABLES = {"OPENBLAS_THREAD_TIMEOUT": "20", "GOMP_SPINCOUNT": "20000", "OMP_WAIT_POLICY": "PASSIVE"}


def worker_variables(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The rule as it applies to a worker started from ``environ`` (default: this process)."""
    environ = dict(os.environ) if environ is None else environ
    return {name: environ.get(name) or value for name, value in WORKER_VARIABLES.items()}


# A variable whose name says it holds a secret; its value is recorded as REDACTED alone (a
# digest of a short password could be searched for).
SECRET_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION")
REDACTED = "<redacted>"
# A value that looks like a key whatever its name: credentials in a URL (scheme://user:pass@),
# or a word (split at anything but letters, digits, + and =) of 20 or more characters mixing
# upper case, lower case and digits, or of 32 or more hexadecimal digits: what API tokens,
# cloud keys and JWTs are made of. Paths, model names and device ids split into shorter words.
URL_CREDENTIALS = re.compile(r"://[^/@\s]+@")
WORD = re.compile(r"[A-Za-z0-9+=]{20,}")
HEX_KEY = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{32,}(?![0-9a-fA-F])")


def looks_like_key(value: str) -> bool:
    if URL_CREDENTIALS.search(value) or HEX_KEY.search(value):
        return True
    return any(
        any(c.isupper() for c in word) and any(c.islower() for c in word) and any(c.isdigit() for c in word)
        for word in WORD.findall(value)
    )


def recorded_value(name: str, value: str | None) -> str | None:
    """A command's variable as a run records it: its value, None when not set, ``<redacted>``
    when its name says it is a secret, and ``<redacted sha256:...>`` (the first 8 hex digits of
    the value's digest, so that two runs' values can be told apart) when the value looks like a
    key (``looks_like_key``)."""
    if value is None:
        return None
    if SECRET_NAME.search(name):
        return REDACTED
    if looks_like_key(value):
        return f"<redacted sha256:{hashlib.sha256(value.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}>"
    return value


def command_variables(names: list[str] | None, environ: dict[str, str] | None = None) -> dict[str, str | None]:
    """The values of the variables an evaluator lets its command see (``env``), as recorded in
    environment.json: null for one that is not set (the command is not given it)."""
    environ = dict(os.environ) if environ is None else environ
    return {name: recorded_value(name, environ.get(name)) for name in names or ()}


def backend_configuration(names: list[str]) -> dict[str, str | None]:
    """What each backend says it runs with on this machine (its optional ``configuration()``),
    e.g. numba's register tile; null when a backend says nothing or is not registered."""
    known = entries()
    return {name: describe(known[name]).configuration if name in known else None for name in names}


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(root: Path) -> dict[str, Any]:
    """Commit and dirty state of the repository the registry ``root`` lives in (null outside git).

    The registry's own folder is left out of the dirty check: every run rewrites its tracked
    attempt record, and counting that as a change of code would make every run after the first
    at a commit a run of unknown code, so repeated runs could never form a history. A registry
    that is the repository's top folder leaves nothing out (its files are the repository)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None:
        return {"repository": None, "commit": None, "dirty": None}
    commit = _git(root, "rev-parse", "--verify", "--quiet", "HEAD")
    if commit is None:
        # a repository with no commit yet: no commit to differ from, so neither clean nor dirty
        return {"repository": top, "commit": None, "dirty": None}
    prefix = _git(root, "rev-parse", "--show-prefix")  # the registry's folder, relative to the top
    # ':/' is the whole tree and ':(exclude).' the folder git runs in (-C root), whatever its name
    outside_registry = ["--", ":/", ":(exclude)."] if prefix else []
    status = _git(root, "status", "--porcelain", "--untracked-files=no", *outside_registry)
    return {"repository": top, "commit": commit, "dirty": None if status is None else bool(status)}


# The instruction-set flags that decide which kernels BLAS and numba pick; two machines with the
# same model name can differ here (a VM may hide AVX-512).
SIMD_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512dq",
    "avx512cd",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "asimd",
    "sve",
)


def cpu_flags() -> set[str] | None:
    """Every flag the CPU reports (/proc/cpuinfo); unknown off Linux."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def cpu_features() -> list[str] | None:
    """The SIMD flags the CPU reports, in SIMD_FLAGS order; unknown off Linux."""
    present = cpu_flags()
    return None if present is None else [flag for flag in SIMD_FLAGS if flag in present]


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def cpu_generation() -> str | None:
    """The CPU's family and model numbers ("family 25, model 17"): a cloud's "AMD EPYC" names
    several generations (Zen 4 and Zen 5 have told apart only by these here); unknown off Linux."""
    found = {}
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() in ("cpu family", "model") and name.strip() not in found:
                found[name.strip()] = value.strip()
    except OSError:
        return None
    if len(found) < 2:
        return None
    return f"family {found['cpu family']}, model {found['model']}"


CACHE_VARIABLE = "PTREG_CACHE_DIR"  # where ptreg keeps what it measured of this machine


def cache_folder() -> Path:
    """ptreg's per-user cache: $PTREG_CACHE_DIR, else $XDG_CACHE_HOME/ptreg, else ~/.cache/ptreg."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ptreg"


def usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def blas_pools() -> list[dict[str, Any]]:
    """The thread pools NumPy's BLAS (and OpenMP, if loaded) runs, as threadpoolctl sees them."""
    __import__("numpy")  # loads the BLAS, so that threadpoolctl can see it
    from threadpoolctl import threadpool_info

    keep = ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture", "prefix")
    return [{key: pool.get(key) for key in keep} for pool in threadpool_info()]


def collect(root: Path) -> dict[str, Any]:
    """The machine this process runs on, and the state of the registry's repository."""
    found = machine_environment()
    return {"ptreg_version": found.pop("ptreg_version"), "git": git_state(root), **found}


def machine_environment() -> dict[str, Any]:
    """Everything ``collect`` records that belongs to the machine, not to the registry: what a
    node of a cluster reports about itself."""
    import numpy  # the run imports it anyway; the listing commands never come here

    return {
        "ptreg_version": __version__,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "numpy_version": numpy.__version__,
        "numba_version": _version("numba"),
        "llvmlite_version": _version("llvmlite"),
        "threadpoolctl_version": _version("threadpoolctl"),
        "blas": blas_pools(),
        "cpu": {
            "model": cpu_model(),
            "features": cpu_features(),
            "machine": platform.machine(),
            "logical_cores": os.cpu_count(),
            "usable_cores": usable_cores(),
        },
        "os": {"system": platform.system(), "release": platform.release(), "platform": platform.platform()},
        "hostname": socket.gethostname(),
        "variables": {name: os.environ.get(name) for name in BEHAVIOUR_VARIABLES},
        "worker_variables": worker_variables(),
        # only where NVML sees a device: a machine without one records what it always did
        **({"accelerators": found} if (found := machine_facts()) is not None else {}),
    }


def machine(environment: dict[str, Any] | None) -> dict[str, Any]:
    """What makes two measurements' absolute times comparable, from an environment; unknown
    values are kept as None, so two unknowns are never taken for the same machine."""
    env = environment or {}
    cpu = env.get("cpu") or {}
    pools = env.get("blas") or []
    return {
        "CPU model": cpu.get("model"),
        "CPU features": " ".join(cpu["features"]) if isinstance(cpu.get("features"), list) else None,
        "architecture": cpu.get("machine"),
        "usable cores": cpu.get("usable_cores"),
        "BLAS": "; ".join(
            f"{p.get('internal_api')} {p.get('version')} {p.get('architecture')} ({p.get('num_threads')} threads)"
            for p in pools
            if isinstance(p, dict)
        )
        or None,
        "NumPy": env.get("numpy_version"),
        "numba": env.get("numba_version"),
        "Python": (env.get("python") or {}).get("version"),
        "variables": ", ".join(f"{k}={v}" for k, v in sorted((env.get("variables") or {}).items()) if v is not None)
        or ("none set" if env.get("variables") is not None else None),
    }


def known_differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """One line per property of two runs' machines known on both sides and different there:
    only such a difference makes their absolute times incomparable. A property unknown on
    either side is no difference (``unknown_facts`` names it): numba absent from both venvs,
    or CPU features no kernel reported, say nothing against the machines being alike. A run
    whose machine is not recorded at all (no readable environment, or cells spread over
    several machines) is another matter: nothing says it ran on one like machine."""
    missing = [f"machine of {side}: not recorded" for side, env in (("A", a), ("B", b)) if env is None]
    if missing:
        return missing
    ma, mb = machine(a), machine(b)
    return [f"{key}: {ma[key]} -> {mb[key]}" for key in ma if None not in (ma[key], mb[key]) and ma[key] != mb[key]]


def unknown_facts(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """The properties of two recorded machines unknown on either side, each as both sides
    read (``unknown`` where it is): shown beside a comparison, never filled in."""
    if a is None or b is None:
        return []
    ma, mb = machine(a), machine(b)
    return [f"{key}: {ma[key] or 'unknown'} -> {mb[key] or 'unknown'}" for key in ma if None in (ma[key], mb[key])]


def measuring_environment(environment: dict[str, Any] | None) -> dict[str, Any] | None:
    """The environment of the machine a run's cells were measured on. A local run's is the
    file itself; a run spread over a cluster names its machines in ``machines``: the one
    machine's when there was one, else unknown (None), since no single machine measured it."""
    if environment is None or "machines" not in environment:
        return environment
    machines = environment["machines"]
    if isinstance(machines, list) and len(machines) == 1 and isinstance(machines[0], dict):
        found = machines[0].get("environment")
        return found if isinstance(found, dict) else None
    return None


FINGERPRINT_NEEDS = ("CPU model", "CPU features", "architecture", "usable cores", "BLAS", "NumPy", "Python")


def fingerprint(environment: dict[str, Any]) -> str | None:
    """A short name for ``machine(environment)``: equal for machines whose times may be set
    side by side, unknown (None) when the CPU, the BLAS, NumPy or Python is unknown (numba may
    be absent: that is known). The hostname is left out on purpose: two identical boxes are
    like machines."""
    described = machine(environment)
    if any(described[key] is None for key in FINGERPRINT_NEEDS):
        return None
    text = json.dumps(described, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
