"""The peer timed beside eager and torch.compile: Liger-Kernel's Triton ops, for the ops
both libraries have, each called as the same function of the op's benchmark inputs as
eager and wheelops are (``specs/opspecs/<op>.py``).

Liger's kernels are Triton, CUDA only; it is imported lazily, only for a CUDA run, and
only where ``import liger_kernel`` works (the GPU machine has no network: the wheel is
brought along and installed with ``--no-deps``, benchmarks/README.md). Otherwise there is
no Liger column and the JSON says why.

How each op is called, and why it computes what wheelops computes:

- rms_norm: ``liger_rms_norm(x, w, eps, offset=0.0, casting_mode="gemma",
  in_place=False)``. "gemma" computes in float32 (weight included) and rounds once, as
  wheelops and torch's fused CUDA kernel do; "llama" rounds x / rms to the dtype before
  the weight (HF Llama's rounding), "none" computes in the dtype. offset 0: the weight
  as given. in_place=False: in place, Liger's backward overwrites the incoming gradient,
  which the benchmark shares between implementations.
- layer_norm: ``liger_layer_norm(x, w, b, eps)`` (float32 inside, one rounding).
- softmax: ``liger_softmax(x)``, over the last dim (the benchmark's dim).
- silu_and_mul: Liger's fused gate-up SwiGLU, ``LigerFusedGateUpSiLUMulFunction.apply(x,
  False)`` where the installed Liger has it (0.8.5: x's halves read in place, as
  wheelops does; False: the backward must not overwrite x, run again under
  retain_graph); older ones, ``liger_swiglu(*x.chunk(2, -1))``, whose contiguous copies
  of each half are part of its time. Both round silu(gate) to the dtype before the
  product (as eager does): one rounding of each value's size more than wheelops, so its
  check allows one more (``relative_roundings``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType

import torch
from opspecs import layer_norm as layer_norm_spec
from opspecs import rms_norm as rms_norm_spec
from opspecs._spec import Output

LIGER = "liger"
FUNCTIONAL = "liger_kernel.transformers.functional"
OPS_MODULE = "liger_kernel.ops"
NOT_INSTALLED = "not installed"
NOT_ON_CUDA = "not on CUDA"


@dataclass(frozen=True)
class Peer:
    """One op of the peer: its call on the op's benchmark inputs, the call in words, the
    roundings of each value's size it makes beyond wheelops' (added to the op's rule
    when its result is checked), and, in words read from its source, how it rounds
    beyond that rule: said beside a result the rule calls wrong, so that a reader can
    judge (it is a peer, not a suspect)."""

    call: Callable[..., Output]
    how: str
    relative_roundings: float = 0.0
    rounds: str = ""

    def wrong(self, problem: str) -> str:
        """The liger_problem of a result beyond the rule."""
        return f"wrong: {problem}" + (f" ({self.rounds})" if self.rounds else "")


@dataclass(frozen=True)
class Liger:
    """What the benchmark knows of Liger in this run: its ops, or why it has none."""

    ops: Mapping[str, Peer]
    version: str | None
    absent: str | None  # why there is no Liger column; None where there is one

    def describe(self) -> dict[str, object]:
        """For the JSON's settings."""
        return {
            "version": self.version,
            "absent": self.absent,
            "ops": {name: peer.how for name, peer in self.ops.items()},
        }


def runs_on(device: torch.device) -> bool:
    """Liger's kernels are Triton: CUDA only."""
    return device.type == "cuda"


def load_liger(device: torch.device) -> Liger:
    """Liger's ops where it can run here; else none, and why."""
    if not runs_on(device):
        return Liger({}, None, NOT_ON_CUDA)
    try:
        functional = importlib.import_module(FUNCTIONAL)
        ops = importlib.import_module(OPS_MODULE)
    except ModuleNotFoundError as err:
        missing = (err.name or "").split(".")[0]
        absent = NOT_INSTALLED if missing == "liger_kernel" else f"not importable: {err}"
        return Liger({}, None, absent)
    except Exception as err:  # a broken install is reported, never fatal
        return Liger({}, None, f"not importable: {type(err).__name__}: {err}")
    return Liger(liger_ops(functional, ops), _distribution_version(), None)


# Liger 0.8.5's Triton source: its arithmetic on 16-bit tensors stays in the dtype where
# it casts nothing to float32.
SILU_ROUNDS = (
    "Liger rounds silu(gate) to the dtype before the product: two roundings, whose mean "
    "error is not one rounding's"
)
SOFTMAX_ROUNDS = (
    "Liger's backward forms g * y and y * (g - dot) in the input dtype, each product "
    "rounded to it: more roundings than one"
)


def liger_ops(functional: ModuleType, ops: ModuleType) -> dict[str, Peer]:
    """Each op both libraries have, as a function of the op's benchmark inputs."""
    rms_eps, ln_eps = rms_norm_spec.EPS, layer_norm_spec.EPS
    fused = getattr(ops, "LigerFusedGateUpSiLUMulFunction", None)
    if fused is not None:
        silu_and_mul = Peer(
            lambda x: fused.apply(x, False),
            "LigerFusedGateUpSiLUMulFunction.apply(x, False)",
            relative_roundings=1.0,
            rounds=SILU_ROUNDS,
        )
    else:
        silu_and_mul = Peer(
            lambda x: functional.liger_swiglu(*x.chunk(2, -1)),
            "liger_swiglu(*x.chunk(2, -1))",
            relative_roundings=1.0,
            rounds=SILU_ROUNDS,
        )
    return {
        "rms_norm": Peer(
            lambda x, w: functional.liger_rms_norm(
                x, w, rms_eps, offset=0.0, casting_mode="gemma", in_place=False
            ),
            f"liger_rms_norm(x, w, {rms_eps}, offset=0.0, casting_mode='gemma', in_place=False)",
        ),
        "layer_norm": Peer(
            lambda x, w, b: functional.liger_layer_norm(x, w, b, ln_eps),
            f"liger_layer_norm(x, w, b, {ln_eps})",
        ),
        "softmax": Peer(functional.liger_softmax, "liger_softmax(x)", rounds=SOFTMAX_ROUNDS),
        "silu_and_mul": silu_and_mul,
    }


def _distribution_version() -> str | None:
    try:
        return metadata.version("liger-kernel")
    except metadata.PackageNotFoundError:
        return None
