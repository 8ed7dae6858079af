"""The vectors of sums the numba backend's compiled loops keep in registers, as LLVM intrinsics:
numba's own arrays and indexing would test each index and leave the sums in memory.

A set of sums is an array of ``count`` vectors of ``vector_bits / 32`` float32 lanes, made once per
task (``_sums``) and kept in registers by LLVM. ``_sum_update`` adds a product as naive does (a
rounded multiply, then a rounded add: the reference's bits); ``_sum_fma`` lets the two fuse, for
code held to a tolerance instead. Used by the product (``numba_gemm``), attention and its
softmax, and ``benchmarks/fp_peak.py``. Importing this module imports numba.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


def _vector(bits: int) -> Any:
    return ir.VectorType(ir.FloatType(), bits // 32)


def _literals(*values: Any) -> bool:
    return all(isinstance(value, types.IntegerLiteral) for value in values)


def _slot(builder: Any, sums: Any, k: Any, bits: int) -> Any:
    return builder.gep(builder.bitcast(sums, _vector(bits).as_pointer()), [k])


def _element(context: Any, builder: Any, array_type: Any, array: Any, indices: list[Any]) -> Any:
    """A pointer to array[indices], as a pointer to a vector that starts there."""
    made = context.make_array(array_type)(context, builder, value=array)
    return cgutils.get_item_pointer(context, builder, array_type, made, indices, wraparound=False)


@intrinsic
def _sums(typingctx: Any, count: Any, vector_bits: Any) -> tuple[Any, Callable[..., Any]] | None:  # pragma: no cover
    """Stack storage for ``count`` vectors of sums (compile-time constants), which LLVM keeps in
    registers once the loops over them are unrolled (a NumPy array would live on the heap).

    It also sets the vector width LLVM prefers in the function it lands in (the parallel loop's
    body, where the micro-kernel runs): LLVM tunes recent Intel server CPUs to prefer 256-bit
    vectors, which would split each 512-bit sum in two and spill them.
    """
    if not _literals(count, vector_bits):
        return None
    length, bits = count.literal_value, vector_bits.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        # llvmlite checks attribute names against a list without LLVM's string attributes;
        # the set underneath takes the attribute as LLVM IR spells it
        set.add(builder.function.attributes, f'"prefer-vector-width"="{bits}"')
        storage = cgutils.alloca_once(builder, ir.ArrayType(_vector(bits), length))
        return builder.bitcast(storage, ir.IntType(8).as_pointer())

    return types.voidptr(count, vector_bits), codegen


@intrinsic
def _sum_zero(
    typingctx: Any, sums: Any, k: Any, vector_bits: Any
) -> tuple[Any, Callable[..., Any]] | None:  # pragma: no cover
    """sums[k] = 0.0 in every lane."""
    if not _literals(vector_bits):
        return None
    bits = vector_bits.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        builder.store(ir.Constant(_vector(bits), None), _slot(builder, args[0], args[1], bits))
        return context.get_dummy_value()

    return types.void(sums, k, vector_bits), codegen


@intrinsic
def _sum_move(  # pragma: no cover
    typingctx: Any, sums: Any, k: Any, vector_bits: Any, array: Any, row: Any, col: Any, to_array: Any
) -> tuple[Any, Callable[..., Any]] | None:
    """sums[k] = array[row, col : col + W] (to_array 0), or the other way round (to_array 1):
    a row of a C-contiguous float32 matrix."""
    if not _literals(vector_bits, to_array):
        return None
    bits, storing = vector_bits.literal_value, bool(to_array.literal_value)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        start = _element(context, builder, sig.args[3], args[3], [args[4], args[5]])
        row_vector = builder.bitcast(start, _vector(bits).as_pointer())
        slot = _slot(builder, args[0], args[1], bits)
        if storing:
            builder.store(builder.load(slot), row_vector, align=4)
        else:
            builder.store(builder.load(row_vector, align=4), slot)
        return context.get_dummy_value()

    return types.void(sums, k, vector_bits, array, row, col, to_array), codegen


def _multiply_add(bits: int, fused: bool) -> Callable[..., Any]:
    """The code of sums[k] += column[at] · strip[offset : offset + W] for ``_sum_update`` and
    ``_sum_fma``: one vector of ``strip``, ``column[at]`` broadcast over it, a multiply and an add,
    the two marked ``contract`` (free to become one FMA) only when ``fused``. Indices are not
    wrapped (numba's indexing would test each for a negative value: a compare and a select per
    load in the innermost loop)."""
    flags = ("contract",) if fused else ()

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        vector = _vector(bits)
        lanes = vector.count
        value = builder.load(_element(context, builder, sig.args[3], args[3], [args[4]]))
        start = _element(context, builder, sig.args[5], args[5], [args[6]])
        b = builder.load(builder.bitcast(start, vector.as_pointer()), align=4)
        one = builder.insert_element(ir.Constant(vector, None), value, ir.Constant(ir.IntType(32), 0))
        everywhere = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
        a = builder.shuffle_vector(one, ir.Constant(vector, None), everywhere)
        slot = _slot(builder, args[0], args[1], bits)
        product = builder.fmul(a, b, flags=flags)
        builder.store(builder.fadd(builder.load(slot), product, flags=flags), slot)
        return context.get_dummy_value()

    return codegen


@intrinsic
def _sum_update(  # pragma: no cover
    typingctx: Any, sums: Any, k: Any, vector_bits: Any, column: Any, at: Any, strip: Any, offset: Any
) -> tuple[Any, Callable[..., Any]] | None:
    """sums[k] = sums[k] + column[at] · strip[offset : offset + W]: a rounded multiply, then a
    rounded add, no fast-math flag on either, so LLVM may not fuse them (naive's bits)."""
    if not _literals(vector_bits):
        return None
    signature = types.void(sums, k, vector_bits, column, at, strip, offset)
    return signature, _multiply_add(vector_bits.literal_value, fused=False)


@intrinsic
def _sum_fma(  # pragma: no cover
    typingctx: Any, sums: Any, k: Any, vector_bits: Any, column: Any, at: Any, strip: Any, offset: Any
) -> tuple[Any, Callable[..., Any]] | None:
    """sums[k] += column[at] · strip[offset : offset + W], as ``_sum_update`` but free to fuse
    into one multiply-add: for code held to a tolerance, not to naive's bits (attention, and the
    fused twin that measures what those bits cost, ``benchmarks/parity_cost.py``)."""
    if not _literals(vector_bits):
        return None
    signature = types.void(sums, k, vector_bits, column, at, strip, offset)
    return signature, _multiply_add(vector_bits.literal_value, fused=True)


@intrinsic
def _copy(  # pragma: no cover
    typingctx: Any, target: Any, offset: Any, count: Any, source: Any, row: Any, col: Any
) -> tuple[Any, Callable[..., Any]] | None:
    """target[offset : offset + count] = the ``count`` floats in memory from source[row, col]
    on (a compile-time count; the caller knows that index of source is contiguous): one vector
    load and store, where numba's indexing, strides unknown at compile time, copies one by one."""
    if not _literals(count):
        return None
    vector = ir.VectorType(ir.FloatType(), count.literal_value).as_pointer()

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        start = _element(context, builder, sig.args[3], args[3], [args[4], args[5]])
        value = builder.load(builder.bitcast(start, vector), align=4)
        end = _element(context, builder, sig.args[0], args[0], [args[1]])
        builder.store(value, builder.bitcast(end, vector), align=4)
        return context.get_dummy_value()

    return types.void(target, offset, count, source, row, col), codegen


@intrinsic
def _scaled_move(  # pragma: no cover
    typingctx: Any,
    vector_bits: Any,
    target: Any,
    trow: Any,
    tcol: Any,
    source: Any,
    srow: Any,
    scol: Any,
    factor: Any,
    streaming: Any,
) -> tuple[Any, Callable[..., Any]] | None:
    """target[trow, tcol : tcol + W] = source[srow, scol : scol + W] · factor, one vector (W
    lanes; both rows C-contiguous): the same rounded multiplies as a loop of elements, where a
    loop over a slice of a run-time length compiled to scalar code and its set-up per row.
    streaming 1: a non-temporal store, past the caches, with no read of the line first; the
    target must be aligned to the vector, and the caller must write whole cache lines."""
    if not _literals(vector_bits, streaming):
        return None
    bits, stream = vector_bits.literal_value, bool(streaming.literal_value)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        vector = _vector(bits)
        start = _element(context, builder, sig.args[4], args[4], [args[5], args[6]])
        value = builder.load(builder.bitcast(start, vector.as_pointer()), align=4)
        scalar = context.cast(builder, args[7], sig.args[7], types.float32)
        one = builder.insert_element(ir.Constant(vector, None), scalar, ir.Constant(ir.IntType(32), 0))
        everywhere = ir.Constant(ir.VectorType(ir.IntType(32), vector.count), [0] * vector.count)
        product = builder.fmul(value, builder.shuffle_vector(one, ir.Constant(vector, None), everywhere))
        end = _element(context, builder, sig.args[1], args[1], [args[2], args[3]])
        stored = builder.store(product, builder.bitcast(end, vector.as_pointer()), align=bits // 8 if stream else 4)
        if stream:
            stored.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
        return context.get_dummy_value()

    return types.void(vector_bits, target, trow, tcol, source, srow, scol, factor, streaming), codegen


@intrinsic
def _store_fence(typingctx: Any) -> tuple[Any, Callable[..., Any]] | None:  # pragma: no cover
    """A full memory fence: non-temporal stores are weakly ordered, and this orders them before
    anything after it (x86: mfence), so other threads see them once the kernel returns."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen
