"""Discovery checks each backend against the way the engine calls it, as pluggy verifies hook
implementations, and reads the roles the backends declare. The classes are in fake_backends.py."""

from __future__ import annotations

import pytest

from ptreg.engine.backends import BackendEntry, BackendInfo, describe, roles, signature_problem


def info(target: str) -> BackendInfo:
    return describe(BackendEntry("fake", f"fake_backends:{target}", "ptreg.backends", None, None))


def test_a_backend_that_keeps_the_contract_is_available() -> None:
    found = info("Good")
    assert found.available and found.reason is None and found.role is None


@pytest.mark.parametrize(
    "target, fragments",
    [
        ("TwoArguments", ["matmul_forward(a, b)", "cannot be called as matmul_forward(a, b, out)"]),
        ("WrongOrderType", ["order_preserving must be bool, got 'yes'"]),
        ("NegativeThreads", ["default_threads() must be at least 1"]),
        ("NoKernels", ["lacks matmul_forward(a, b, out)"]),
        ("RaisingMetadata", ["metadata failed: RuntimeError: cannot tell"]),
        ("PlainDefaultThreads", ["default_threads", "staticmethod"]),
        ("Boss", ["role 'boss'", "reference, peer"]),
    ],
)
def test_a_contract_broken_is_one_line_naming_the_method(target: str, fragments: list[str]) -> None:
    found = info(target)
    assert not found.available and found.reason is not None and "\n" not in found.reason
    for fragment in fragments:
        assert fragment in found.reason


def test_only_the_three_kernels_are_required() -> None:
    found = info("Minimal")
    assert found.available and found.reason is None
    assert (found.order_preserving, found.default_threads, found.thread_control) == (False, None, None)
    # no description attribute: its docstring says what it is, as `ptreg backends` shows it
    assert found.description == "Only the three kernels: every other piece of metadata takes its documented default."
    assert info("Undocumented").description is None  # nothing said, not even inherited: unknown
    assert info("NoSetThreads").available  # set_threads is optional too


def test_a_backend_without_set_threads_runs_as_it_is() -> None:
    import fake_backends

    from ptreg.engine.backends import set_backend_threads

    assert set_backend_threads(fake_backends.Minimal(), 4) is None
    assert set_backend_threads(fake_backends.Good(), 4) == 1


def test_a_signature_taking_any_arguments_is_accepted() -> None:
    assert info("StarArguments").available


def test_signatures_are_checked_on_created_backends_too() -> None:
    import fake_backends

    assert signature_problem("t", fake_backends.Good(), bound=True) is None
    problem = signature_problem("t", fake_backends.TwoArguments(), bound=True)
    assert problem is not None and "matmul_forward" in problem


def test_roles_need_exactly_one_available_holder() -> None:
    found = [info("Reference"), info("Peer"), info("Good")]
    assert roles(found).reference == "fake" and roles(found).peer == "fake"
    assert roles([info("Reference"), info("OtherReference")]).reference is None  # ambiguous: unknown
    assert roles([info("Good")]).reference is None and roles([]).peer is None


def test_the_built_in_backends_declare_the_reference_and_the_peer() -> None:
    from ptreg.engine.backends import describe_all

    declared = roles(describe_all())
    assert (declared.reference, declared.peer) == ("naive", "numpy-blas")
