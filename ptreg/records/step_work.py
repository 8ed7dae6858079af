"""The work of one tinygpt-train step, part by part: floating-point operations and bytes moved,
and each part's floor on a machine: its roofline, max(flops / peak, bytes / bandwidth).

A part is one of the three matmul kernels (summed over every linear layer) or one of the step's
other ops (forward and backward together), named as ``results.json`` names them. Each part is
a list of terms, one per method call site of ``engine/workloads/tinygpt.py``, each with its
calls per step, so that a test can hold the calls to a real step's.

What is counted, so that the roofline is a floor and not an estimate:
- bytes: each input read once and each output written once, float32 (4 bytes; token ids are
  int64, 8, as the trainer passes them), and no cache reuse modelled beyond that: a value two
  ops share is counted in both;
- caches between a forward and its backward at their smallest: layernorm keeps each row's mean
  and 1/std (llm.c's cut, not the normalised rows), attention each row's log-sum-exp (the
  weights recomputed from it, as flash attention does; the recomputation is not counted);
- flops: the arithmetic the maths needs, masked attention scores excluded; exp, tanh, sqrt, log
  and a division count as one operation each (optimistic: each costs several);
- the step as its fused ops make it (``fused``, by default every one): each fused op's calls
  are taken from the separate ops it stands for, so a floor is the least work any backend's step
  can do. A backend that runs those ops apart is held to it too: its separate ops then show
  further from their floors by what fusing would have saved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from .configs import GPTConfig, linear_shapes
from .measured import FUSED_OPS, KERNELS, STEP_OPS, Kernel, Positive, StepOp, _Strict

FLOAT = 4  # bytes of a float32
TOKEN = 8  # bytes of a token id: int64, as Trainer.next_batch makes them

# The method each kernel part counts, as the step calls it.
KERNEL_METHODS = {
    "forward": "matmul_forward",
    "backward_da": "matmul_backward_da",
    "backward_db": "matmul_backward_db",
}
PARTS: tuple[str, ...] = (*KERNELS, *STEP_OPS)


@dataclass(frozen=True)
class Term:
    """One method's calls in a step: how many, and the work of all of them together."""

    method: str
    calls: int
    flops: int
    bytes: int


@dataclass(frozen=True)
class Work:
    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        """flops per byte: above the machine's peak over its bandwidth, a part is compute bound."""
        return self.flops / self.bytes


def kernel_terms(config: GPTConfig, kernel: str) -> list[Term]:
    """Each linear layer kind's calls: 2·M·K·N flops (one multiply and one add per term of each
    sum), and the three matrices once each. The three kernels read and write the same sizes:
    forward reads a (M×K) and b (K×N) and writes M×N; dA reads dc (M×N) and b, writes M×K; dB
    reads a and dc, writes K×N."""
    return [
        Term(
            f"{KERNEL_METHODS[kernel]} {s.name}",
            s.per_step,
            s.per_step * 2 * s.m * s.k * s.n,
            s.per_step * FLOAT * (s.m * s.k + s.k * s.n + s.m * s.n),
        )
        for s in linear_shapes(config)
    ]


def causal_scores(config: GPTConfig) -> int:
    """Attention scores one layer needs: each of B·NH heads looks, at position t, at t+1 positions."""
    T = config.context
    return config.batch * config.heads * T * (T + 1) // 2


