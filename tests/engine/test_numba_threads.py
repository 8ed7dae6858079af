"""The numba backend's parallel thresholds: chosen per kernel from serial-against-parallel ratios,
remembered per machine and thread count in a cache nothing foreign, forged or broken can steer,
forced or left at the default only when told, obeyed by the kernel choice, and recorded with the
run. No assertion here reads a timing: the measurement is replaced where a choice is tested."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from ptreg_backends import numba_threads
from ptreg_backends.numba_step import PARALLEL_MIN_ELEMENTS, NumbaStepOps
from ptreg_backends.numba_threads import DEFAULT_PARALLEL_MIN, KERNELS, SIZES

HAS_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAS_NUMBA, reason="numba is not installed (pip install 'ptreg[numba]')")


def thresholds(**changes: Any) -> dict[str, int | None]:
    found: dict[str, int | None] = dict.fromkeys(KERNELS, SIZES[3])
    found.update(changes)
    return found


# --------------------------------------------------------------------------- the decision


def test_a_threshold_is_where_parallel_is_resolved_faster_from_there_up() -> None:
    win, loss, unclear = [0.5, 0.52, 0.49, 0.51], [1.4, 1.5, 1.3, 1.45], [0.3, 1.6, 0.4, 1.5]
    ratios = {
        "gelu_forward": {1 << 14: loss, 1 << 15: win, 1 << 16: win, 1 << 17: win},
        # a win at a small size does not count when a larger size loses again
        "residual_add": {1 << 14: win, 1 << 15: loss, 1 << 16: win, 1 << 17: win},
        "bias_forward": {1 << 14: loss, 1 << 15: loss, 1 << 16: loss, 1 << 17: [1.0] * 4},  # 1 is no win
        # a median below 1 is not enough: the interval must lie below it
        "layernorm_forward": {1 << 14: win, 1 << 15: win, 1 << 16: unclear, 1 << 17: win},
        "adamw_update": {1 << 14: win, 1 << 15: win, 1 << 16: [0.5, float("nan"), 0.5, 0.5], 1 << 17: win},
        "encoder_forward": {1 << 14: win, 1 << 15: [0.5]},  # one round: no interval, unknown
    }
    assert numba_threads.decide(ratios) == {
        "gelu_forward": 1 << 15,
        "residual_add": 1 << 16,
        "bias_forward": None,
        "layernorm_forward": 1 << 17,
        "adamw_update": 1 << 17,
        "encoder_forward": None,
    }


# --------------------------------------------------------------------------- the cache


def test_the_cache_sits_beside_the_tiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path))
    assert numba_threads.cache_path() == tmp_path / "numba-threads.json"


def test_an_entry_is_remembered_atomically_per_thread_count(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "numba-threads.json"
    numba_threads.remember(4, thresholds(gelu_forward=None), {"rounds": 5}, path)
    numba_threads.remember(2, thresholds(), {"rounds": 5}, path)
    assert numba_threads.remembered(2, path) == thresholds()
    assert numba_threads.remembered(4, path) == thresholds(gelu_forward=None)
    assert numba_threads.remembered(3, path) is None  # measured on no such thread count
    document = json.loads(path.read_text())
    assert len(document["entries"]) == 2
    assert [p.name for p in path.parent.iterdir()] == ["numba-threads.json"]  # no temporary left


def test_thresholds_outside_the_measured_sizes_are_not_written(tmp_path: Path) -> None:
    path = tmp_path / "numba-threads.json"
    for bad in (thresholds(gelu_forward=12345), {k: v for k, v in thresholds().items() if k != "gelu_forward"}):
        with pytest.raises(ValueError, match="not thresholds of"):
            numba_threads.remember(2, bad, {}, path)
    assert not path.exists()


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '{"format": 99, "entries": {}}', '{"format": 1, "entries": []}', "\ufeff{}", "x" * (1 << 21)],
    ids=["not-json", "a-list", "another-format", "entries-a-list", "byte-order-mark", "too-large"],
)
def test_a_broken_file_is_ignored_and_replaced(tmp_path: Path, content: str) -> None:
    path = tmp_path / "numba-threads.json"
    path.write_text(content)
    assert numba_threads.remembered(2, path) is None
    numba_threads.remember(2, thresholds(), {}, path)
    assert numba_threads.remembered(2, path) == thresholds()


def own_entry(**changes: Any) -> dict[str, Any]:
    entry = {"key": numba_threads.machine_key(2), "sizes": list(SIZES), "thresholds": thresholds()}
    entry.update(changes)
    return entry


def document_of(*entries: Any) -> str:
    own_id = numba_threads.key_id(numba_threads.machine_key(2))
    return json.dumps({"format": 1, "entries": dict.fromkeys([own_id], *entries)})


@pytest.mark.parametrize(
    "entry",
    [
        own_entry(key={**numba_threads.machine_key(2), "numba": "0.1"}),  # another numba under this id
        own_entry(key={**numba_threads.machine_key(2), "threads": 3}),  # another thread count
        own_entry(key={**numba_threads.machine_key(2), "cpu_count": 64}),  # another machine's CPUs
        own_entry(sizes=[1 << 10, 1 << 11]),  # measured at other sizes
        own_entry(thresholds=thresholds(gelu_forward=12345)),  # forged: no size measured
        own_entry(thresholds=thresholds(gelu_forward=-1)),
        own_entry(thresholds=thresholds(gelu_forward=0)),  # parallel at every size: never measured so
        own_entry(thresholds=thresholds(gelu_forward=True)),  # a boolean is no size
        own_entry(thresholds=thresholds(gelu_forward=65536.0)),
        own_entry(thresholds=thresholds(gelu_forward="65536")),
        own_entry(thresholds={k: v for k, v in thresholds().items() if k != "gelu_forward"}),  # a kernel missing
        own_entry(thresholds={**thresholds(), "attention_forward": 1 << 14}),  # a kernel not measured
        own_entry(thresholds=[1 << 14] * len(KERNELS)),
        "not an entry",
    ],
    ids=lambda e: "case",
)
def test_a_foreign_or_forged_entry_is_never_trusted(tmp_path: Path, entry: Any) -> None:
    path = tmp_path / "numba-threads.json"
    path.write_text(document_of(entry))
    assert numba_threads.remembered(2, path) is None
    path.write_text(document_of(own_entry()))  # the same file with the genuine entry is believed
    assert numba_threads.remembered(2, path) == thresholds()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory", "another-user"])
def test_a_cache_name_holding_something_foreign_is_neither_read_nor_replaced(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A symlink is never followed (its target, a valid cache here, is not believed), a pipe
    never waited on, another user's file not believed; remembering leaves each alone."""
    path = tmp_path / "numba-threads.json"
    target = tmp_path / "elsewhere.json"
    target.write_text(document_of(own_entry()))
    kept = target.read_bytes()
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_text(document_of(own_entry()))
        uid = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: uid + 1)  # the file's owner is now someone else
    assert numba_threads.remembered(2, path) is None
    with pytest.raises(OSError, match="not ptreg's cache file; left alone"):
        numba_threads.remember(2, thresholds(), {}, path)
    assert target.read_bytes() == kept
    if kind == "symlink":
        assert path.is_symlink()
    elif kind == "another-user":
        assert path.read_text() == document_of(own_entry())


