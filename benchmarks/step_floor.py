"""The floor of a tinygpt-train step: how long each part of it would take on this machine at its
roofline, and how far a run's measured parts are above that.

A part (a matmul kernel over every linear layer, or one op forward and backward) cannot take
less than its flops at the compute peak, nor less than its bytes at the memory bandwidth: its
floor is the larger of the two (``step_counts.py`` counts the work, ``step_ceilings.py`` measures
the ceilings at each thread count). Given runs' ``results.json``, for each backend, config and
thread count: the median over the step samples of each part's ms, its floor, measured / floor
("x above the floor"), and the whole step against the sum of the floors.

    python benchmarks/step_floor.py --results RUN/results.json --json floor.json
    python benchmarks/step_floor.py --no-measure floor.json --results RUN/results.json
    python benchmarks/step_floor.py -c xl            # the floors alone, no run
    python benchmarks/step_floor.py --remember       # measure, and cache for ptreg run and bench

A run's ``results.json`` comes from ``ptreg run`` (in its run folder) or ``ptreg bench --json``.
Errors are one line, ``step_floor: error: ...``, exit 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import step_ceilings
from pydantic import BaseModel, ConfigDict, ValidationError
from step_ceilings import AtThreads, Ceilings

from ptreg.engine import ceilings as machine_ceilings
from ptreg.errors import PtregError, UnusableInput
from ptreg.records import step_work
from ptreg.records.configs import CONFIGS, GPTConfig
from ptreg.records.evaluator import EvaluatorSpec
from ptreg.records.measured import FUSED_OPS
from ptreg.records.problems import first_schema_error
from ptreg.records.run_results import Cell, RunResults
from ptreg.records.step_work import PARTS, Floor, roofline
from ptreg.store.jsonio import atomic_write_text, decode_json, read_bytes
from ptreg.store.runs import RESULTS_FILE, read_results
from ptreg.text import json_type, printable, shorten

WIDTH = 100  # the table's columns, at most
MAX_SAVED_BYTES = 64 * 2**20


def floors(config: GPTConfig, at: AtThreads) -> dict[str, Floor]:
    return step_work.floors(config, at.peak_gflops, at.bandwidth)


# --------------------------------------------------------------------------- reading


class _Saved(BaseModel):
    """A file ``--json`` wrote: only its ceilings are read back."""

    model_config = ConfigDict(extra="ignore")
    ceilings: Ceilings


def read_ceilings(path: Path) -> Ceilings:
    raw = decode_json(read_bytes(path, MAX_SAVED_BYTES, follow=False), str(path))
    if not isinstance(raw, dict):
        raise UnusableInput(f"{path}: expected the JSON object --json writes, got {json_type(raw)}")
    try:
        return _Saved.model_validate(raw).ceilings
    except ValidationError as exc:
        raise UnusableInput(first_schema_error(exc, str(path))) from None


def read_run(path: Path) -> RunResults:
    """A tinygpt-train run's results, read and validated by ptreg's own loader: ``path`` is the
    run folder or its results.json (under any name, as ``ptreg bench --json`` leaves it)."""
    folder, name = (path, RESULTS_FILE) if path.is_dir() else (path.parent, path.name)
    if name != RESULTS_FILE:  # read_results reads folder/results.json: give it a folder of one
        return _read_named(path)
    return _checked(read_results(folder, root=folder), path)


def _read_named(path: Path) -> RunResults:
    raw = decode_json(read_bytes(path, follow=False), str(path))
    if not isinstance(raw, dict):
        raise UnusableInput(f"{path}: expected a run's results, a JSON object, got {json_type(raw)}")
    try:
        return _checked(RunResults.model_validate(raw), path)
    except ValidationError as exc:
        raise UnusableInput(first_schema_error(exc, str(path))) from None


def _checked(results: RunResults, path: Path) -> RunResults:
    spec = results.spec
    if not isinstance(spec, EvaluatorSpec) or spec.workload != "tinygpt-train":
        workload = printable(shorten(getattr(spec, "workload", "of arms")))
        raise UnusableInput(f"{path}: a run of workload {workload}, not tinygpt-train: it times no step")
    return results


# --------------------------------------------------------------------------- measured parts


def _timed(sample: Any) -> dict[str, float]:
    return {**sample.kernel_seconds, **(sample.op_seconds or {})}


def _median_ms(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return 1e3 * statistics.median(known) if known and len(known) == len(values) else None


def measured_ms(cell: Cell) -> dict[str, float | None]:
    """Median over the cell's step samples of each part's ms, of what no part took ("other"),
    and of the whole step. A part some sample did not time is unknown (None), never zero."""
    samples = [_timed(s) for s in cell.step_samples or []]
    found = {part: _median_ms([timed.get(part) for timed in samples]) for part in PARTS}
    for part in FUSED_OPS:  # 0, or absent from a run before it: the step ran the ops it fuses apart
        found[part] = found[part] or None
    apart = [p for p in PARTS if p not in FUSED_OPS]
    found["other"] = _median_ms(
        [
            s.seconds - sum(timed.values()) if all(p in timed for p in apart) else None
            for s, timed in zip(cell.step_samples or [], samples, strict=True)
        ]
    )
    found["step"] = _median_ms([s.seconds for s in cell.step_samples or []])
    return found


@dataclass
class Block:
    """One config at one thread count of one run: its floors and each backend's measured parts."""

    source: str
    config: GPTConfig
    threads: int
    at: AtThreads
    floors: dict[str, Floor]
    measured: dict[str, dict[str, float | None]]  # by backend (as the file names it), by part
    notes: list[str]