def op_terms(config: GPTConfig, op: str, parameters: int, fused: tuple[str, ...] = FUSED_OPS) -> list[Term]:
    """The terms of one op; ``parameters`` is the model's weight count (AdamW updates each),
    ``fused`` the fused ops the step calls (each takes calls from the ops it stands for)."""
    B, T, C, L, V = config.batch, config.context, config.d_model, config.layers, config.vocab
    M, hs, S = B * T, C // config.heads, causal_scores(config)
    R = B * config.heads * T  # attention's rows: one log-sum-exp each
    # The stream's adds each followed by a layernorm (ln2 of every block, ln1 of all but the
    # first) and, backward, those layernorms' dx each added to the stream's gradient.
    pairs = 2 * L - 1 if "residual_layernorm" in fused else 0
    fc = L if "bias_gelu" in fused else 0  # the fc layer's bias and GELU, one of each a block
    if op == "encoder":
        return [
            # one add per element of x = wte column + wpe row; reads both tables and the ids
            Term("encoder_forward", 1, M * C, FLOAT * (C * V + T * C + M * C) + TOKEN * M),
            # scatter-add of dx into dwte's columns (which already hold the head's gradient, so
            # they are read too), and dwpe as the sum over the batch of dx
            Term(
                "encoder_backward",
                1,
                M * C + (B - 1) * T * C,
                FLOAT * (M * C + 2 * C * V + T * C) + TOKEN * M,
            ),
        ]
    if op == "layernorm":
        calls = 2 * L + 1 - pairs  # ln1 and ln2 of each block, and the final one, unless fused
        return [
            # per element: mean, centre, square, variance, normalise, scale, shift (7); per row
            # the two divisions of the means, eps, sqrt and the reciprocal (5). Writes y, mean, rstd.
            Term("layernorm_forward", calls, calls * (7 * M * C + 5 * M), calls * FLOAT * (2 * M * C + 2 * C + 2 * M)),
            # per element: the normalised x again (2), dout·w (1), the two row sums (3), dw and db
            # (3), dx = (dnorm - mean - x̂·mean2)·rstd (4); per row the two divisions. Reads dout,
            # x, mean, rstd, w; writes dx, dw, db.
            Term(
                "layernorm_backward", calls, calls * (13 * M * C + 2 * M), calls * FLOAT * (3 * M * C + 3 * C + 2 * M)
            ),
        ]
    if op == "attention":
        return [
            # scores q·k (2·hs each), scale, softmax (max, subtract, exp, sum, divide), att·v
            # (2·hs each); reads qkv, writes y and keeps each row's log-sum-exp
            Term("attention_forward", L, L * (4 * hs * S + 6 * S), L * FLOAT * (3 * M * C + M * C + R)),
            # datt = dy·vᵀ and dv = attᵀ·dy, softmax's backward (4) and the scale (1), dq and dk:
            # four products of 2·hs per score; reads dy, qkv, y and the log-sum-exps, writes dqkv
            Term(
                "attention_backward",
                L,
                L * (8 * hs * S + 5 * S),
                L * FLOAT * (M * C + 3 * M * C + M * C + R + 3 * M * C),
            ),
        ]
    N = M * 4 * C  # the MLP's hidden activations of one block
    if op == "gelu":
        calls = L - fc
        return [
            # x³ (2), ·0.044715, +x, ·√(2/π), tanh, +1, ·x, ·0.5; reads x, writes y
            Term("gelu_forward", calls, calls * 9 * N, calls * FLOAT * 2 * N),
            # u again (5), tanh, sech² (2), du/dx (3), the product rule (5), ·dout; reads dout
            # and x, writes dx
            Term("gelu_backward", calls, calls * 17 * N, calls * FLOAT * 3 * N),
        ]
    if op == "bias_gelu":
        return [
            # the bias's add and GELU's 9 an element; reads the product and b, writes the product
            # biased (the backward's x) and y
            Term("bias_gelu_forward", fc, fc * 10 * N, fc * FLOAT * (3 * N + 4 * C)),
            # GELU's backward and db's sum over rows of dx; reads dout and x, writes dx and db
            Term("bias_gelu_backward", fc, fc * (17 * N + (M - 1) * 4 * C), fc * FLOAT * (3 * N + 4 * C)),
        ]
    if op == "residual":
        # two stream adds per block forward, two gradient sums where it forks back, unless fused
        calls = 4 * L - 2 * pairs
        return [Term("residual_add", calls, calls * M * C, calls * FLOAT * 3 * M * C)]
    if op == "residual_layernorm":
        return [
            # the add (1 an element) and the layernorm forward's count; reads x, branch, w and b,
            # writes the sum, the output, mean and rstd: the sum is not read back
            Term(
                "residual_layernorm_forward",
                pairs,
                pairs * (8 * M * C + 5 * M),
                pairs * FLOAT * (4 * M * C + 2 * C + 2 * M),
            ),
            # the layernorm backward's count and one add an element of the stream's gradient,
            # which is read once more; dx is written once, already summed
            Term(
                "residual_layernorm_backward",
                pairs,
                pairs * (14 * M * C + 2 * M),
                pairs * FLOAT * (4 * M * C + 3 * C + 2 * M),
            ),
        ]
    if op == "bias":
        # qkv, attention projection, fc (unless fused), MLP projection; no head bias
        width = 3 * C + C + (0 if fc else 4 * C) + C
        calls = 4 * L - fc
        return [
            # one add per output element, in place: the product read and written, b read
            Term("bias_forward", calls, L * M * width, L * FLOAT * (2 * M * width + width)),
            # db = the sum over rows of dout; reads dout, writes db
            Term("bias_backward", calls, L * (M - 1) * width, L * FLOAT * (M * width + width)),
        ]
    if op == "crossentropy":
        return [
            # per logit: max, subtract, exp, sum, divide (5); per row the log and the target's
            # log-probability (2), and the mean over rows; reads logits and targets, writes probs
            # and the loss
            Term("crossentropy_forward", 1, 5 * M * V + 3 * M, FLOAT * (2 * M * V + 1) + TOKEN * M),
            # (probs - onehot) / M: one multiply per logit and a subtraction per row
            Term("crossentropy_backward", 1, M * V + M, FLOAT * 2 * M * V + TOKEN * M),
        ]
    if op == "adamw":
        tensors = 16  # the parameter tensors of tinygpt.parameter_shapes, one update each
        # per weight: m (3), v (4), the two bias corrections (2), sqrt, +eps, divide, ·lr, and
        # the update (14; the workload trains without weight decay); reads param, grad, m and v,
        # writes param, m and v
        return [Term("adamw_update", tensors, 14 * parameters, FLOAT * 7 * parameters)]
    raise ValueError(f"no op {op!r}; the step's ops are {', '.join(STEP_OPS)}")


