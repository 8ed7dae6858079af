"""The names the evaluator format allows are exactly the ones ptreg can measure."""

from __future__ import annotations

from typing import get_args

from ptreg.engine.workloads import workload_named
from ptreg.records.configs import CONFIGS, ConfigName, linear_shapes, step_flops
from ptreg.records.evaluator import Metric


def test_every_config_name_of_the_format_has_its_dimensions() -> None:
    assert get_args(ConfigName) == tuple(CONFIGS)
    for name, config in CONFIGS.items():
        assert config.name == name and config.d_model % config.heads == 0


def test_every_metric_of_the_format_is_a_backends_workloads_metric() -> None:
    assert {workload_named(n).metric for n in ("kernels", "tinygpt-train")} == set(get_args(Metric))


def test_a_step_multiplies_every_linear_layer_once_per_kernel() -> None:
    xl = CONFIGS["xl"]
    layers = linear_shapes(xl)
    assert [s.name for s in layers] == ["qkv", "attn_proj", "fc", "mlp_proj", "head"]
    assert all(s.m == xl.batch * xl.context for s in layers)
    assert step_flops(xl) == sum(2 * s.m * s.k * s.n * s.per_step for s in layers)
