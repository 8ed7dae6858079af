"""Attention's softmax as vector code along each row of a block of scores: the running max, the
exp, the sum, the causal mask, and the backward's recomputed weights and their gradient, one
vector of keys at a time (``numba_attention`` calls these on its blocks of scores, eight rows
one after the other inside each vector step, so their chains of work overlap).

Written as LLVM intrinsics for the same reason as ``numba_gemm``'s vector sums: the scalar loops
they replace ran one key at a time (a max reduction does not vectorise without assuming no NaN,
and each row's run of keys is short and of its own length, so a vectorised loop would be mostly
set-up and remainder). Here a row's keys are whole vectors (runs of keys are padded to them),
the mask is a compare of each lane's key with the row's last visible one and a select, and the
max and the sum are kept a vector per row, reduced across lanes once per block for the eight
rows together (``rows_reduced``).

NaN is never hidden: the max skips it (a compare with NaN is false), but the exp of a NaN score
is NaN, and the row's sum and output with it. Importing this module imports numba.
"""

# numba passes an intrinsic's typingctx itself: mypy sees every call one argument short
# mypy: disable-error-code="call-arg"
from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .numba_ops import C2, C3, C4, C5, C6, C7, EXP_CEIL, EXP_FLOOR, HALF, LN2_HI, LN2_LO, LOG2E, ONE
from .numba_vectors import _element, _literals, _slot, _vector

ROWS = 8  # the rows of a block of scores (numba_attention.ROWS)
FUSE = ("contract",)  # a multiply and an add may become one multiply-add: attention keeps a tolerance
INT = ir.IntType(32)


def _splat(builder: Any, value: Any, lanes: int) -> Any:
    """value (a scalar LLVM value) in every lane."""
    one = builder.insert_element(ir.Constant(ir.VectorType(value.type, lanes), None), value, ir.Constant(INT, 0))
    return builder.shuffle_vector(one, ir.Constant(one.type, None), ir.Constant(ir.VectorType(INT, lanes), [0] * lanes))


def _constant(vector: Any, value: Any) -> Any:
    # a float32 constant, widened exactly: LLVM refuses a float constant float32 cannot hold
    return ir.Constant(vector, [float(value)] * vector.count)


def _exp(builder: Any, x: Any) -> Any:
    """numba_ops' ``exp32`` as vector code, step for step: clamp, x = k·ln2 + r in two parts, e^r
    by its Taylor series, times 2^k built from its bits. The clamp's compares are false for NaN,
    which goes through to the result."""
    vector = x.type
    lanes = vector.count
    x = builder.select(builder.fcmp_ordered("<", x, _constant(vector, EXP_FLOOR)), _constant(vector, EXP_FLOOR), x)
    x = builder.select(builder.fcmp_ordered(">", x, _constant(vector, EXP_CEIL)), _constant(vector, EXP_CEIL), x)
    # llvmlite names no vector intrinsic itself: LLVM's name carries the vector's shape
    floor = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vector, [vector]), f"llvm.floor.v{lanes}f32")
    scaled = builder.fmul(x, _constant(vector, LOG2E), flags=FUSE)
    k = builder.call(floor, [builder.fadd(scaled, _constant(vector, HALF), flags=FUSE)])
    r = builder.fsub(x, builder.fmul(k, _constant(vector, LN2_HI), flags=FUSE), flags=FUSE)
    r = builder.fsub(r, builder.fmul(k, _constant(vector, LN2_LO), flags=FUSE), flags=FUSE)
    p = _constant(vector, C7)
    for c in (C6, C5, C4, C3, C2, ONE, ONE):
        p = builder.fadd(_constant(vector, c), builder.fmul(r, p, flags=FUSE), flags=FUSE)
    whole = builder.fptosi(k, ir.VectorType(INT, lanes))
    biased = builder.add(whole, ir.Constant(whole.type, [127] * lanes))
    power = builder.bitcast(builder.shl(biased, ir.Constant(whole.type, [23] * lanes)), vector)
    return builder.fmul(p, power)


def _int(context: Any, builder: Any, value: Any, of: Any) -> Any:
    return context.cast(builder, value, of, types.int64)


