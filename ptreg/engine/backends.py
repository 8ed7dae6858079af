"""Kernel backends: the contract as the engine checks it, and discovery through entry points.

The contract itself (the three kernels, their shapes, the metadata and what each means) is
stated once, in ``docs/backends.md``. A backend is found through the ``ptreg.backends``
entry-point group, the one way to add one: ptreg's own backends (the ``ptreg_backends``
package in the repository's ``backends/`` folder) are registered there exactly like a third
party's. Loading an entry point gives a class or factory; calling it with no arguments gives
a ready backend.

As pluggy verifies a hook implementation against its specification, ``describe`` checks
each method's signature against the way the engine calls it, and reports a mismatch in one
line instead of a traceback in the middle of a run. Metadata is read from the loaded class
*without calling it*, so listing backends never imports an optional dependency such as numba.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..errors import UnusableInput
from ..records.measured import FUSED_OPS
from ..records.run_results import STEP_OPS, Kernel, Roles
from .plugins import PluginEntry, call_problem, plugin_entries

ENTRY_POINT_GROUP = "ptreg.backends"
METHOD_OF_KERNEL: dict[Kernel, str] = {
    "forward": "matmul_forward",
    "backward_da": "matmul_backward_da",
    "backward_db": "matmul_backward_db",
}
# How the engine calls each method: the arguments it passes. Only the kernels are required.
KERNEL_CALLS: dict[str, tuple[str, ...]] = {
    "matmul_forward": ("a", "b", "out"),
    "matmul_backward_da": ("dc", "b", "out"),
    "matmul_backward_db": ("a", "dc", "out"),
}
OPTIONAL_CALLS: dict[str, tuple[str, ...]] = {"set_threads": ("n",)}
# The step's other ops, each optional: a backend provides an op by having every one of its
# methods (called with these arguments, as ``engine/workloads/layers.py`` defines them), and
# declares in ``op_tolerances`` how close to the NumPy reference each op it provides stays.
OP_METHODS: dict[str, dict[str, tuple[str, ...]]] = {
    "encoder": {"encoder_forward": ("wte", "wpe", "tokens"), "encoder_backward": ("dx", "tokens", "dwte", "dwpe")},
    "layernorm": {"layernorm_forward": ("x", "w", "b"), "layernorm_backward": ("dout", "cache")},
    "attention": {"attention_forward": ("qkv", "B", "T", "NH"), "attention_backward": ("dout", "cache")},
    "gelu": {"gelu_forward": ("x",), "gelu_backward": ("dout", "x")},
    "residual": {"residual_add": ("x", "branch")},
    # a fused op: the residual add and the layernorm that reads its sum, in one pass each way
    "residual_layernorm": {
        "residual_layernorm_forward": ("x", "branch", "w", "b"),
        "residual_layernorm_backward": ("dout", "cache", "dstream"),
    },
    "bias": {"bias_forward": ("out", "b"), "bias_backward": ("dout", "db")},
    # a fused op: the fc layer's bias and the GELU after it; backward, GELU's then the bias's
    "bias_gelu": {"bias_gelu_forward": ("out", "b"), "bias_gelu_backward": ("dout", "x", "db")},
    "crossentropy": {"crossentropy_forward": ("logits", "targets"), "crossentropy_backward": ("probs", "targets")},
    "adamw": {
        "adamw_update": (
            "param",
            "grad",
            "m",
            "v",
            "lr",
            "beta1",
            "beta2",
            "eps",
            "weight_decay",
            "correction1",
            "correction2",
        )
    },
}
FUSED: tuple[str, ...] = FUSED_OPS  # called by the step only when provided, the separate ops otherwise
OPS: tuple[str, ...] = STEP_OPS  # the records name the ops; OP_METHODS keys them the same (a test holds it)
OP_OF_METHOD: dict[str, str] = {method: op for op, methods in OP_METHODS.items() for method in methods}
# What a backend may declare itself to be, for the ratios of a run (see records.run.Roles).
ROLES = ("reference", "peer")


class Backend(Protocol):
    """What ``create`` returns: the three kernels, the one thing every backend has."""

    def matmul_forward(self, a: Any, b: Any, out: Any) -> None: ...

    def matmul_backward_da(self, dc: Any, b: Any, out: Any) -> None: ...

    def matmul_backward_db(self, a: Any, dc: Any, out: Any) -> None: ...


def set_backend_threads(backend: Backend, n: int) -> int | None:
    """Ask the backend to use ``n`` threads; how many it really uses, or None when it cannot be
    told (it has no ``set_threads``) and so runs as it is."""
    setter = getattr(backend, "set_threads", None)
    return int(setter(n)) if setter is not None else None


def kernel_shapes(kernel: str, m: int, k: int, n: int) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """The two input shapes and the output shape of ``kernel`` for the product (M×K)·(K×N)."""
    if kernel == "forward":
        return (m, k), (k, n), (m, n)
    if kernel == "backward_da":
        return (m, n), (k, n), (m, k)
    if kernel == "backward_db":
        return (m, k), (m, n), (k, n)
    raise ValueError(f"unknown kernel {kernel!r}")


# A backend's entry point: the shape every plugin's has.
BackendEntry = PluginEntry


@dataclass(frozen=True)
class BackendInfo:
    """A backend's metadata and whether it can run here, for listings and provenance."""

    name: str
    target: str
    distribution: str | None
    distribution_version: str | None
    description: str | None
    order_preserving: bool | None
    thread_control: str | None
    default_threads: int | None  # None: not said, so unknown
    available: bool
    reason: str | None  # why it is unavailable
    role: str | None = None  # "reference", "peer" or none
    configuration: str | None = None  # what it will run with on this machine, in its own words
    ops: tuple[str, ...] = ()  # the step's ops it provides besides the three kernels

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def entries() -> dict[str, BackendEntry]:
    """Every backend registered in the ``ptreg.backends`` group, by name, without importing any;
    a name registered twice with different targets is reported by ``describe``."""
    return plugin_entries(ENTRY_POINT_GROUP)


