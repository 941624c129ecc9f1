"""Property-based tests (hypothesis) of layer_norm and rms_norm, forward and backward:
the two norms share their draws and their bad arguments, so their tests live together.
Every other op's property tests are in its own test file (tests/test_<op>.py), with the
checks shared from tests/_property_checks.py.

Each property test draws a dtype, a shape (empty, single, prime and long sizes, leading
batch dimensions of varying rank), a memory layout per tensor (contiguous, permuted,
sliced with a step, one element off alignment, expanded with stride 0) and the op's
scalar arguments at their edges, then compares the op with a float64 reference computed
from the very inputs it received, at the tolerances the op's own tests use
(rgb_to_gray and normalize_volume: bitwise). Invalid arguments are a property too: a
TypeError or ValueError naming the op and the argument, never a crash or a RuntimeError
from native code.

The hypothesis profile (tests/conftest.py) sets the number of examples: "ci"
is small and derandomized, "gpu" (the device suite) runs many more.
"""

from __future__ import annotations

import math

import _example_log
import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES, randn
from _norm_helpers import (
    assert_layer_norm_grad_weight_close,
    assert_layer_norm_grad_x_close,
    assert_layer_norm_out_close,
    assert_norm_bias_grad_close,
    assert_rms_norm_grad_weight_close,
    assert_rms_norm_grad_x_close,
    assert_rms_norm_out_close,
    float64_grads,
    layer_norm_float64_grads,
)
from _property_checks import (
    assert_rejected,
    assert_result_layout,
    float_dtypes,
    grad_leaf,
    saturate,
)
from _strategies import (
    apply_layout,
    layouts,
    not_numbers,
    row_lengths,
    scales,
    seeds,
    shapes,
    sizes,
)
from hypothesis import given
from hypothesis import strategies as st
from opspecs.layer_norm import reference as layer_norm_reference
from opspecs.rms_norm import reference as rms_norm_reference

import wheelops
from wheelops.ops.rms_norm import default_eps

# ---------------------------------------------------------------------------
# layer_norm and rms_norm


def norm_eps(smallest: float) -> st.SearchStrategy[float]:
    """eps from `smallest` to large: edges, then anything in between."""
    edges = [1e-30, 1e-12, 1e-6, 1e-5, 1e-3, 1.0, 1e3, 1e10, 1e30]
    return st.one_of(
        st.sampled_from([e for e in edges if e >= smallest]), st.floats(smallest, 1e30)
    )


# rms_norm: down to 1e-30, where an all-zero row's rstd (eps**-0.5) is still
# finite in the float32 statistics saved for the backward. layer_norm: down to
# 1e-12, since on a constant row (an expanded last dim, or low precision
# rounding values together) its gradient is rstd * (g - mean(g) - xhat * ...)
# with xhat = (x - mean) * rstd, which the float64 reference itself gets wrong
# once float64 rounding of x - mean times rstd = eps**-0.5 is not negligible
# (1e-16 * 1e15 at eps = 1e-30: off by 1e-3 relative, found by this test).
RMS_NORM_EPS = norm_eps(1e-30)
LAYER_NORM_EPS = norm_eps(1e-12)
# Values around a large mean (shift) stress the cancellation in x - mean.
norm_shifts = st.sampled_from([0.0, 0.0, 0.5, 100.0])


def norm_inputs(
    draw: st.DrawFn, device: str
) -> tuple[torch.dtype, int, torch.Tensor, torch.Tensor | None]:
    """dtype, seed, x and an optional weight: what both norms draw first."""
    dtype, seed = draw(float_dtypes()), draw(seeds)
    shape = draw(shapes(device, min_rank=1, max_rank=4, last=row_lengths(device)))
    x = randn(shape, dtype, device, seed, draw(scales), draw(norm_shifts))
    x = grad_leaf(apply_layout(x, draw(layouts(shape), label="x layout")))
    weight = optional_param(draw, "weight", shape[-1], dtype, device, seed + 1)
    return dtype, seed, x, weight


def optional_param(
    draw: st.DrawFn, name: str, cols: int, dtype: torch.dtype, device: str, seed: int
) -> torch.Tensor | None:
    """None, or a [cols] parameter in any layout, requiring grad or not."""
    if not draw(st.booleans(), label=f"with {name}"):
        return None
    p = randn((cols,), dtype, device, seed, scale=0.5, shift=1.0)
    p = apply_layout(p, draw(layouts((cols,)), label=f"{name} layout")).detach()
    return p.requires_grad_(draw(st.booleans(), label=f"{name} requires grad"))


