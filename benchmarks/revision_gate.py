"""The CI gate of one run, on this machine: two revisions of a temporary project as two arms.

A git repository holds ``work.py``, which sleeps and reports how long it slept (``work_ms``),
at two commits. An evaluator whose arms are HEAD~1 and HEAD is frozen, proposed once, and run
again and again through the ``ptreg`` command line, as a CI job runs it. Each run's verdicts
(``arms.better_word``, what the run's tables print) are counted for ``wall_seconds`` and
``work_ms``, without a margin and at a margin of 5%:

- A/A: the same sleep at both commits; any ``better`` or ``worse`` is a false alarm;
- A/B: the later commit sleeps 1.5x as long; ``worse`` is a detection.

    python benchmarks/revision_gate.py --runs 20 --json

Real timings on a shared machine: the numbers are this machine's at the time, not a property
of ptreg alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from ptreg.engine.environment import cpu_model
from ptreg.engine.workloads.arms import better_word
from ptreg.records.evaluator import PTREG_METRICS, MetricDeclaration
from ptreg.records.run_results import MetricComparison

WORK = """\
import json, os, time
start = time.perf_counter()
time.sleep({sleep})
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write(json.dumps({{"work_ms": 1000 * (time.perf_counter() - start)}}) + "\\n")
"""
DECLARED = {"work_ms": MetricDeclaration(better="lower", unit="ms", compare="ratio"), **PTREG_METRICS}
METRICS = ("wall_seconds", "work_ms")
MARGIN = 1.05
GIT_ENV = dict.fromkeys(("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"), "bench") | dict.fromkeys(
    ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"), "bench@example.com"
)


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def ptreg(project: Path, *args: str) -> str:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "ptreg", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
    )
    if done.returncode != 0:
        raise SystemExit(f"ptreg {' '.join(args[:2])} failed: {(done.stderr or done.stdout).strip()[-400:]}")
    return done.stdout


def project(folder: Path, before: float, after: float, repeats: int) -> Path:
    folder.mkdir()
    git(folder, "init", "-q")
    for n, sleep in enumerate((before, after)):
        (folder / "work.py").write_text(WORK.format(sleep=sleep))
        (folder / "notes.txt").write_text(f"commit {n}\n")
        git(folder, "add", "work.py", "notes.txt")
        git(folder, "commit", "-q", "-m", f"commit {n}")
    spec = {
        "name": "ci-gate",
        "workload": "command",
        "command": ["python3", "work.py", "--seed", "{seed}"],
        "arms": {"before": {"revision": "HEAD~1"}, "after": {"revision": "HEAD"}},
        "baseline": "before",
        "metrics": {"work_ms": {"better": "lower", "unit": "ms", "compare": "ratio"}},
        "repeats": repeats,
        "seed": 0,
        "timeout_seconds": 60,
    }
    (folder / "gate.json").write_text(json.dumps(spec))
    ptreg(folder, "init")
    ptreg(folder, "evaluator", "freeze", "gate.json")
    ptreg(
        folder,
        *("new", "--no-input", "--id", "gate", "--name", "gate", "--family", "runtime-perf"),
        *("--kind", "runtime-benchmark", "--question", "Is HEAD slower than HEAD~1?", "--method", "vendor-blas"),
        *("--objective", "command-latency", "--evaluator", "ci-gate", "--budget-seconds", "3600"),
        *("--tracking-issue", "me/bench#1", "--worked-if", "better(wall_seconds, arm=after, over=before)"),
    )
    return folder


def scenario(folder: Path, before: float, after: float, repeats: int, runs: int) -> dict[str, Any]:
    where = project(folder, before, after, repeats)
    words: dict[str, Counter[str]] = {f"{m} {k}": Counter() for m in METRICS for k in ("no margin", "margin 1.05")}
    ratios: dict[str, list[float]] = {m: [] for m in METRICS}
    for _ in range(runs):
        results = json.loads(ptreg(where, "run", "gate", "--json"))["results"]
        versus = next(c for c in results["cells"] if c["backend"] == "after")["versus"]["before"]
        for metric in METRICS:
            found = MetricComparison.model_validate(versus[metric])
            ratios[metric].append(found.estimate)
            words[f"{metric} no margin"][better_word(found, DECLARED[metric])] += 1
            words[f"{metric} margin 1.05"][better_word(found, DECLARED[metric], MARGIN)] += 1
    return {
        "before_s": before,
        "after_s": after,
        "rounds": repeats,
        "runs": runs,
        "verdicts": {k: dict(v) for k, v in words.items()},
        "ratio_range": {m: [round(min(r), 3), round(max(r), 3)] for m, r in ratios.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each scenario")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="revision-gate-") as tmp:
        found = {
            "machine": cpu_model(),
            "a/a": scenario(Path(tmp, "aa"), 0.05, 0.05, args.rounds, args.runs),
            "a/b 1.5x": scenario(Path(tmp, "ab"), 0.10, 0.15, args.rounds, args.runs),
        }
    if args.json:
        print(json.dumps(found, indent=1))
        return
    print(f"machine: {found['machine']}")
    for name in ("a/a", "a/b 1.5x"):
        scene = found[name]
        print(f"\n{name}: {scene['runs']} runs of {scene['rounds']} rounds, ratios {scene['ratio_range']}")
        for key, counts in scene["verdicts"].items():
            print(f"  {key:28} {counts}")


if __name__ == "__main__":
    main()