@pytest.mark.parametrize(("value", "told"), [("65536", 65536), ("0", 0), (" default ", "default"), ("", None)], ids=str)
def test_ptreg_numba_parallel_min_forces_a_number_or_the_default(
    monkeypatch: pytest.MonkeyPatch, value: str, told: Any
) -> None:
    monkeypatch.setenv("PTREG_NUMBA_PARALLEL_MIN", value)
    assert numba_threads.forced() == told


@pytest.mark.parametrize("value", ["-5", "1e6", "many", "9" * 30, "2\u00b2", "\u0663"])
def test_a_threshold_that_is_no_number_makes_the_backend_unavailable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("PTREG_NUMBA_PARALLEL_MIN", value)
    with pytest.raises(ValueError, match="is neither a whole number of elements nor 'default'"):
        numba_threads.forced()
    if HAS_NUMBA:
        from ptreg.engine.backends import describe, entries

        info = describe(entries()["numba"])
        assert info.available is False and "PTREG_NUMBA_PARALLEL_MIN" in str(info.reason)


# --------------------------------------------------------------------------- the choice and the kernels


def spied_ops(threads: int) -> NumbaStepOps:
    """Ops whose kernels are names, to see which _pick returns without numba."""
    ops = NumbaStepOps()
    ops._kernels = {name: (f"{name} serial", f"{name} parallel") for name in (*KERNELS, "attention_forward")}
    ops.threads = threads
    return ops