def provided_ops(owner: Any) -> tuple[str, ...]:
    """The ops ``owner`` provides: those whose every method it has."""
    return tuple(op for op, methods in OP_METHODS.items() if all(getattr(owner, m, None) is not None for m in methods))


def op_tolerances(owner: Any) -> dict[str, float]:
    """The tolerance ``owner`` declares for each op it provides (0.0: the reference's bits).

    Raises ValueError naming what is wrong: an op provided in part, or without a declaration, a
    declaration for an op it does not provide, or a tolerance that is not a number >= 0.
    """
    target = getattr(owner, "__name__", type(owner).__name__)
    for methods in OP_METHODS.values():
        missing = [m for m in methods if getattr(owner, m, None) is None]
        if 0 < len(missing) < len(methods):
            have = next(m for m in methods if m not in missing)
            raise ValueError(f"{target} has {have} but not {', '.join(missing)}: an op is provided whole or not at all")
    provided = provided_ops(owner)
    declared = getattr(owner, "op_tolerances", None)
    if declared is None:
        declared = {}
    if not isinstance(declared, dict):
        raise ValueError(f"{target}: op_tolerances must be a dict of op to tolerance, got {declared!r}")
    for op, tolerance in declared.items():
        if op not in provided:
            known = "an op it does not provide" if op in OPS else f"no op (ops: {', '.join(OPS)})"
            raise ValueError(f"{target}: op_tolerances names {op!r}, {known}")
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 <= tolerance < 1:
            raise ValueError(f"{target}: op_tolerances[{op!r}] must be a number in [0, 1), got {tolerance!r}")
    undeclared = [op for op in provided if op not in declared]
    if undeclared:
        raise ValueError(
            f"{target} provides {', '.join(undeclared)} without a tolerance: declare it in op_tolerances "
            "(0.0 when it keeps the NumPy reference's bits)"
        )
    return {op: float(declared[op]) for op in provided}


def signature_problem(target: str, owner: Any, bound: bool) -> str | None:
    """The first method of ``owner`` (a class, or a created backend when ``bound``) whose
    signature does not take the arguments the engine passes, or what is wrong with the ops it
    provides; None when all is well. The three kernels must be there; ``set_threads`` and each
    op's methods are checked only when they are."""
    try:
        ops = op_tolerances(owner)
    except ValueError as exc:
        return str(exc)
    calls = {
        **KERNEL_CALLS,
        **{m: a for m, a in OPTIONAL_CALLS.items() if getattr(owner, m, None) is not None},
        **{m: a for op in ops for m, a in OP_METHODS[op].items()},
    }
    for method, arguments in calls.items():
        problem = call_problem(target, owner, method, arguments, bound)
        if problem is not None:
            return problem
    return None


