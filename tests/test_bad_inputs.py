"""Every op's bad inputs from its description (specs/opspecs): Python's checks raise
TypeError or ValueError naming the op and the argument; the native ops, called straight
through torch.ops.wheelops, raise RuntimeError with their own message, on each device
(tests/_native_checks.py makes the same native calls in a fresh process)."""

from __future__ import annotations

import opspecs
import pytest
import torch
from _helpers import DEVICES
from opspecs._spec import ones_on

import wheelops

BAD_INPUTS = [
    pytest.param(spec, bad, id=f"{spec.name}-{i}")
    for spec in opspecs.ALL
    for i, bad in enumerate(spec.bad_inputs)
]
NATIVE_BAD_CALLS = [
    pytest.param(bad, id=f"{bad.op}-{i}")
    for spec in opspecs.ALL
    for i, bad in enumerate(spec.native_bad_calls)
]


@pytest.mark.parametrize(("spec", "bad"), BAD_INPUTS)
def test_python_checks_name_the_op_and_the_argument(spec, bad):
    with pytest.raises(bad.error, match=f"^wheelops.{spec.name}: .*{bad.message}"):
        getattr(wheelops, spec.name)(*bad.args(), **bad.kwargs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bad", NATIVE_BAD_CALLS)
def test_native_checks_raise_their_message(bad, device):
    with pytest.raises(RuntimeError, match=f"wheelops.{bad.op}: .*{bad.message}"):
        bad.call(ones_on(device))
    if device == "cuda":
        torch.cuda.synchronize()  # no CUDA error left behind
