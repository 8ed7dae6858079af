"""Kernel backends: the contract every backend keeps, and discovery through entry points.

A backend is any object with the three matmul kernels below. It is found through the
``ptreg.backends`` entry-point group, the one way to add one: ptreg's own backends (the
``ptreg_backends`` package in the repository's ``backends/`` folder) are registered there
exactly like a third-party package's. Loading an entry point gives a class or factory;
calling it with no arguments gives a ready backend.

Kernel contract (float32, C-contiguous, ``out`` preallocated and overwritten):

- ``matmul_forward(a, b, out)``:     out = a · b      a: M×K, b: K×N, out: M×N
- ``matmul_backward_da(dc, b, out)``: out = dc · bᵀ    dc: M×N, b: K×N, out: M×K
- ``matmul_backward_db(a, dc, out)``: out = aᵀ · dc    a: M×K, dc: M×N, out: K×N

The metadata is read from the loaded class or factory *without calling it*, so listing
backends never imports an optional dependency such as numba:

- ``description``: one line.
- ``order_preserving``: each output accumulates in the reference order (k ascending for
  forward, n ascending for dA, m ascending for dB; multiply then add, no fused multiply-add),
  so results are bit-identical to ``naive``.
- ``thread_control``: one line saying which threads the backend uses and how they are set.
- ``default_threads()``: the threads it would use if nobody set them.
- ``unavailable_reason()``: ``None`` when it can run here, else why not (e.g. a missing
  optional dependency).

An instance also has ``set_threads(n) -> int``, returning the threads it will really use
(a single-threaded backend returns 1).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Optional, Protocol, runtime_checkable

from .errors import EXIT_UNUSABLE, PtregError

ENTRY_POINT_GROUP = "ptreg.backends"
KERNELS = ("forward", "backward_da", "backward_db")
METHOD_OF_KERNEL = {
    "forward": "matmul_forward",
    "backward_da": "matmul_backward_da",
    "backward_db": "matmul_backward_db",
}
METADATA = ("description", "order_preserving", "thread_control", "default_threads", "unavailable_reason")


@runtime_checkable
class Backend(Protocol):
    """What ``create`` returns; the three methods are the names other tools call."""

    name: str
    description: str
    order_preserving: bool
    thread_control: str

    def matmul_forward(self, a: Any, b: Any, out: Any) -> None: ...

    def matmul_backward_da(self, dc: Any, b: Any, out: Any) -> None: ...

    def matmul_backward_db(self, a: Any, dc: Any, out: Any) -> None: ...

    def set_threads(self, n: int) -> int: ...


def kernel_shapes(kernel: str, m: int, k: int, n: int) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """The two input shapes and the output shape of ``kernel`` for the product (M×K)·(K×N)."""
    if kernel == "forward":
        return (m, k), (k, n), (m, n)
    if kernel == "backward_da":
        return (m, n), (k, n), (m, k)
    if kernel == "backward_db":
        return (m, k), (m, n), (k, n)
    raise ValueError(f"unknown kernel {kernel!r}")


def flops(m: int, k: int, n: int) -> int:
    """Floating-point operations of one call of any of the three kernels: 2·M·K·N."""
    return 2 * m * k * n


@dataclass(frozen=True)
class BackendEntry:
    """One registered backend as the entry points name it; nothing imported yet."""

    name: str
    target: str  # "module:attribute"
    distribution: Optional[str]
    distribution_version: Optional[str]
    conflicts: tuple[str, ...] = ()  # other targets registered under the same name

    def load(self) -> Callable[[], Any]:
        from importlib.metadata import EntryPoint

        return EntryPoint(self.name, self.target, ENTRY_POINT_GROUP).load()


@dataclass(frozen=True)
class BackendInfo:
    """A backend's metadata and whether it can run here, for listings and provenance."""

    name: str
    target: str
    distribution: Optional[str]
    distribution_version: Optional[str]
    description: Optional[str]
    order_preserving: Optional[bool]
    thread_control: Optional[str]
    default_threads: Optional[int]
    available: bool
    reason: Optional[str]  # why it is unavailable

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def entries() -> dict[str, BackendEntry]:
    """Every backend registered in the ``ptreg.backends`` group, by name, without importing any.

    A name registered twice with different targets is kept once, and ``describe`` reports
    the conflict, because picking one silently would measure something nobody chose.
    """
    from importlib.metadata import distributions

    found: dict[str, BackendEntry] = {}
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP:
                continue
            dist_name = dist.metadata["Name"] if dist.metadata else None
            entry = BackendEntry(ep.name, ep.value, dist_name, dist.version)
            earlier = found.get(ep.name)
            if earlier is None:
                found[ep.name] = entry
            elif earlier.target != entry.target and entry.target not in earlier.conflicts:
                found[ep.name] = replace(earlier, conflicts=(*earlier.conflicts, entry.target))
    return dict(sorted(found.items()))


