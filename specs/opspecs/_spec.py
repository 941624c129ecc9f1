"""What one op description holds (the shape of PyTorch's OpInfo, cut to what wheelops'
suites ask): how to call the op and make its inputs, what it must equal (its float64
reference, and eager PyTorch), which derivatives it has, how it fails, and what the
benchmark times. The tests and the benchmarks read an op through this one class."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

import wheelops

Output = torch.Tensor | tuple[torch.Tensor, ...]
Shape = tuple[int, ...]
Inputs = tuple[object, ...]  # tensors, and a scalar where the op takes one
# (shape, dtype, device, seed) -> the op's positional arguments
InputMaker = Callable[[Shape, torch.dtype, "str | torch.device", int], Inputs]
Tensors = Callable[..., torch.Tensor]  # t(*shape, dtype=...): ones on the device under test

FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


@dataclass(frozen=True)
class Sample:
    """One way of calling the op: wheelops and eager PyTorch take the same arguments,
    the first ``arity`` of the input maker's (None: all), constants bound."""

    call: Callable[..., Output]
    eager: Callable[..., Output]  # the formula a user would write (the benchmark races it)
    suffix: str = ""  # "" for the op's default call; else what the test id adds
    arity: int | None = None
    # What the tests expect where eager is not exact on every device (None: eager's)
    expected: Callable[..., Output] | None = None

    @property
    def answer(self) -> Callable[..., Output]:
        return self.expected or self.eager

    def arguments(self, inputs: Inputs) -> Inputs:
        """Of the input maker's arguments, the ones this call takes."""
        return inputs[: self.arity]


@dataclass(frozen=True)
class Derivatives:
    """Which derivatives a differentiable op has, each one eager's (tests/test_derivatives.py):
    the first, forward-mode AD (jvp: every differentiable op has it), and second ones where
    ``second`` says so; elsewhere a clear error naming ``backward_op``."""

    backward_op: str  # the native op that computes the gradient, named in its errors
    second: bool = False  # double backward and forward-over-reverse
    # Gradients at NaN inputs are eager's element by element (no reduction spreads a NaN).
    nan_like_eager: bool = False
    # A direct call of backward_op: (g, x), both [3, 4] float64 -> its arguments (None:
    # backward_op is the op itself, or not called alone).
    backward_args: Callable[[torch.Tensor, torch.Tensor], tuple[object, ...]] | None = None
    # Where ``second``: backward_op's formula in eager PyTorch, on the same arguments.
    backward_eager: Callable[..., torch.Tensor] | None = None


@dataclass(frozen=True)
class BadInput:
    """The public function called with bad arguments: it must raise ``error`` with a
    message "wheelops.<op>: ..." matching ``message`` (a regex), before any native code."""

    args: Callable[[], tuple[object, ...]]  # made when the test runs
    error: type[Exception]
    message: str
    kwargs: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class NativeBadCall:
    """A native op called straight through torch.ops.wheelops with bad input: it must
    raise RuntimeError("wheelops.<op>: ...") matching ``message`` (a regex)."""

    op: str
    call: Callable[[Tensors], object]  # given ones_on(the device under test)
    message: str


