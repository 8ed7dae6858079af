"""How long `ptreg site` takes: a full build into an empty directory, and `--changed` after one
record was edited, each as a cold `ptreg` process, on

- this project's registry (attempts/: 11 attempts, 5 runs with their charts, 3 evaluators),
- the shared 66-attempt registry (../shared/data/posttrainllm-attempts.json, imported with
  `ptreg import`; no runs), and
- synthetic registries made by benchmarks/registry_scale.py's generator (no runs).

The query index is built before the first build (`ptreg index`), as any earlier command would
have. Each figure is the median and range of several repeats, with the pages written and the
machine's load before and after.

    python benchmarks/site_scale.py                      # project, shared, 10,000; 3 repeats
    python benchmarks/site_scale.py --sizes 1000 10000 --repeats 5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from registry_scale import synthetic_attempts  # the generator of the other scale figures (beside this script)

REPO = Path(__file__).resolve().parent.parent
SHARED_FILE = REPO.parent / "shared" / "data" / "posttrainllm-attempts.json"
PTREG = str(Path(sys.executable).parent / "ptreg")


def run(argv: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]}")
    return seconds, json.loads(done.stdout) if done.stdout.startswith("{") else {}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def edit_one(registry: Path, n: int) -> None:
    """Rewrite one record's lesson, as a hand edit or a `git pull` would."""
    name = sorted(p for p in registry.glob("*.json") if p.name != "registry.json")[0]
    record = json.loads(name.read_text(encoding="utf-8"))
    record["lesson"] = f"{record.get('lesson') or ''} (edited {n})"
    name.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def measure(label: str, registry: Path, repeats: int, work: Path) -> dict:
    r = ["--registry", str(registry)]
    subprocess.run([PTREG, *r, "index"], check=True, capture_output=True)
    row: dict = {"registry": label, "load before": load()}
    full, changed, reports = [], [], {}
    for n in range(repeats):
        out = work / f"site-{label}-{n}"
        seconds, report = run([PTREG, *r, "site", "-o", str(out), "--json"])
        full.append(seconds)
        reports["full"] = report
        edit_one(registry, n)
        seconds, report = run([PTREG, *r, "site", "-o", str(out), "--changed", "--json"])
        changed.append(seconds)
        reports["changed"] = report
        shutil.rmtree(out)
    row["full"] = summary(full)
    row["changed"] = summary(changed)
    row["pages"] = reports["full"]["pages"]
    row["rendered by --changed"] = reports["changed"]["rendered"]
    row["written by --changed"] = reports["changed"]["written"]
    row["load after"] = load()
    return row


def summary(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "samples": samples}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10000], help="Synthetic registries to build.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="Also write the samples here.")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ptreg-site-scale-") as tmp:
        work = Path(tmp)
        project = work / "project"
        shutil.copytree(REPO / "attempts", project, ignore=shutil.ignore_patterns(".ptreg*"))
        print("measuring the project's registry ...", file=sys.stderr, flush=True)
        rows.append(measure("project (11, 5 runs)", project, args.repeats, work))
        if SHARED_FILE.is_file():
            shared = work / "shared"
            subprocess.run(
                [PTREG, "--registry", str(shared), "import", str(SHARED_FILE)], check=True, capture_output=True
            )
            print("measuring the shared registry ...", file=sys.stderr, flush=True)
            rows.append(measure("shared (66)", shared, args.repeats, work))
        else:
            print(f"{SHARED_FILE} not found: the shared registry is left out", file=sys.stderr)
        for size in args.sizes:
            source = work / f"attempts-{size}.json"
            source.write_text(json.dumps(synthetic_attempts(size)))
            registry = work / f"synthetic-{size}"
            subprocess.run([PTREG, "--registry", str(registry), "import", str(source)], check=True, capture_output=True)
            print(f"measuring {size} synthetic attempts ...", file=sys.stderr, flush=True)
            rows.append(measure(f"synthetic ({size:,})", registry, args.repeats, work))
    print(
        "| registry | pages | full build, s | --changed after one edit, s | pages --changed rendered / wrote | load before / after |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        f, c = row["full"], row["changed"]
        print(
            f"| {row['registry']} | {row['pages']:,} | {f['median']:.1f} ({f['min']:.1f}-{f['max']:.1f}) "
            f"| {c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f}) | {row['rendered by --changed']} / {row['written by --changed']} "
            f"| {row['load before']} / {row['load after']} |"
        )
    print(
        f"\nseconds, cold `ptreg site` process, median (min-max) of {args.repeats}; {cpu_model()}, {os.cpu_count()} CPUs"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "cpu": cpu_model(), "python": sys.version, "cpus": os.cpu_count()}, indent=2)
            + "\n"
        )


if __name__ == "__main__":
    main()