def blocks(path: Path, results: RunResults, ceilings: Ceilings) -> list[Block]:
    spec = results.spec
    assert isinstance(spec, EvaluatorSpec)  # _checked saw to it
    at = ceilings.threads.get(spec.threads)
    if at is None:
        measured_at = ", ".join(map(str, sorted(ceilings.threads)))
        raise UnusableInput(
            f"{path}: measured at {spec.threads} thread(s); the ceilings are at {measured_at} (--threads)"
        )
    source = f"run {results.run_id}" if results.run_id else f"bench of {_show(results.started_at)}"
    found = []
    for name in spec.configs:
        config = CONFIGS[name]
        block = Block(source, config, spec.threads, at, floors(config, at), {}, [])
        for cell in results.cells:
            if cell.config != name:
                continue
            if cell.backend in block.measured:  # a second cell would silently replace the first
                raise UnusableInput(f"{path}: two cells of backend {shorten(cell.backend)} at config {name}")
            if cell.status != "measured" or not cell.step_samples:
                block.notes.append(f"{_show(cell.backend)}: {cell.status}, no step samples")
                continue
            block.measured[cell.backend] = measured_ms(cell)
        found.append(block)
    return found


def floor_only(config: GPTConfig, threads: int, ceilings: Ceilings) -> Block:
    at = ceilings.threads[threads]
    return Block("no run", config, threads, at, floors(config, at), {}, [])


# --------------------------------------------------------------------------- printing


def _show(value: Any, limit: int = 40) -> str:
    """A value read from a file, as a terminal may show it: one line, at most ``limit`` characters."""
    if value is None:
        return "unknown"
    text = printable(str(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cell(values: list[float]) -> str:
    if not values:
        return "?"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def machine_lines(ceilings: Ceilings) -> list[str]:
    m, load = ceilings.machine, ceilings.load_average
    cache = m.get("last_level_cache_bytes")
    lines = [
        f"CPU: {_show(m.get('cpu_model'), 60)}; {_show(m.get('cpu_count'))} CPUs, last-level cache "
        + (f"{cache / 2**20:g} MiB" if isinstance(cache, int | float) else "unknown"),
        f"OPENBLAS_CORETYPE={_show(m.get('OPENBLAS_CORETYPE'))}, "
        f"OPENBLAS_L2_SIZE={_show(m.get('OPENBLAS_L2_SIZE'))}; numba threading layer "
        f"{_show(m.get('numba_threading_layer'))}",
        f"load average (1, 5, 15 min) before: {', '.join(f'{v:.2f}' for v in load.before)}; "
        f"after: {', '.join(f'{v:.2f}' for v in load.after)}",
        f"\nCeilings, median (min-max) of {_show(ceilings.settings.get('rounds'))} interleaved rounds:",
    ]
    counts = sorted(ceilings.threads)
    rows = []
    for kind, unit in (("compute_gflops", "GFLOP/s"), ("bandwidth_gbs", "GB/s")):
        names = dict.fromkeys(name for n in counts for name in getattr(ceilings.threads[n], kind))
        for name in names:
            rows.append(
                [f"{unit} {_show(name)}", *(_cell(getattr(ceilings.threads[n], kind).get(name, [])) for n in counts)]
            )
    if all(ceilings.threads[n].cache_gbs is not None for n in counts):
        rows.append(["GB/s triad in cache", *(_cell(ceilings.threads[n].cache_gbs or []) for n in counts)])
    rows.append(["peak GFLOP/s (the floors')", *(f"{ceilings.threads[n].peak_gflops:.1f}" for n in counts)])
    rows.append(["bandwidth GB/s (the floors')", *(f"{ceilings.threads[n].bandwidth:.1f}" for n in counts)])
    lines += _render(["ceiling", *(f"{n} thread(s)" for n in counts)], rows)
    lines.append("A part with fewer flops per byte than peak / bandwidth is memory bound.")
    return lines


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def _times(measured: float | None, floor: float | None) -> str:
    # no floor, or one of 0: a part whose every call the fused ops took has no work of its own
    return "?" if measured is None or not floor else f"{measured / floor:.1f}x"


def _render(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        return "  ".join([first, *(cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True))]).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(row) for row in rows)]