def norm_gradients(
    out: torch.Tensor, inputs: list[torch.Tensor | None], grad: torch.Tensor
) -> list[torch.Tensor | None]:
    """Gradients of the inputs that require one (None for the others)."""
    wanted = [t for t in inputs if t is not None and t.requires_grad]
    grads = iter(torch.autograd.grad(out, wanted, grad))
    return [next(grads) if t is not None and t.requires_grad else None for t in inputs]


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_layer_norm(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed, x, weight = norm_inputs(draw, device)
    cols = x.shape[-1]
    bias = optional_param(draw, "bias", cols, dtype, device, seed + 2)
    eps = draw(LAYER_NORM_EPS, label="eps")
    x.requires_grad_(draw(st.booleans(), label="x requires grad"))
    _example_log.record("layer_norm", device)

    out = wheelops.layer_norm(x, weight, bias, eps)
    assert_result_layout(out, tuple(x.shape), dtype)
    expected = saturate(layer_norm_reference(x.detach(), weight, bias, eps).detach(), dtype)
    assert_layer_norm_out_close(out, expected, x.detach(), weight, bias, eps)
    if not out.requires_grad:
        return
    grad = randn(tuple(x.shape), dtype, device, seed + 3)
    mine = norm_gradients(out, [x, weight, bias], grad)
    reference = layer_norm_float64_grads(grad, x, weight, bias, eps)
    # A constant row has rstd = eps**-0.5: its gradients may overflow float16.
    reference = [None if r is None else saturate(r, dtype) for r in reference]
    if mine[0] is not None and x.numel() == 0:
        assert mine[0].shape == x.shape  # (the bound's helper reduces over rows)
    elif mine[0] is not None:
        assert_layer_norm_grad_x_close(mine[0], reference[0], x.detach(), weight, grad, eps)
    if mine[1] is not None:
        assert_layer_norm_grad_weight_close(mine[1], reference[1], x.detach(), grad, eps)
    if mine[2] is not None:
        assert_norm_bias_grad_close(mine[2], reference[2], grad)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_rms_norm(device: str, data: st.DataObject) -> None:
    draw = data.draw
    dtype, seed, x, weight = norm_inputs(draw, device)
    cols = x.shape[-1]
    eps = draw(st.one_of(st.none(), RMS_NORM_EPS), label="eps")
    x.requires_grad_(draw(st.booleans(), label="x requires grad"))
    _example_log.record("rms_norm", device)

    out = wheelops.rms_norm(x, weight, eps)
    assert_result_layout(out, tuple(x.shape), dtype)
    ref_eps = default_eps(dtype) if eps is None else eps
    expected = rms_norm_reference(x.detach(), weight, ref_eps)
    assert_rms_norm_out_close(out, expected, x.detach(), weight, ref_eps)
    if not out.requires_grad:
        return
    grad = randn(tuple(x.shape), dtype, device, seed + 3)
    mine = norm_gradients(out, [x, weight], grad)
    reference = float64_grads(lambda a, w: F.rms_norm(a, (cols,), w, ref_eps), grad, x, weight)
    if mine[0] is not None:
        assert_rms_norm_grad_x_close(mine[0], reference[0], x.detach(), weight, grad, ref_eps)
    if mine[1] is not None:
        assert_rms_norm_grad_weight_close(mine[1], reference[1], x.detach(), grad, ref_eps)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@given(data=st.data())
def test_norms_reject_bad_arguments(device: str, op: str, data: st.DataObject) -> None:
    draw = data.draw
    norm = getattr(wheelops, op)
    shape = draw(shapes(device, min_rank=1, max_rank=3))
    bad_eps = draw(
        st.one_of(
            # None is rms_norm's default (the compute dtype's epsilon), not an error.
            not_numbers().filter(lambda v: not (v is None and op == "rms_norm")),
            st.floats(max_value=-1e-300),
            st.just(math.nan),
            st.integers(max_value=-1),
            st.sampled_from([10**309, 10**400]),
        ),
        label="bad eps",
    )
    weight_shape = draw(
        st.lists(sizes(40), max_size=2).map(tuple).filter(lambda s: s != shape[-1:])
    )
    _example_log.record(op, device)
    x = torch.zeros(shape, device=device)
    assert_rejected(lambda: norm(x, None, eps=bad_eps), op, "eps")
    weight = torch.zeros(weight_shape, device=device)
    assert_rejected(lambda: norm(x, weight), op, "weight")
