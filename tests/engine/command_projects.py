"""A project with one command evaluator, frozen (so consented to) and proposed as an attempt,
for the tests that run a command through ``ptreg run``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import complete_record, write_registry

ATTEMPT = "cmd-run"


def command_attempt(project: Path, script: str, arms: dict[str, dict[str, str]], *budget: str, **spec: Any) -> Path:
    """``script`` written as ``project/arm.py``, run by ``python arm.py`` under ``spec``'s
    changes, proposed as attempt ``cmd-run`` with ``budget`` (flags of ``ptreg new``); the
    registry's root."""
    from ptreg.cli import main
    from ptreg.gate.freezing import freeze

    project.mkdir(parents=True)
    (project / "arm.py").write_text(script)
    root = write_registry(project / "attempts", [complete_record("seed-record")])
    first = next(iter(arms))
    body = {
        "name": "cmd",
        "workload": "command",
        "command": [sys.executable, "arm.py", *(f"{{{p}}}" for p in arms[first])],
        "arms": arms,
        "baseline": first,
        "metrics": {"score": {"better": "higher", "unit": "fraction"}},
        "repeats": 1,
        "seed": 0,
        "timeout_seconds": 60,
        **spec,
    }
    (project / "spec.json").write_text(json.dumps(body))
    ref = freeze(root, project / "spec.json").evaluator.ref
    proposal = ["-r", str(root), "new", "--no-input", "--id", ATTEMPT, "--name", "cmd", "--family", "eval"]
    proposal += ["--kind", "model-evaluation", "--question", "What does the command's process tree do?"]
    proposal += ["--method", "vendor-blas", "--objective", "command-latency", "--evaluator", ref]
    proposal += ["--tracking-issue", "me/cmd#1", "--worked-if", f"metric(score, arm={first}) > 0"]
    proposal += ["--budget-seconds", "120", *budget]
    with pytest.raises(SystemExit) as exited:
        main(proposal)
    assert not exited.value.code
    return root
