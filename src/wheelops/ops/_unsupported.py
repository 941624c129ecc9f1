"""The refusal every autograd layer raises for a derivative an op does not have."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Formula = Callable[..., Any]

_SECOND_ORDER = {
    "backward": "double backward: a gradient taken with create_graph=True, then differentiated",
    "forward-mode AD": "forward-over-reverse, e.g. torch.func.hessian or jacfwd(jacrev(f))",
}


def unsupported(op: str, transform: str, gradient_of: str | None) -> NotImplementedError:
    message = f"wheelops.{op} does not support {transform}"
    if gradient_of is not None:
        message += (
            f": it is the gradient of wheelops.{gradient_of}, so this asks for a second "
            f"derivative of wheelops.{gradient_of} ({_SECOND_ORDER[transform]}), which it "
            "does not have. Take first derivatives only; README's 'Derivatives' table lists "
            "what each op supports"
        )
    return NotImplementedError(message)