def _visible(context: Any, builder: Any, sig: Any, args: Any, at: int, lanes: int) -> Any:
    """Lane j of the vector at key column c (args[at]) is visible when c + j < n (args[at + 1])."""
    c = builder.trunc(_int(context, builder, args[at], sig.args[at]), INT)
    n = builder.trunc(_int(context, builder, args[at + 1], sig.args[at + 1]), INT)
    keys = builder.add(_splat(builder, c, lanes), ir.Constant(ir.VectorType(INT, lanes), list(range(lanes))))
    return builder.icmp_signed("<", keys, _splat(builder, n, lanes))


def _row_pointer(context: Any, builder: Any, sig: Any, args: Any, at: int, bits: int) -> Any:
    """A pointer to the vector block[i, c : c + W]: the block args[at], i and c the next two."""
    i = _int(context, builder, args[at + 1], sig.args[at + 1])
    c = _int(context, builder, args[at + 2], sig.args[at + 2])
    return builder.bitcast(_element(context, builder, sig.args[at], args[at], [i, c]), _vector(bits).as_pointer())


def _float(context: Any, builder: Any, sig: Any, args: Any, at: int) -> Any:
    return context.cast(builder, args[at], sig.args[at], types.float32)


@intrinsic
def lane_fill(
    typingctx: Any, sums: Any, k: Any, vector_bits: Any, value: Any
) -> tuple[Any, Any] | None:  # pragma: no cover
    """sums[k] = value in every lane."""
    if not _literals(vector_bits):
        return None
    bits = vector_bits.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        value = _float(context, builder, sig, args, 3)
        builder.store(_splat(builder, value, bits // 32), _slot(builder, args[0], args[1], bits))
        return context.get_dummy_value()

    return types.void(sums, k, vector_bits, value), codegen


@intrinsic
def lane_scale(  # pragma: no cover
    typingctx: Any, sums: Any, k: Any, vector_bits: Any, factors: Any, i: Any
) -> tuple[Any, Any] | None:
    """sums[k] *= factors[i] in every lane (a row's running sums rescaled when its max grows)."""
    if not _literals(vector_bits):
        return None
    bits = vector_bits.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        factor = builder.load(_element(context, builder, sig.args[3], args[3], [args[4]]))
        slot = _slot(builder, args[0], args[1], bits)
        builder.store(builder.fmul(builder.load(slot), _splat(builder, factor, bits // 32)), slot)
        return context.get_dummy_value()

    return types.void(sums, k, vector_bits, factors, i), codegen


@intrinsic
def lane_max(  # pragma: no cover
    typingctx: Any, sums: Any, k: Any, vector_bits: Any, block: Any, i: Any, c: Any, n: Any
) -> tuple[Any, Any] | None:
    """sums[k] = max(sums[k], block[i, c : c + W]) lane by lane, over the visible keys (c + j < n)."""
    if not _literals(vector_bits):
        return None
    bits = vector_bits.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        scores = builder.load(_row_pointer(context, builder, sig, args, 3, bits), align=4)
        slot = _slot(builder, args[0], args[1], bits)
        top = builder.load(slot)
        higher = builder.and_(
            builder.fcmp_ordered(">", scores, top), _visible(context, builder, sig, args, 5, bits // 32)
        )
        builder.store(builder.select(higher, scores, top), slot)
        return context.get_dummy_value()

    return types.void(sums, k, vector_bits, block, i, c, n), codegen


@intrinsic
def exp_sum(  # pragma: no cover
    typingctx: Any, sums: Any, k: Any, vector_bits: Any, block: Any, i: Any, c: Any, n: Any, top: Any
) -> tuple[Any, Any] | None:
    """block[i, c : c + W] = e^(score - top) for the visible keys, 0 for the others (the causal
    mask, and the padding), and sums[k] += those weights."""
    if not _literals(vector_bits):
        return None
    bits = vector_bits.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        lanes = bits // 32
        at = _row_pointer(context, builder, sig, args, 3, bits)
        shifted = builder.fsub(
            builder.load(at, align=4), _splat(builder, _float(context, builder, sig, args, 7), lanes)
        )
        weights = builder.select(
            _visible(context, builder, sig, args, 5, lanes), _exp(builder, shifted), ir.Constant(_vector(bits), None)
        )
        builder.store(weights, at, align=4)
        slot = _slot(builder, args[0], args[1], bits)
        builder.store(builder.fadd(builder.load(slot), weights, flags=FUSE), slot)
        return context.get_dummy_value()

    return types.void(sums, k, vector_bits, block, i, c, n, top), codegen


@intrinsic
def rows_reduced(  # pragma: no cover
    typingctx: Any, sums: Any, first: Any, vector_bits: Any, largest: Any, into: Any
) -> tuple[Any, Any] | None:
    """into[i] = the max (largest 1) or the sum (largest 0) of the lanes of sums[first + i], for
    the ROWS rows at once: vectors are paired and each pair's halves combined into one vector
    holding both rows (a transpose and a reduction in one), then halves within the last vector,
    so the eight reductions share their steps instead of running one after the other."""
    if not _literals(first, vector_bits, largest):
        return None
    start, bits, maximum = first.literal_value, vector_bits.literal_value, bool(largest.literal_value)

    def combine(builder: Any, a: Any, b: Any, group: int) -> Any:
        # a and b hold rows in groups of `group` lanes; the result holds a's rows then b's, in
        # groups of group / 2: each group's lower half against its upper half
        width = a.type.count
        half = group // 2
        lower = [g * group + x for g in range(width // group) for x in range(half)]
        if b is None:
            b = ir.Constant(a.type, None)
        else:
            lower = lower + [width + j for j in lower]
        upper = [j + half for j in lower]
        low = builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(INT, len(lower)), lower))
        high = builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(INT, len(upper)), upper))
        if maximum:
            return builder.select(builder.fcmp_ordered(">", high, low), high, low)
        return builder.fadd(low, high, flags=FUSE)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        vectors = [builder.load(_slot(builder, args[0], ir.Constant(INT, start + i), bits)) for i in range(ROWS)]
        group = bits // 32
        while len(vectors) > 1:
            vectors = [combine(builder, vectors[j], vectors[j + 1], group) for j in range(0, len(vectors), 2)]
            group //= 2
        value = vectors[0]
        while group > 1:
            value = combine(builder, value, None, group)
            group //= 2
        made = context.make_array(sig.args[4])(context, builder, value=args[4])
        builder.store(value, builder.bitcast(made.data, value.type.as_pointer()), align=4)
        return context.get_dummy_value()

    return types.void(sums, first, vector_bits, largest, into), codegen


@intrinsic
def weights_and_grads(  # pragma: no cover
    typingctx: Any,
    vector_bits: Any,
    weights: Any,
    i: Any,
    c: Any,
    n: Any,
    grads: Any,
    top: Any,
    both: Any,
) -> tuple[Any, Any] | None:
    """The backward's recomputation, for the visible keys of weights[i, c : c + W] (scores on
    entry) and grads[i, c : c + W] (dy·v on entry): p = e^(score - top), then
    grad = p · (grad - both); 0 in both for the others."""
    if not _literals(vector_bits):
        return None
    bits = vector_bits.literal_value

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        lanes = bits // 32
        visible = _visible(context, builder, sig, args, 3, lanes)
        nothing = ir.Constant(_vector(bits), None)
        at = _row_pointer(context, builder, sig, args, 1, bits)
        i = _int(context, builder, args[2], sig.args[2])
        c = _int(context, builder, args[3], sig.args[3])
        grad_at = builder.bitcast(_element(context, builder, sig.args[5], args[5], [i, c]), _vector(bits).as_pointer())
        top = _splat(builder, _float(context, builder, sig, args, 6), lanes)
        both = _splat(builder, _float(context, builder, sig, args, 7), lanes)
        p = _exp(builder, builder.fsub(builder.load(at, align=4), top))
        grad = builder.fmul(p, builder.fsub(builder.load(grad_at, align=4), both))
        builder.store(builder.select(visible, p, nothing), at, align=4)
        builder.store(builder.select(visible, grad, nothing), grad_at, align=4)
        return context.get_dummy_value()

    return types.void(vector_bits, weights, i, c, n, grads, top, both), codegen
