"""Workload plugins broken in the ways a third party's might be, for tests/engine/test_workloads_discovery.py."""

from __future__ import annotations

from typing import Any

from ptreg.engine.workloads.arms import ArmsWorkload


class NotAWorkload:
    name = "fake"


class WrongPrepare(ArmsWorkload):
    name = "fake"
    description = "prepare takes one argument too few"

    def prepare(self, task: Any) -> Any:  # type: ignore[override]
        return None


class Abstract(ArmsWorkload):
    name = "fake"
    description = "forgets prepare"


class Misnamed(ArmsWorkload):
    name = "another"
    description = "calls itself by another name"

    def prepare(self, task: Any, backend: Any) -> Any:
        return None


class BadMetrics(ArmsWorkload):
    name = "fake"
    description = "metrics that are not declarations"
    metrics = {"score": "higher"}  # type: ignore[dict-item]  # noqa: RUF012 - a plugin's mistake, on purpose

    def prepare(self, task: Any, backend: Any) -> Any:
        return None


class BadOptionalFields(ArmsWorkload):
    name = "fake"
    description = "an optional field that is none of its own"
    spec_fields = {"size": "how big"}  # noqa: RUF012 - a plugin's mistake, on purpose
    optional_fields = frozenset({"shape"})

    def prepare(self, task: Any, backend: Any) -> Any:
        return None


class Fine(ArmsWorkload):
    name = "fake"
    description = "a workload the engine can call"

    def prepare(self, task: Any, backend: Any) -> Any:
        return None


class NeedsAnExtra(Fine):
    """A workload whose evaluation tool is not installed here."""

    requires_modules = ("json", "ptreg_no_such_tool.api")
    install_hint = "pip install 'ptreg[no-such-tool]'"


class BadRequires(Fine):
    requires_modules = ["json"]  # type: ignore[assignment]  # noqa: RUF012  (the wrong shape, on purpose)
