"""wheelops.rgb_to_gray: BT.601 luma of uint8 RGB images, correctly rounded."""

from __future__ import annotations

import torch

from wheelops.ops import _checks, _entry

__all__ = ["rgb_to_gray"]


def _check(img: object) -> torch.Tensor:
    op = "rgb_to_gray"
    img = _checks.tensor_of(
        op, "img", img, (torch.uint8,), "torch.uint8",
        "convert float images with (img * 255).round().to(torch.uint8)",
    )  # fmt: skip
    if img.dim() not in (3, 4) or img.shape[-1] != 3:
        raise ValueError(
            f"wheelops.{op}: argument 'img' must have shape [H, W, 3] or [N, H, W, 3] "
            f"(channels-last RGB), got {list(img.shape)}; for NCHW use img.permute(0, 2, 3, 1)"
        )
    return img


def rgb_to_gray(img: torch.Tensor) -> torch.Tensor:
    """Return the BT.601 luma of uint8 RGB images, correctly rounded, as uint8.

    ``img`` is ``torch.uint8`` of shape ``[H, W, 3]`` or ``[N, H, W, 3]``
    (channels-last RGB, as image decoders produce; any strides, so the planar
    ``nchw.permute(0, 2, 3, 1)`` works too and is read in place). The result
    has shape ``img.shape[:-1]``, is contiguous, and holds

        round_half_to_even((299 R + 587 G + 114 B) / 1000)

    computed exactly in integer arithmetic: the correctly rounded value of
    ``0.299 R + 0.587 G + 0.114 B``. Exact ties occur (e.g. R, G, B = 1, 123, 0
    gives 72500 / 1000 = 72.5) and go to the even neighbour (72), as
    ``torch.round`` does. The weights sum to 1, so gray pixels stay exactly
    gray. Not differentiable (integer output).

    Example::

        >>> img = torch.tensor(
        ...     [[[255, 0, 0], [0, 255, 0], [0, 0, 255], [1, 123, 0]]], dtype=torch.uint8
        ... )
        >>> wheelops.rgb_to_gray(img)
        tensor([[ 76, 150,  29,  72]], dtype=torch.uint8)
    """
    return _entry.run(
        "rgb_to_gray", lambda: _check(img), torch.ops.wheelops.rgb_to_gray.default, img
    )


def _fake(img: torch.Tensor) -> torch.Tensor:
    _check(img)
    _checks.gpu_supported("rgb_to_gray", img)
    return img.new_empty(img.shape[:-1])


def register() -> None:
    torch.library.register_fake("wheelops::rgb_to_gray", _fake)
