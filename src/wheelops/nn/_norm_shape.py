"""normalized_shape of the norm modules: the last dimension's size only."""

from __future__ import annotations

from collections.abc import Sequence


def last_dim(cls: str, normalized_shape: object) -> int:
    """An int, or a one-element sequence as torch.nn accepts; wheelops norms the last dim only."""
    value = normalized_shape
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{cls}: 'normalized_shape' must be a positive int (the size of the last "
            f"dimension), got {normalized_shape!r}"
        )
    return value
