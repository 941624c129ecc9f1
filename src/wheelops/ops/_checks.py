"""Argument checks shared by the public functions and the fake kernels.

They raise TypeError (wrong kind or dtype) or ValueError (wrong shape, device or
value) that name the op, the argument and what was expected, before anything
reaches native code.
"""

from __future__ import annotations

import torch

from wheelops._compat import loader

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_DTYPE_NAMES = "float32, float16, bfloat16 or float64"
SUPPORTED_DEVICE_TYPES = ("cpu", "cuda", "meta")


def float_tensor(op: str, name: str, value: object) -> torch.Tensor:
    return tensor_of(op, name, value, FLOAT_DTYPES, _DTYPE_NAMES)


def tensor_of(
    op: str,
    name: str,
    value: object,
    dtypes: tuple[torch.dtype, ...],
    expected: str,
    hint: str = "",
) -> torch.Tensor:
    """A dense tensor of one of `dtypes` on a device wheelops runs on; `expected` names the
    dtypes in the message, `hint` (optional) says how to get one."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"wheelops.{op}: argument '{name}' must be a torch.Tensor, got {type(value).__name__}"
        )
    if value.layout != torch.strided:
        raise TypeError(
            f"wheelops.{op}: argument '{name}' must be a dense (strided) tensor, "
            f"got layout {value.layout}"
        )
    if value.dtype not in dtypes:
        raise TypeError(
            f"wheelops.{op}: argument '{name}' has dtype {value.dtype}; expected {expected}"
            + (f" ({hint})" if hint else "")
        )
    if value.device.type not in SUPPORTED_DEVICE_TYPES:
        raise ValueError(
            f"wheelops.{op}: argument '{name}' is on device {value.device}; wheelops runs on "
            "cpu and cuda"
        )
    return value


def same_device(op: str, a_name: str, a: torch.Tensor, b_name: str, b: torch.Tensor) -> None:
    if a.device != b.device:
        raise ValueError(
            f"wheelops.{op}: arguments '{a_name}' and '{b_name}' must be on the same device "
            f"(got {a.device} and {b.device})"
        )


def same_dtype(op: str, a_name: str, a: torch.Tensor, b_name: str, b: torch.Tensor) -> None:
    if a.dtype != b.dtype:
        raise TypeError(
            f"wheelops.{op}: arguments '{a_name}' and '{b_name}' must have the same dtype "
            f"(got {a.dtype} and {b.dtype})"
        )


def same_shape(op: str, a_name: str, a: torch.Tensor, b_name: str, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"wheelops.{op}: arguments '{a_name}' and '{b_name}' must have the same shape "
            f"(got {list(a.shape)} and {list(b.shape)}); wheelops does not broadcast, so "
            f"expand explicitly, e.g. {b_name}.expand_as({a_name})"
        )


def python_float(op: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"wheelops.{op}: argument '{name}' must be a Python float, got {type(value).__name__}"
        )
    try:
        return float(value)
    except OverflowError:  # an int beyond float64: float() would not say which argument
        raise ValueError(
            f"wheelops.{op}: argument '{name}' must be representable as a float (float64), "
            f"got an int of {value.bit_length()} bits"
        ) from None


def python_int(op: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"wheelops.{op}: argument '{name}' must be an int, got {type(value).__name__}"
        )
    return value


def one_of(op: str, name: str, value: object, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        choices = " or ".join(repr(a) for a in allowed)
        raise ValueError(f"wheelops.{op}: argument '{name}' must be {choices}, got {value!r}")
    return value


def runnable(op: str, tensor: torch.Tensor, tracing: bool | None = None) -> None:
    """The native libraries are loaded and have kernels for the tensor's device and GPU.
    `tracing`: whether torch.compile is tracing, when the caller knows."""
    loader.require(op)
    if tensor.is_cuda:
        loader.require_cuda_kernels(op, tensor)
        # Under torch.compile the fake kernel checks the GPU, at trace time.
        if not (torch.compiler.is_compiling() if tracing is None else tracing):
            loader.check_device(op, tensor.get_device())


def gpu_supported(op: str, tensor: torch.Tensor) -> None:
    """For fake kernels: a compiled graph must not launch on a GPU the build cannot run on."""
    if tensor.is_cuda:
        loader.check_device(op, tensor.device.index)


def opmath(t: torch.Tensor) -> torch.Tensor:
    """`t` in the precision wheelops computes in: float32 for 16-bit floats, else as is."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
