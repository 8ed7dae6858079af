"""Workloads are plugins: the ``ptreg.workloads`` entry-point group, read as backends are.

A workload is found only through its entry point: ``kernels`` and ``tinygpt-train`` (which
compare backends on configs) and ``command`` (which compares arms of a command line on the
metrics its evaluator declares) are registered in ptreg's own pyproject.toml exactly as a third
party registers one. Listing reads each plugin's metadata and checks its methods' signatures
against the way the engine calls them, so a broken plugin is one line, never a traceback in
the middle of a run. The engine, the reports, comparisons, conditions and the site ask the
workload; none of them names one.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

from ...errors import PtregError, UnusableInput
from ...records.evaluator import AnySpec, ArmsSpec, EvaluatorSpec, MetricDeclaration
from ...text import shorten
from ..plugins import PluginEntry, call_problem, plugin_entries
from .arms import too_wide
from .base import Workload

ENTRY_POINT_GROUP = "ptreg.workloads"
KINDS = ("backends", "arms")
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# How the engine calls each method of a workload (after self): the arguments it passes.
CALLS: dict[str, tuple[str, ...]] = {
    "prepare": ("task", "backend"),
    "summarize": ("spec", "cell", "samples"),
    "compare": ("spec", "cells", "roles"),
    "tables": ("results",),
    "headline": ("cell",),
    "verdict": ("results",),
    "check_settings": ("spec",),
}


@dataclass(frozen=True)
class WorkloadInfo:
    """A workload's metadata and whether it can be used here, for `ptreg workloads`."""

    name: str
    target: str
    distribution: str | None
    distribution_version: str | None
    kind: str | None
    description: str | None
    unit: str | None  # of the number the evidence line quotes
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # declared by the workload itself
    spec_fields: dict[str, str] = field(default_factory=dict)  # its own fields of an evaluator spec
    optional_fields: list[str] = field(default_factory=list)  # of those, the ones a spec may leave out
    runs_code: bool = False  # an evaluator of it runs a command it names: trusted only where frozen
    available: bool = False
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def entries() -> dict[str, PluginEntry]:
    return plugin_entries(ENTRY_POINT_GROUP)


def _signature_problem(target: str, owner: type) -> str | None:
    """The first method whose signature does not take what the engine passes, or None."""
    for method, arguments in CALLS.items():
        problem = call_problem(target, owner, method, arguments, bound=False)
        if problem is not None:
            return problem
    return None


def _metadata(target: str, factory: Any) -> dict[str, Any]:
    """The class's declared metadata, checked; raises ValueError naming the first bad one."""
    kind = getattr(factory, "kind", None)
    if kind not in KINDS:
        raise ValueError(f"{target}: kind must be one of {', '.join(KINDS)}, got {shorten(kind)}")
    for name in ("description", "unit"):
        if not isinstance(getattr(factory, name, None), str):
            raise ValueError(f"{target}: {name} must be a string")
    metrics = getattr(factory, "metrics", {})
    fields = getattr(factory, "spec_fields", {})
    if not isinstance(metrics, dict) or not all(isinstance(m, MetricDeclaration) for m in metrics.values()):
        raise ValueError(f"{target}: metrics must map names to MetricDeclaration")
    if not isinstance(fields, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items()):
        raise ValueError(f"{target}: spec_fields must map field names to what each is")
    optional: object = getattr(factory, "optional_fields", frozenset())
    if not isinstance(optional, frozenset) or not optional <= set(fields):
        raise ValueError(f"{target}: optional_fields must be a frozenset of its spec_fields")
    runs_code = getattr(factory, "runs_code", False)
    if not isinstance(runs_code, bool):
        raise ValueError(f"{target}: runs_code must be True or False")
    modules = getattr(factory, "requires_modules", ())
    if not isinstance(modules, tuple) or not all(isinstance(m, str) and MODULE.fullmatch(m) for m in modules):
        raise ValueError(f"{target}: requires_modules must be a tuple of module names")
    hint = getattr(factory, "install_hint", None)
    if hint is not None and not isinstance(hint, str):
        raise ValueError(f"{target}: install_hint must be a string")
    return {
        "kind": kind,
        "description": factory.description,
        "unit": factory.unit,
        "metrics": {k: v.model_dump(mode="json", exclude_none=True) for k, v in metrics.items()},
        "spec_fields": dict(fields),
        "optional_fields": sorted(optional),
        "runs_code": runs_code,
    }