def test_a_kernels_threshold_decides_which_compilation_runs() -> None:
    ops = spied_ops(2)
    assert ops._pick("gelu_forward", 1 << 20) == ("gelu_forward serial", 1)  # the fixed default: 2^21
    ops.parallel_mins = thresholds(gelu_forward=1 << 15, layernorm_forward=None)
    assert ops._pick("gelu_forward", 1 << 15) == ("gelu_forward parallel", 2)
    assert ops._pick("gelu_forward", (1 << 15) - 1) == ("gelu_forward serial", 1)
    assert ops._pick("layernorm_forward", 1 << 40) == ("layernorm_forward serial", 1)  # None: never parallel
    assert ops._pick("attention_forward", PARALLEL_MIN_ELEMENTS) == ("attention_forward parallel", 2)  # not measured
    assert ops._pick("attention_forward", PARALLEL_MIN_ELEMENTS - 1) == ("attention_forward serial", 1)
    ops.threads = 1
    assert ops._pick("gelu_forward", 1 << 40) == ("gelu_forward serial", 1)


@needs_numba
def test_choose_measures_once_then_remembers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ptreg_backends import numba_op_timing

    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PTREG_NUMBA_PARALLEL_MIN", raising=False)
    measured: list[int] = []

    def fake(ops: Any, rounds: int = 0) -> Any:
        measured.append(ops.threads)
        return thresholds(gelu_forward=1 << 14, adamw_update=None), {"rounds": rounds}

    monkeypatch.setattr(numba_op_timing, "calibrate", fake)
    first = numba_op_timing.choose(spied_ops(2))
    assert measured == [2] and first.source == "measured" and first.cache_file == str(tmp_path / "numba-threads.json")
    assert first.per_kernel == thresholds(gelu_forward=1 << 14, adamw_update=None)
    second = numba_op_timing.choose(spied_ops(2))
    assert measured == [2] and second.source == "cache" and second.per_kernel == first.per_kernel
    one = numba_op_timing.choose(spied_ops(1))  # nothing to choose on one thread
    assert measured == [2] and one.source == "one thread" and one.per_kernel == {}


@needs_numba
def test_nothing_is_measured_when_told_and_the_default_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ptreg_backends import numba_op_timing

    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(numba_op_timing, "calibrate", lambda *a, **k: pytest.fail("measured"))
    monkeypatch.setenv("PTREG_NUMBA_PARALLEL_MIN", "default")
    choice = numba_op_timing.choose(spied_ops(2))
    assert choice.details() == {
        "threads": 2,
        "source": "default, not calibrated",
        "parallel_min": DEFAULT_PARALLEL_MIN,
        "per_kernel": None,
        "cache": None,
        "note": "PTREG_NUMBA_PARALLEL_MIN=default",
    }
    monkeypatch.setenv("PTREG_NUMBA_PARALLEL_MIN", "4096")
    choice = numba_op_timing.choose(spied_ops(2))
    assert (choice.source, choice.least, choice.per_kernel) == ("PTREG_NUMBA_PARALLEL_MIN", 4096, {})
    assert not (tmp_path / "numba-threads.json").exists()


