"""A run measured off the main thread (the MCP server's) is stopped by ``interrupt`` as a signal
would stop one in the main thread: ``Interrupted`` in that thread only, held back while a
``deferred`` block writes."""

from __future__ import annotations

import signal
import threading

import pytest

from ptreg.engine.interruption import Interrupted, deferred, interrupt, raise_if_interrupted, withdraw


def _in_thread(body) -> list[object]:
    seen: list[object] = []
    ready, go = threading.Event(), threading.Event()

    def run() -> None:
        ready.set()
        go.wait()
        try:
            body(seen)
        except Interrupted as exc:
            seen.append(exc.signum)

    thread = threading.Thread(target=run)
    thread.start()
    ready.wait()
    interrupt(thread, signal.SIGHUP)
    go.set()
    thread.join()
    return seen


def test_the_asked_thread_raises_and_no_other_does() -> None:
    assert _in_thread(lambda seen: raise_if_interrupted()) == [signal.SIGHUP]
    raise_if_interrupted()  # this thread was not asked


def test_a_request_waits_while_a_run_is_written() -> None:
    def body(seen: list[object]) -> None:
        with deferred():
            raise_if_interrupted()
            seen.append("written")
        raise_if_interrupted()

    assert _in_thread(body) == ["written", signal.SIGHUP]


def test_a_withdrawn_request_is_forgotten() -> None:
    def body(seen: list[object]) -> None:
        withdraw(threading.current_thread())
        raise_if_interrupted()
        seen.append("went on")

    assert _in_thread(body) == ["went on"]


def test_an_interrupted_carries_its_signal_name() -> None:
    with pytest.raises(Interrupted, match="SIGHUP"):
        raise Interrupted(signal.SIGHUP)


def test_a_run_writing_in_one_thread_holds_back_no_stop_asked_of_another() -> None:
    """Runs of different attempts measure side by side in the MCP server: one writing its files
    (signals deferred there) must not hold back the stop asked of the other."""
    writing, written = threading.Event(), threading.Event()

    def writer() -> None:
        with deferred():
            writing.set()
            written.wait(30)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert writing.wait(30)
        assert _in_thread(lambda seen: raise_if_interrupted()) == [signal.SIGHUP]
    finally:
        written.set()
        thread.join()