def terms(config: GPTConfig, part: str, fused: tuple[str, ...] = FUSED_OPS) -> list[Term]:
    if part in KERNEL_METHODS:
        return kernel_terms(config, part)
    return op_terms(config, part, config.parameters, fused)


def step_work(config: GPTConfig, fused: tuple[str, ...] = FUSED_OPS) -> dict[str, Work]:
    """Every part of one training step, in the order results.json names them."""
    found = {}
    for part in PARTS:
        parts = terms(config, part, fused)
        found[part] = Work(sum(t.flops for t in parts), sum(t.bytes for t in parts))
    return found


# --------------------------------------------------------------------------- floors


@dataclass(frozen=True)
class Floor:
    seconds: float
    bound: Literal["compute", "memory"]  # the ceiling that sets it


def roofline(work: Work, peak_gflops: float, bandwidth_gbs: float) -> Floor:
    """max(flops / peak, bytes / bandwidth): the part can beat neither ceiling."""
    compute, memory = work.flops / (peak_gflops * 1e9), work.bytes / (bandwidth_gbs * 1e9)
    return Floor(compute, "compute") if compute >= memory else Floor(memory, "memory")


def floors(
    config: GPTConfig, peak_gflops: float, bandwidth_gbs: float, fused: tuple[str, ...] = FUSED_OPS
) -> dict[str, Floor]:
    """Every part's floor, in the order results.json names the parts."""
    return {part: roofline(work, peak_gflops, bandwidth_gbs) for part, work in step_work(config, fused).items()}


# --------------------------------------------------------------------------- recorded in a run

MACHINE_ID = r"^[0-9a-f]{16}$"


class PartFloor(_Strict):
    floor_ms: Positive = Field(description="The part's roofline per step: max(flops / peak, bytes / bandwidth).")
    bound: Literal["compute", "memory"] = Field(description="The ceiling that sets it.")


class ConfigFloors(_Strict):
    """One config's floors in a run, from the ceilings cached for the machine that measured it."""

    threads: Annotated[int, Field(ge=1, le=1024)] = Field(description="The thread count the ceilings are at.")
    peak_gflops: Positive = Field(description="The float32 compute peak the floors assume.")
    bandwidth_gbs: Positive = Field(description="The memory bandwidth the floors assume.")
    machine: str = Field(pattern=MACHINE_ID, description="The id of the machine key the ceilings were cached under.")
    measured_at: str = Field(max_length=64, description="When the ceilings were measured (UTC, ISO 8601).")
    parts: dict[Kernel | StepOp, PartFloor] = Field(description="Every kernel's and op's floor.")
    step_floor_ms: Positive = Field(description="The sum of the parts' floors.")

    def floor_ms(self, part: str) -> float | None:
        """A part's floor, or the whole step's ("step"); None for a part without one ("other")."""
        if part == "step":
            return self.step_floor_ms
        found = self.parts.get(part)  # type: ignore[call-overload]
        return None if found is None else float(found.floor_ms)


def config_floors(
    config: GPTConfig, threads: int, peak_gflops: float, bandwidth_gbs: float, machine: str, measured_at: str
) -> ConfigFloors:
    found = floors(config, peak_gflops, bandwidth_gbs)
    return ConfigFloors(
        threads=threads,
        peak_gflops=peak_gflops,
        bandwidth_gbs=bandwidth_gbs,
        machine=machine,
        measured_at=measured_at,
        # a part whose every call a fused op takes has no work, so no floor of its own
        parts={part: PartFloor(floor_ms=1e3 * f.seconds, bound=f.bound) for part, f in found.items() if f.seconds > 0},
        step_floor_ms=1e3 * sum(f.seconds for f in found.values()),
    )


def above_floor(measured_ms: float | None, floor: ConfigFloors | None, part: str) -> float | None:
    """measured / floor: how many times its roofline a part took; unknown when either is."""
    found = None if floor is None else floor.floor_ms(part)
    return None if measured_ms is None or found is None else measured_ms / found
