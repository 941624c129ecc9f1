"""Which autograd layer serves the ops (wheelops/ops/_autograd.py), and what the public one
gives up."""

from __future__ import annotations

from collections.abc import Callable

from ..report import Finding, Status
from ..torch_internals import AUTOGRAD_ENV, INTERNALS, PUBLIC, AutogradFacts


def public_autograd(facts: AutogradFacts) -> bool:
    """Whether the ops' derivatives run on public torch APIs only: where this torch lacks
    an internal the fast layer uses, or where WHEELOPS_AUTOGRAD=public asks for it."""
    return bool(facts.missing) or facts.requested == PUBLIC


def accelerator_finding(state: str, reinstall: Callable[[], str]) -> Finding:
    """The optional C++ autograd accelerator (wheelops/ops/_accel.py, DESIGN.md 13): served,
    off, absent for this torch, or refused. Absent and refused, the stable-ABI layer serves
    every call correctly, at more host time per call."""
    build = "optional C++ autograd accelerator, one per torch release of the wheel"
    if state.startswith("loaded"):
        message = "the C++ accelerator serves the eager calls of the ops a training loop calls most"
        return Finding("accelerator", Status.OK, build, state, message)
    slower = "the stable-ABI autograd layer serves every call, correctly, at more host time"
    if state.startswith("off"):
        message = f"the accelerator is turned off: {slower}"
        fix = ("unset WHEELOPS_ACCEL",)
        return Finding("accelerator", Status.DEGRADED, build, state, message, fix)
    if state.startswith("absent"):
        message = (
            f"this wheel carries no accelerator for this torch release: {slower}; a wheelops "
            "release built for this torch carries one"
        )
        return Finding("accelerator", Status.OK, build, state, message)
    message = (
        f"the accelerator for this torch is damaged, or was not built for it: {slower}. "
        "WHEELOPS_ACCEL_LIBRARY, where set, names the library refused; else reinstall wheelops"
    )
    return Finding("accelerator", Status.DEGRADED, build, state, message, (reinstall(),))


def autograd_finding(facts: AutogradFacts) -> Finding:
    build = "fast layer (torch internals), else public APIs"
    torch = f"torch {facts.torch_version}"
    if not public_autograd(facts):
        fast = f"fast layer: {torch} has all {len(INTERNALS)} internals it uses"
        if facts.requested is None:
            return Finding("autograd", Status.OK, build, fast, "the fast layer serves the ops")
        message = (
            f"{AUTOGRAD_ENV}={facts.requested!r} is not {PUBLIC!r}: ignored; the fast layer "
            "serves the ops"
        )
        return Finding(
            "autograd", Status.DEGRADED, build, fast, message, (f"unset {AUTOGRAD_ENV}",)
        )
    if facts.missing:
        runtime = f"public APIs: {torch} lacks {len(facts.missing)} internal(s)"
        why = f"{torch} lacks {', '.join(facts.missing)}, which the fast layer uses"
        fix: tuple[str, ...] = ()
    else:
        runtime = f"public APIs: {AUTOGRAD_ENV}={PUBLIC}"
        why = f"{AUTOGRAD_ENV}={PUBLIC} asks for it"
        fix = (f"unset {AUTOGRAD_ENV}",)
    message = (
        f"the public-API autograd layer serves the ops ({why}). The wheelops functions and "
        "modules keep every derivative (reverse and forward mode, torch.func, second "
        "derivatives where an op has them) at more host time per call; a raw "
        "torch.ops.wheelops.* call (what a torch.compile graph makes) has reverse mode only "
        "(torch.library.register_autograd's) and refuses a forward-mode tangent"
    )
    return Finding("autograd", Status.DEGRADED, build, runtime, message, fix)
