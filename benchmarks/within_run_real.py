"""Two arms of a command evaluator measured for real on this machine, run after run: identical
arms (A/A, both sleeping the same time) and arms half again apart (0.1 s against 0.15 s), each
run's wall-time ratio of arm b over arm a with its interval and the verdict ptreg gives
(``workloads.arms.better_word``, with wall time's declared margin).

    python benchmarks/within_run_real.py --runs 20
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from ptreg.engine.environment import cpu_model
from ptreg.engine.executor import Executor
from ptreg.engine.measurement import measure
from ptreg.engine.workloads.arms import better_word
from ptreg.records.evaluator import PTREG_METRICS, WALL_SECONDS, parse_spec

NAP = """\
import json, os, sys, time
time.sleep(float(sys.argv[1]))
with open(os.environ["PTREG_METRICS"], "w") as out:
    out.write(json.dumps({"slept": float(sys.argv[1])}) + "\\n")
"""


def nap_spec(a: str, b: str, repeats: int = 6) -> dict[str, object]:
    """A command evaluator of two arms that sleep ``a`` and ``b`` seconds (the tests use it too)."""
    return {
        "name": "naps",
        "workload": "command",
        "command": ["python3", "nap.py", "{seconds}"],
        "arms": {"a": {"seconds": a}, "b": {"seconds": b}},
        "baseline": "a",
        "inputs": ["nap.py"],
        "metrics": {"slept": {"better": "lower", "unit": "s"}},
        "repeats": repeats,
        "seed": 0,
        "timeout_seconds": 30,
    }


def runs(root: Path, a: str, b: str, count: int, repeats: int) -> list[dict[str, Any]]:
    spec = parse_spec(nap_spec(a, b, repeats), "spec")
    found = []
    for _ in range(count):
        measured = measure(spec, Executor(), root=root)
        cell = next(c for c in measured.cells if c.backend == "b")
        comparison = (cell.versus or {})["a"][WALL_SECONDS]
        assert comparison.ci is not None
        found.append(
            {
                "ratio": comparison.estimate,
                "low": comparison.ci.low,
                "high": comparison.ci.high,
                "verdict": better_word(comparison, PTREG_METRICS[WALL_SECONDS]),
                "verdict_no_margin": better_word(
                    comparison, PTREG_METRICS[WALL_SECONDS].model_copy(update={"margin": None})
                ),
            }
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "nap.py").write_text(NAP)
        table = {
            "A/A 0.1 s": runs(root, "0.1", "0.1", args.runs, args.repeats),
            "1.5x 0.1 s / 0.15 s": runs(root, "0.1", "0.15", max(2, args.runs // 4), args.repeats),
        }
    if args.json:
        print(json.dumps({"cpu": cpu_model(), "runs": table}, indent=1))
        return
    print(f"{cpu_model()}: b over a, wall time, {args.repeats} rounds a run")
    print("| arms | runs | better/worse (margin 5%) | better/worse (no margin) | ratios (95% CI), run by run |")
    print("| --- | --- | --- | --- | --- |")
    for name, found in table.items():
        flagged = sum(r["verdict"] in ("better", "worse") for r in found)
        plain = sum(r["verdict_no_margin"] in ("better", "worse") for r in found)
        shown = "; ".join(f"{r['ratio']:.3f} ({r['low']:.3f}-{r['high']:.3f}) {r['verdict']}" for r in found)
        print(f"| {name} | {len(found)} | {flagged} | {plain} | {shown} |")


if __name__ == "__main__":
    main()