def block_lines(block: Block) -> list[str]:
    """The block's table; backends side by side, as many as fit in WIDTH, the rest below."""
    work = step_work.step_work(block.config)
    step_floor_ms = 1e3 * sum(f.seconds for f in block.floors.values())
    base_rows = [
        [
            part,
            f"{w.flops / 1e9:.3f}",
            f"{w.bytes / 1e6:.1f}",
            block.floors[part].bound,
            f"{1e3 * block.floors[part].seconds:.3f}",
        ]
        for part, w in work.items()
    ]
    base_rows.append(["other", "-", "-", "-", "-"])
    base_rows.append(
        [
            "step",
            f"{sum(w.flops for w in work.values()) / 1e9:.3f}",
            f"{sum(w.bytes for w in work.values()) / 1e6:.1f}",
            "",
            f"{step_floor_ms:.3f}",
        ]
    )
    base_header = ["part", "GFLOP", "MB", "bound", "floor ms"]
    floor_ms: list[float | None] = [1e3 * block.floors[p].seconds for p in work] + [None, step_floor_ms]
    keys = [*work, "other", "step"]
    title = (
        f"{block.config.name} at {block.threads} thread(s), {block.source}: peak {block.at.peak_gflops:.1f} "
        f"GFLOP/s, bandwidth {block.at.bandwidth:.1f} GB/s"
    )
    lines = ["", title]
    backends = list(block.measured)
    if not backends:
        return [*lines, *_render(base_header, base_rows), *cache_lines(block), *block.notes]
    while backends:
        header, rows = list(base_header), [list(r) for r in base_rows]
        taken = 0
        for backend in backends:
            measured = block.measured[backend]
            more = [f"{_show(backend)} ms", "x floor"]
            extra = [[_ms(measured[k]), _times(measured[k], f)] for k, f in zip(keys, floor_ms, strict=True)]
            trial = _render(header + more, [r + e for r, e in zip(rows, extra, strict=True)])
            if taken and max(map(len, trial)) > WIDTH:
                break
            header += more
            rows = [r + e for r, e in zip(rows, extra, strict=True)]
            taken += 1
        lines += _render(header, rows)
        backends = backends[taken:]
        if backends:
            lines.append("")
    return lines + cache_lines(block) + block.notes


def cached_floor_ms(block: Block) -> float | None:
    """The step's floor if every byte came at the in-cache triad's bandwidth instead: for a
    reader to weigh the parts whose arrays stay in cache (it models no cache, only swaps a ceiling)."""
    cached = block.at.cache_bandwidth
    if cached is None:
        return None
    work = step_work.step_work(block.config).values()
    return 1e3 * sum(roofline(w, block.at.peak_gflops, cached).seconds for w in work)


def cache_lines(block: Block) -> list[str]:
    cached = cached_floor_ms(block)
    if cached is None:
        return []
    return [
        f"with every byte at the in-cache bandwidth ({block.at.cache_bandwidth:.1f} GB/s) the step's floor "
        f"would be {cached:.3f} ms"
    ]