def _metadata(target: str, factory: Any) -> dict[str, Any]:
    """The metadata read from the class, each with its documented default when it is absent.

    Raises ValueError naming the first attribute of the wrong type.
    """

    def read(name: str, kind: type, default: Any, call: bool = False) -> Any:
        value = getattr(factory, name, None)
        if value is None:
            return default
        if call:
            problem = call_problem(target, factory, name, (), bound=True)
            if problem is not None:
                raise ValueError(problem + " (metadata is read from the class: make it a staticmethod)")
            value = value()
            if value is None:
                return default
        if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
            raise ValueError(f"{target}: {name}{'()' if call else ''} must be {kind.__name__}, got {value!r}")
        return value

    role = read("role", str, None)
    if role is not None and role not in ROLES:
        raise ValueError(f"{target} declares the role {role!r}; a role is one of {', '.join(ROLES)}")
    threads = read("default_threads", int, None, call=True)
    if threads is not None and threads < 1:
        raise ValueError(f"{target}: default_threads() must be at least 1, got {threads}")
    return {
        # a class that says what it is in its docstring only: its first paragraph, as one line
        "description": read("description", str, None) or _docstring_summary(factory),
        "order_preserving": read("order_preserving", bool, False),
        "thread_control": read("thread_control", str, None),
        "default_threads": threads,
        "role": role,
        "configuration": read("configuration", str, None, call=True),
        "unavailable_reason": read("unavailable_reason", str, None, call=True),
    }


def _docstring_summary(factory: Any) -> str | None:
    """The first paragraph of the class's own docstring (not one it inherits), as one line."""
    own = factory.__dict__.get("__doc__") if inspect.isclass(factory) else getattr(factory, "__doc__", None)
    if not isinstance(own, str) or not own.strip():
        return None
    return " ".join(inspect.cleandoc(own).split("\n\n", 1)[0].split())


def describe(entry: BackendEntry) -> BackendInfo:
    """Load the entry point (not the backend) and read its metadata; never raises."""

    def info(available: bool, reason: str | None, **meta: Any) -> BackendInfo:
        fields: dict[str, Any] = {
            key: meta.get(key)
            for key in ("description", "order_preserving", "thread_control", "default_threads", "role", "configuration")
        }
        fields["ops"] = meta.get("ops", ())
        return BackendInfo(
            entry.name,
            entry.target,
            entry.distribution,
            entry.distribution_version,
            available=available,
            reason=reason,
            **fields,
        )

    if entry.conflicts:
        targets = ", ".join((entry.target, *entry.conflicts))
        return info(False, f"registered more than once with different targets: {targets}")
    try:
        factory = entry.load()
    except Exception as exc:  # a broken plugin is reported, never fatal
        return info(False, f"cannot load {entry.target}: {type(exc).__name__}: {exc}")
    declared = getattr(factory, "name", entry.name)
    if declared != entry.name:
        return info(False, f"{entry.target} calls itself {declared!r} but is registered as {entry.name!r}")
    try:
        meta = _metadata(entry.target, factory)
    except ValueError as exc:
        return info(False, str(exc))
    except Exception as exc:  # the plugin's own code failed
        return info(False, f"{entry.target} metadata failed: {type(exc).__name__}: {exc}")
    reason = meta.pop("unavailable_reason")
    if reason is None and inspect.isclass(factory):  # what cannot run here need not be callable
        reason = signature_problem(entry.target, factory, bound=False)
    return info(reason is None, reason, ops=provided_ops(factory) if reason is None else (), **meta)


def describe_all() -> list[BackendInfo]:
    return [describe(e) for e in entries().values()]


def roles(infos: list[BackendInfo]) -> Roles:
    """The backend that declares each role, when exactly one available backend does."""

    def holder(role: str) -> str | None:
        named = [b.name for b in infos if b.available and b.role == role]
        return named[0] if len(named) == 1 else None

    return Roles(reference=holder("reference"), peer=holder("peer"))


def require_registered(names: list[str], known: dict[str, BackendEntry] | None = None) -> None:
    """Unusable input (exit 2) naming the first name that no entry point registers."""
    known = entries() if known is None else known
    for name in names:
        if name not in known:
            listed = ", ".join(known) or "none"
            raise UnusableInput(f"no backend {name!r} is registered (registered: {listed})")


def create(name: str) -> Backend:
    """A ready backend by its registered name; a ``PtregError`` says why when it cannot be."""
    known = entries()
    require_registered([name], known)
    entry = known[name]
    meta = describe(entry)
    if not meta.available:
        raise UnusableInput(f"backend {name!r} is unavailable: {meta.reason}")
    try:
        backend = entry.load()()
    except Exception as exc:
        raise UnusableInput(f"backend {name!r} failed to start: {type(exc).__name__}: {exc}") from exc
    problem = signature_problem(entry.target, backend, bound=True)
    if problem is not None:
        raise UnusableInput(f"backend {name!r}: {problem}")
    created: Backend = backend
    return created


def runtime_details(backend: Backend) -> dict[str, Any] | None:
    """What the backend's optional ``runtime_details()`` hook reports for the provenance of a
    cell (e.g. a compiler's threading layer), or None when it has no such hook."""
    hook = getattr(backend, "runtime_details", None)
    if not callable(hook):
        return None
    details = hook()
    return dict(details) if isinstance(details, dict) else {"value": repr(details)}