def missing_module(modules: tuple[str, ...]) -> str | None:
    """The first of ``modules`` that cannot be imported here, found without importing any."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):  # a parent package missing, or one that is not a package
            found = None
        if found is None:
            return module
    return None


def _not_installed(factory: type[Workload]) -> str | None:
    """'not installed: <how>' when a module the workload needs is missing; else None."""
    missing = missing_module(factory.requires_modules)
    if missing is None:
        return None
    return f"not installed: {factory.install_hint or f'module {missing} is missing'}"


def describe(entry: PluginEntry) -> WorkloadInfo:
    """Load the entry point and read its metadata; never raises."""

    def info(available: bool, reason: str | None, **meta: Any) -> WorkloadInfo:
        return WorkloadInfo(
            entry.name,
            entry.target,
            entry.distribution,
            entry.distribution_version,
            kind=meta.get("kind"),
            description=meta.get("description"),
            unit=meta.get("unit"),
            metrics=meta.get("metrics", {}),
            spec_fields=meta.get("spec_fields", {}),
            optional_fields=meta.get("optional_fields", []),
            runs_code=meta.get("runs_code", False),
            available=available,
            reason=reason,
        )

    if entry.conflicts:
        return info(
            False, f"registered more than once with different targets: {', '.join((entry.target, *entry.conflicts))}"
        )
    try:
        factory = entry.load()
    except Exception as exc:  # a broken plugin is reported, never fatal
        return info(False, f"cannot load {entry.target}: {type(exc).__name__}: {shorten(str(exc))}")
    if not (inspect.isclass(factory) and issubclass(factory, Workload)):
        return info(False, f"{entry.target} is not a subclass of ptreg.engine.workloads.base.Workload")
    try:  # a class attribute may be a descriptor that raises: the plugin's code, hostile
        declared = getattr(factory, "name", None)
        if declared != entry.name:
            return info(False, f"{entry.target} calls itself {shorten(declared)} but is registered as {entry.name!r}")
        meta = _metadata(entry.target, factory)
        abstract = sorted(getattr(factory, "__abstractmethods__", ()))
        if abstract:
            return info(False, f"{entry.target} does not implement {', '.join(abstract)}", **meta)
        problem = _signature_problem(entry.target, factory) or _not_installed(factory)
    except ValueError as exc:
        return info(False, str(exc))
    except Exception as exc:
        return info(False, f"{entry.target}: reading its metadata raised {type(exc).__name__}: {shorten(str(exc))}")
    return info(problem is None, problem, **meta)


def describe_all() -> list[WorkloadInfo]:
    return [describe(e) for e in entries().values()]


@cache
def workload_named(name: str) -> Workload:
    """The workload an evaluator names, created; unusable input (exit 2) in one line when no
    usable plugin registers that name."""
    known = entries()
    if name not in known:
        raise UnusableInput(
            f"no workload {name!r} is registered (registered: {', '.join(known) or 'none'}; see `ptreg workloads`)",
        )
    info = describe(known[name])
    if not info.available:
        raise UnusableInput(f"workload {name!r} is unavailable: {info.reason}")
    try:
        created: Workload = known[name].load()()
    except Exception as exc:
        raise UnusableInput(f"workload {name!r} failed to start: {type(exc).__name__}: {shorten(str(exc))}") from exc
    return created


def spec_problem(spec: AnySpec) -> str | None:
    """Why this spec cannot be measured by the workload it names, or None: the workload exists,
    the spec has its shape (backends or arms), and its own fields are the ones it declares."""
    try:
        workload = workload_named(spec.workload)
    except PtregError as exc:
        return exc.message
    if workload.kind == "backends":
        if not isinstance(spec, EvaluatorSpec):
            return f"workload {spec.workload!r} compares backends on configs; this spec names arms"
        if workload.metric is not None and spec.metric != workload.metric:
            return f"workload {spec.workload!r} is measured in {workload.metric!r}, not {spec.metric!r}"
        if spec.counts_instructions and not workload.counts_instructions:
            return f"workload {spec.workload!r} cannot count instructions: timer must be 'wall'"
    else:
        if not isinstance(spec, ArmsSpec):
            return f"workload {spec.workload!r} compares arms: give arms, not backends and configs"
        given = spec.settings
        unknown = sorted(set(given) - set(workload.spec_fields))
        if unknown:
            own = ", ".join(workload.spec_fields) or "none"
            return f"field {unknown[0]!r} is not one of workload {spec.workload!r}'s own (its fields: {own})"
        missing = [f for f in workload.spec_fields if f not in given and f not in workload.optional_fields]
        if missing:
            return f"workload {spec.workload!r} needs the field {missing[0]!r}: {workload.spec_fields[missing[0]]}"
        clash = sorted(set(spec.metrics) & set(workload.metrics))
        if clash:
            return f"metric {clash[0]!r} is declared by workload {spec.workload!r} itself"
        if not spec.metrics and not workload.metrics:
            return f"workload {spec.workload!r} declares no metrics: the spec must (metrics)"
        checked_out = sorted(spec.revisions)
        if checked_out and not workload.checks_out_revisions:
            return f"arm {checked_out[0]!r} names a git revision, which workload {spec.workload!r} does not check out"
        wide = too_wide(spec, workload)
        if wide is not None:
            return wide
    try:
        return workload.check_settings(spec)
    except Exception as exc:  # a plugin's check, hostile like its metadata
        return f"workload {spec.workload!r}'s check_settings raised {type(exc).__name__}: {shorten(str(exc))}"


def require_measurable(spec: AnySpec, where: str) -> Workload:
    """The spec's workload, when the spec is one it can measure; else unusable input naming ``where``."""
    problem = spec_problem(spec)
    if problem is not None:
        raise UnusableInput(f"{where}: {problem}")
    return workload_named(spec.workload)