@needs_numba
def test_an_unwritable_cache_costs_a_new_measurement_not_the_backend(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ptreg_backends import numba_op_timing

    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path / "a-file"))
    monkeypatch.delenv("PTREG_NUMBA_PARALLEL_MIN", raising=False)
    monkeypatch.setattr(numba_op_timing, "calibrate", lambda ops, rounds=0: (thresholds(), {}))
    said: list[str] = []
    choice = numba_op_timing.choose(spied_ops(2), said.append)
    assert choice.source == "measured" and choice.cache_file is None and choice.per_kernel == thresholds()
    assert len(said) == 1 and said[0].startswith("not remembered: ")


@needs_numba
def test_each_kernel_is_timed_at_the_size_it_is_asked_for() -> None:
    """The measurement calls every kernel through its method at each size, serial and parallel,
    and the method's choice sees exactly that many elements (a wrong shape would time another size)."""
    from ptreg_backends import numba_op_timing

    seen: list[tuple[str, int, int]] = []

    class Spy(NumbaStepOps):
        def _pick(self, name: str, elements: int) -> tuple[Any, int]:
            kernel, chunks = super()._pick(name, elements)
            seen.append((name, elements, chunks))
            return kernel, chunks

    ops = Spy()
    ops.load_ops()
    ops.threads = 2
    samples = numba_op_timing.measure(ops, KERNELS, (SIZES[0], SIZES[1]), rounds=2)
    assert set(samples) == set(KERNELS)
    for kernel in KERNELS:
        for size in (SIZES[0], SIZES[1]):
            assert all(len(samples[kernel][size][way]) == 2 for way in ("serial", "parallel"))
            chunks = {c for name, elements, c in seen if name == kernel and elements == size}
            assert chunks == {1, 2}, (kernel, size, chunks)  # both compilations ran at that size
    assert ops.parallel_min == PARALLEL_MIN_ELEMENTS and dict(ops.parallel_mins) == {}  # left as they were


# --------------------------------------------------------------------------- recorded


@needs_numba
def test_the_backend_records_its_thresholds_and_rechooses_for_new_threads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import numba

    from ptreg_backends import numba_op_timing
    from ptreg_backends.numba_kernels import NumbaBackend

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba's pool has one thread here")
    monkeypatch.setenv("PTREG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PTREG_NUMBA_TILE", "avx2-6x16")  # no tile timing
    monkeypatch.delenv("PTREG_NUMBA_PARALLEL_MIN", raising=False)
    numba_threads.remember(2, thresholds(gelu_forward=1 << 14), {"rounds": 1}, tmp_path / "numba-threads.json")
    monkeypatch.setattr(numba_op_timing, "calibrate", lambda *a, **k: pytest.fail("measured"))
    backend = NumbaBackend()
    backend.set_threads(2)
    recorded = backend.runtime_details()["numba_parallel_min"]
    assert recorded["source"] == "cache" and recorded["threads"] == 2
    assert recorded["per_kernel"] == thresholds(gelu_forward=1 << 14)
    assert backend._pick("gelu_forward", 1 << 14)[1] == 2
    backend.set_threads(1)
    assert backend.runtime_details()["numba_parallel_min"]["source"] == "one thread"
    assert backend._pick("gelu_forward", 1 << 30)[1] == 1
    monkeypatch.setenv("PTREG_NUMBA_PARALLEL_MIN", "default")
    backend.set_threads(2)
    assert backend.runtime_details()["numba_parallel_min"]["source"] == "default, not calibrated"
    assert backend._pick("gelu_forward", 1 << 14)[1] == 1


@needs_numba
def test_a_real_calibration_gives_thresholds_the_cache_accepts(tmp_path: Path) -> None:
    """One round on the real kernels, on ops that lack some methods as the backend does (it
    measures on ops of its own): whatever the times, each threshold is a measured size or none."""
    from ptreg_backends import numba_op_timing

    class WithoutBias(NumbaStepOps):
        bias_forward = None  # type: ignore[assignment]

    ops = WithoutBias()
    ops.load_ops()
    ops.threads = 2
    found, how = numba_op_timing.calibrate(ops, rounds=1)
    assert set(how["median_ratios"]) == set(KERNELS) and how["rounds"] == 1
    numba_threads.remember(2, found, how, tmp_path / "numba-threads.json")
    assert numba_threads.remembered(2, tmp_path / "numba-threads.json") == found
