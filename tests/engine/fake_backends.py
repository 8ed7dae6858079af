"""Backends that break the contract in one way each, for the discovery tests (not registered)."""

from __future__ import annotations

from typing import Any


class _Metadata:
    description = "test"
    order_preserving = False
    thread_control = "none"

    @staticmethod
    def default_threads() -> int:
        return 1

    @staticmethod
    def unavailable_reason() -> str | None:
        return None

    def set_threads(self, n: int) -> int:
        return 1


class Good(_Metadata):
    def matmul_forward(self, a: Any, b: Any, out: Any) -> None: ...

    def matmul_backward_da(self, dc: Any, b: Any, out: Any) -> None: ...

    def matmul_backward_db(self, a: Any, dc: Any, out: Any) -> None: ...


class TwoArguments(Good):
    def matmul_forward(self, a: Any, b: Any) -> None:  # type: ignore[override]
        ...


class StarArguments(Good):
    def matmul_backward_db(self, *arrays: Any) -> None: ...


class NoSetThreads(_Metadata):
    set_threads = None  # type: ignore[assignment]

    def matmul_forward(self, a: Any, b: Any, out: Any) -> None: ...

    def matmul_backward_da(self, dc: Any, b: Any, out: Any) -> None: ...

    def matmul_backward_db(self, a: Any, dc: Any, out: Any) -> None: ...


class PlainDefaultThreads(Good):
    def default_threads(self) -> int:  # type: ignore[override]
        return 1


class Reference(Good):
    role = "reference"


class OtherReference(Good):
    role = "reference"


class Peer(Good):
    role = "peer"


class Boss(Good):
    role = "boss"


class Minimal:
    """Only the three kernels: every other piece of metadata takes its documented default."""

    def matmul_forward(self, a: Any, b: Any, out: Any) -> None:
        out[...] = a @ b

    def matmul_backward_da(self, dc: Any, b: Any, out: Any) -> None:
        out[...] = dc @ b.T

    def matmul_backward_db(self, a: Any, dc: Any, out: Any) -> None:
        out[...] = a.T @ dc


class Undocumented(Minimal):
    # no docstring of its own and no description: Minimal's docstring is not this class's
    pass


class WrongOrderType(Good):
    order_preserving = "yes"  # type: ignore[assignment]


class NegativeThreads(Good):
    @staticmethod
    def default_threads() -> int:
        return 0


class NoKernels(_Metadata):
    pass


class RaisingMetadata(Good):
    @staticmethod
    def unavailable_reason() -> str | None:
        raise RuntimeError("cannot tell")