def describe(entry: BackendEntry) -> BackendInfo:
    """Load the entry point (not the backend) and read its metadata; never raises."""

    def info(available: bool, reason: Optional[str], **meta: Any) -> BackendInfo:
        fields = {key: meta.get(key) for key in ("description", "order_preserving", "thread_control", "default_threads")}
        return BackendInfo(entry.name, entry.target, entry.distribution, entry.distribution_version,
                           available=available, reason=reason, **fields)

    if entry.conflicts:
        targets = ", ".join((entry.target, *entry.conflicts))
        return info(False, f"registered more than once with different targets: {targets}")
    try:
        factory = entry.load()
    except Exception as exc:  # a broken plugin is reported, never fatal
        return info(False, f"cannot load {entry.target}: {type(exc).__name__}: {exc}")
    missing = [m for m in METADATA if not hasattr(factory, m)]
    if missing:
        return info(False, f"{entry.target} lacks the metadata {', '.join(missing)}")
    declared = getattr(factory, "name", entry.name)
    if declared != entry.name:
        return info(False, f"{entry.target} calls itself {declared!r} but is registered as {entry.name!r}")
    try:
        meta = {
            "description": str(factory.description),
            "order_preserving": bool(factory.order_preserving),
            "thread_control": str(factory.thread_control),
            "default_threads": int(factory.default_threads()),
        }
        reason = factory.unavailable_reason()
    except Exception as exc:
        return info(False, f"{entry.target} metadata failed: {type(exc).__name__}: {exc}")
    return info(reason is None, reason, **meta)


def describe_all() -> list[BackendInfo]:
    return [describe(e) for e in entries().values()]


def require_registered(names: list[str], known: Optional[dict[str, BackendEntry]] = None) -> None:
    """Unusable input (exit 2) naming the first name that no entry point registers."""
    known = entries() if known is None else known
    for name in names:
        if name not in known:
            listed = ", ".join(known) or "none"
            raise PtregError(f"no backend {name!r} is registered (registered: {listed})", EXIT_UNUSABLE)


def create(name: str) -> Backend:
    """A ready backend by its registered name; a ``PtregError`` says why when it cannot be."""
    known = entries()
    require_registered([name], known)
    entry = known[name]
    meta = describe(entry)
    if not meta.available:
        raise PtregError(f"backend {name!r} is unavailable: {meta.reason}", EXIT_UNUSABLE)
    try:
        backend = entry.load()()
    except Exception as exc:
        raise PtregError(f"backend {name!r} failed to start: {type(exc).__name__}: {exc}", EXIT_UNUSABLE) from exc
    lacking = [m for m in (*METHOD_OF_KERNEL.values(), "set_threads") if not callable(getattr(backend, m, None))]
    if lacking:
        raise PtregError(f"backend {name!r} lacks {', '.join(lacking)}", EXIT_UNUSABLE)
    return backend