def ones_on(device: str | torch.device) -> Tensors:
    """t(*shape, dtype=float32): ones on the device (t() is a 0-dim tensor)."""

    def t(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.ones(shape, dtype=dtype, device=device)

    return t


@dataclass(frozen=True)
class Benchmark:
    """What benchmarks/run.py times: shapes per profile, and the bytes a pass must move
    at best ((shape, itemsize) -> bytes; each input read once, each output written once)."""

    shapes: Mapping[str, tuple[Shape, ...]]
    label: Callable[[Shape], str]
    forward_bytes: Callable[[Shape, int], int]
    backward_bytes: Callable[[Shape, int], int] | None = None  # None: no backward
    # Whether eager runs more than one kernel per pass (forward, backward): the
    # ">= 2x eager" target applies only there.
    eager_unfused: tuple[bool, bool] = (True, True)
    bandwidth_target: bool = True  # False where the time is not memory-bound math
    # What the benchmark's check against float64 (benchmarks/verify.py) allows beyond float32
    # arithmetic and one rounding: the length of the op's longest float32 sum (forward or
    # backward), and roundings of intermediates stored in the dtype, in units of the
    # result's rms and of each value (each op states its derivation).
    sum_length: Callable[[Shape], int] = lambda shape: 1
    dtype_roundings: float = 0.0
    relative_roundings: float = 0.0
    # The backward takes the op's output (rounded to the dtype), not its inputs: its
    # float64 reference is Derivatives.backward_eager on the rounded output.
    backward_from_rounded_output: bool = False
    # Where a backward result cancels: the size of the float32 terms behind each of its
    # elements, from the float64 inputs and incoming gradients (the benchmark's check
    # scales its float32 roundings by it, per element, in place of the result's rms).
    backward_terms: Callable[[tuple, tuple], tuple[torch.Tensor, ...]] | None = None
    note: str = ""

    @property
    def has_backward(self) -> bool:
        return self.backward_bytes is not None

    def bytes(self, shape: Shape, dtype: torch.dtype, backward: bool) -> int:
        """What one pass at ``shape`` in ``dtype`` must move at best."""
        count = self.backward_bytes if backward else self.forward_bytes
        assert count is not None, "no backward"
        return count(shape, torch.empty((), dtype=dtype).element_size())


@dataclass(frozen=True)
class OpSpec:
    """One public op of wheelops, described once for every cross-cutting suite."""

    name: str  # as in wheelops.ops.__all__ and torch.ops.wheelops
    make: InputMaker
    samples: tuple[Sample, ...]  # the first is the op's default call
    # The default call's exact answer, from the same (already rounded) arguments: the
    # formula in float64 (or the correctly rounded result where the op promises one).
    # The op's module also defines it as ``reference``, taking the public function's
    # arguments, which its own tests, the property tests and the bound tests compare with.
    reference: Callable[..., Output]
    native_bad_calls: tuple[NativeBadCall, ...]  # at least one per native op (backward too)
    bad_inputs: tuple[BadInput, ...] = ()  # the public function's argument checks
    dtypes: tuple[torch.dtype, ...] = FLOATS
    derivatives: Derivatives | None = None  # None: not differentiable
    # The suites draw and size inputs by one tensor's shape; an op whose input maker takes
    # another kind of shape maps that one onto its own (identity: the maker takes it).
    problem_shape: Callable[[Shape], Shape] = lambda shape: shape
    # Its result also depends on a GEMM of torch's (cuBLAS), which promises bitwise
    # reproducibility only for one stream with one workspace (the stream tests allow it).
    torch_gemms: bool = False
    benchmark: Benchmark | None = None  # None: not in the generic benchmark

    def inputs(
        self,
        shape: Shape,
        dtype: torch.dtype | None = None,
        device: str | torch.device = "cpu",
        seed: int = 0,
        *,
        sample: Sample | None = None,
        requires_grad: bool = False,
    ) -> Inputs:
        """A sample's arguments (the default one's unless given) for a tensor of ``shape``
        (see problem_shape), in ``dtype`` (the op's first unless given); with
        ``requires_grad``, every floating-point tensor of a differentiable op a leaf that
        requires a gradient."""
        made = self.make(self.problem_shape(shape), dtype or self.dtypes[0], device, seed)
        args = (sample or self.samples[0]).arguments(made)
        if not (requires_grad and self.differentiable):
            return args
        return tuple(
            a.requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args
        )

    @property
    def call(self) -> Callable[..., Output]:
        return self.samples[0].call

    @property
    def eager(self) -> Callable[..., Output]:
        return self.samples[0].eager

    @property
    def answer(self) -> Callable[..., Output]:
        """What the default call must equal on the same device and dtype (eager's, or the
        sample's ``expected``)."""
        return self.samples[0].answer

    @property
    def differentiable(self) -> bool:
        return self.derivatives is not None

    @property
    def argument_names(self) -> list[str]:
        """The public function's parameters: its errors name the arguments by them."""
        return list(inspect.signature(getattr(wheelops, self.name)).parameters)

    def sample_name(self, sample: Sample) -> str:
        """The op's name, and the sample's suffix where it has one (a test id)."""
        return "_".join(filter(None, (self.name, sample.suffix)))
