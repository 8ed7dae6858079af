"""A workload plugin is read as a backend is: lazily, its metadata and signatures checked, and a
broken one is one line, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ptreg.engine.plugins import PluginEntry
from ptreg.engine.workloads.discovery import ENTRY_POINT_GROUP, describe

sys.path.insert(0, str(Path(__file__).parent))


def described(target: str):  # type: ignore[no-untyped-def]
    return describe(PluginEntry("fake", f"fake_workloads:{target}", ENTRY_POINT_GROUP, None, None))


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("NotAWorkload", "is not a subclass of ptreg.engine.workloads.base.Workload"),
        ("WrongPrepare", "prepare(task) cannot be called as prepare(task, backend)"),
        ("Abstract", "does not implement prepare"),
        ("Misnamed", "calls itself 'another' but is registered as 'fake'"),
        ("BadMetrics", "metrics must map names to MetricDeclaration"),
        ("BadOptionalFields", "optional_fields must be a frozenset of its spec_fields"),
        ("Missing", "cannot load fake_workloads:Missing"),
    ],
)
def test_a_broken_plugin_is_one_line(target: str, problem: str) -> None:
    info = described(target)
    assert not info.available and info.reason is not None
    assert problem in info.reason and "\n" not in info.reason


def test_a_plugin_the_engine_can_call_is_available() -> None:
    info = described("Fine")
    assert info.available and info.kind == "arms" and info.reason is None


def test_a_name_registered_twice_is_refused() -> None:
    entry = PluginEntry("fake", "fake_workloads:Fine", ENTRY_POINT_GROUP, None, None, ("other:Thing",))
    info = describe(entry)
    assert not info.available and "registered more than once" in (info.reason or "")