def block_json(block: Block) -> dict[str, Any]:
    work = step_work.step_work(block.config)
    step_floor_ms = 1e3 * sum(f.seconds for f in block.floors.values())
    return {
        "source": block.source,
        "config": block.config.name,
        "threads": block.threads,
        "peak_gflops": block.at.peak_gflops,
        "bandwidth_gbs": block.at.bandwidth,
        "parts": {
            part: {
                "flops": w.flops,
                "bytes": w.bytes,
                "bound": block.floors[part].bound,
                "floor_ms": 1e3 * block.floors[part].seconds,
            }
            for part, w in work.items()
        },
        "step_floor_ms": step_floor_ms,
        "step_floor_in_cache_ms": cached_floor_ms(block),
        "measured_ms": block.measured,
        "x_floor": {
            backend: {
                part: (
                    None if ms is None or not block.floors[part].seconds else ms / (1e3 * block.floors[part].seconds)
                )
                for part, ms in measured.items()
                if part in block.floors
            }
            | {"step": None if measured["step"] is None else measured["step"] / step_floor_ms}
            for backend, measured in block.measured.items()
        },
        "notes": block.notes,
    }


# --------------------------------------------------------------------------- the cache


def remember(ceilings: Ceilings, where: str) -> Path:
    """Cache each thread count's peak and bandwidth (the floors' ceilings) for this machine;
    ceilings another CPU measured (as the file records it) are refused."""
    here = machine_ceilings.machine_key()
    for fact in ("cpu_model", "cpu_count"):
        if ceilings.machine.get(fact) != here[fact]:
            said = _show(ceilings.machine.get(fact))
            raise UnusableInput(f"{where}: measured where {fact} was {said}, here {_show(here[fact])}; not cached")
    return machine_ceilings.remember(
        {
            n: machine_ceilings.AtThreads(
                peak_gflops=at.peak_gflops, bandwidth_gbs=at.bandwidth, cache_gbs=at.cache_bandwidth
            )
            for n, at in ceilings.threads.items()
        }
    )


# --------------------------------------------------------------------------- the command


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="step_floor", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--results", type=Path, action="append", default=[], help="a run's results.json or folder (repeatable)"
    )
    parser.add_argument(
        "-c", "--config", action="append", default=[], choices=list(CONFIGS), help="floors of this config too"
    )
    parser.add_argument(
        "--threads",
        type=int,
        action="append",
        default=[],
        help="ceilings at this thread count (default 1 and 2, and every run's)",
    )
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds of the ceilings")
    parser.add_argument("--seconds", type=float, default=0.1, help="length of one compute peak call")
    parser.add_argument("--calls", type=int, default=5, help="back-to-back STREAM calls per sample")
    parser.add_argument("--accumulators", type=int, default=24, help="accumulator vectors of the peak loops")
    parser.add_argument("--json", type=Path, help="write the ceilings, floors and every table here")
    parser.add_argument("--no-measure", type=Path, metavar="FILE", help="reuse the ceilings a --json FILE saved")
    parser.add_argument(
        "--remember",
        action="store_true",
        help="cache the ceilings for this machine, where `ptreg run` and `ptreg bench` read them to record "
        "each part's floor (with --no-measure: the ceilings FILE saved, which must be this machine's)",
    )
    args = parser.parse_args(argv)
    for option, value in (
        ("--rounds", args.rounds),
        ("--calls", args.calls),
        *(("--threads", n) for n in args.threads),
    ):
        if value < 1:
            parser.error(f"{option} must be at least 1, got {value}")
    if not args.seconds > 0:
        parser.error(f"--seconds must be positive, got {args.seconds}")
    return args


def run(args: argparse.Namespace) -> int:
    runs = [(path, read_run(path)) for path in args.results]  # every file checked before measuring
    if args.no_measure is not None:
        ceilings = read_ceilings(args.no_measure)
    else:
        wanted = set(args.threads or [1, 2]) | {r.spec.threads for _, r in runs if isinstance(r.spec, EvaluatorSpec)}
        ceilings = step_ceilings.measure(sorted(wanted), args.rounds, args.seconds, args.calls, args.accumulators)
    found = [block for path, results in runs for block in blocks(path, results, ceilings)]
    for name in args.config or ([] if runs else ["xl"]):
        found += [floor_only(CONFIGS[name], threads, ceilings) for threads in sorted(ceilings.threads)]
    if args.remember:
        where = str(args.no_measure) if args.no_measure is not None else "the ceilings just measured"
        print(f"cached the ceilings for this machine in {remember(ceilings, where)}", file=sys.stderr)
    lines = machine_lines(ceilings)
    for block in found:
        lines += block_lines(block)
    print("\n".join(lines))
    if args.json is not None:
        document = {"ceilings": ceilings.model_dump(mode="json"), "blocks": [block_json(b) for b in found]}
        atomic_write_text(args.json, json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(arguments(argv))
    except PtregError as exc:
        print(f"step_floor: error: {printable(exc.message)}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
