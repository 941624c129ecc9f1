"""The two autograd layers (src/wheelops/ops/_autograd.py): the probe of the torch internals
the fast one uses names exactly those; a torch that lacks one gets the public-API layer,
whose derivatives are right and which the doctor names; and the derivative suite passes
on the public layer, forced with WHEELOPS_AUTOGRAD=public (issue #35)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _native_fixtures import installed_copy, run_python

from wheelops._compat import torch_internals
from wheelops.ops import _autograd, _autograd_fast

TESTS = Path(__file__).resolve().parent
# How the fast layer names the roots of the internals it reaches through attributes.
ROOTS = {"_C": "torch._C", "forward_ad": "torch.autograd.forward_ad"}
OVERLOAD = "torch.ops.aten.add.Tensor"  # an OpOverload, for its private attributes


def _chain(node: ast.expr) -> tuple[str, list[str]] | None:
    """`a.b.c` -> ("a", ["b", "c"]); None where the chain does not start at a name."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return (node.id, attrs[::-1]) if isinstance(node, ast.Name) else None


def internals_used(source: str) -> set[str]:
    """Every torch internal a module's code touches, as torch_internals.INTERNALS names it:
    private imports from torch, attributes of `_C` and `forward_ad`, and OpOverload's
    private attributes and `redispatch` on anything else."""
    used, chains = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            for alias in node.names:
                path = f"{node.module}.{alias.name}"
                private = any(part.startswith("_") for part in path.split("."))
                if private and alias.name not in ROOTS:
                    used.add(path)
        elif isinstance(node, ast.Attribute) and (found := _chain(node)):
            root, attrs = found
            if root in ROOTS:
                chains.add(".".join([ROOTS[root], *attrs]))
            elif node.attr.startswith("_") or node.attr == "redispatch":
                used.add(f"{OVERLOAD}.{node.attr}")
    # `_C._functorch` is part of `_C._functorch.maybe_current_level`: keep the longest.
    used |= {c for c in chains if not any(o.startswith(c + ".") for o in chains)}
    return used


def test_the_probe_names_every_internal_the_fast_layer_uses():
    used = internals_used(Path(_autograd_fast.__file__).read_text())
    assert used == set(torch_internals.INTERNALS)


def test_the_checker_finds_an_internal_added_to_the_fast_layer():
    source = "from torch.autograd.graph import _Hidden\nx = _C._new_thing()\ny = op._handle\n"
    assert internals_used(source) == {
        "torch.autograd.graph._Hidden",
        "torch._C._new_thing",
        f"{OVERLOAD}._handle",
    }


def test_this_torch_has_every_internal_of_the_fast_layer():
    # A new torch that fails this still works (the public layer serves, tested below):
    # the fast layer needs the renamed internal's new name.
    missing = torch_internals.facts().missing
    assert missing == (), f"torch {torch.__version__} lacks {missing}: update _autograd_fast.py"
    forced = os.environ.get(torch_internals.AUTOGRAD_ENV) == torch_internals.PUBLIC
    assert _autograd.PUBLIC is forced


def test_the_probe_sees_a_missing_internal(monkeypatch):
    import torch.autograd.function as function

    assert torch_internals.has("torch.autograd.function._SingleLevelFunction")
    monkeypatch.delattr(function, "_SingleLevelFunction")
    assert not torch_internals.has("torch.autograd.function._SingleLevelFunction")
    assert not torch_internals.has("torch.no_such_module.thing")
    assert not torch_internals.has("torch.ops.aten.no_such_op.default._op")


# Run in a fresh process whose torch lacks one internal of the fast layer: the ops take
# the public layer, their derivatives match eager's, and the doctor names the layer.
WITHOUT_AN_INTERNAL = """
import json, torch, torch._functorch.autograd_function, torch._functorch.utils as utils
# torch's own modules bound it at their import: only the fast layer's lookup finds it gone.
del utils.enable_single_level_autograd_function
import wheelops
from wheelops.ops import _autograd
from wheelops._compat import doctor
x = torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
t = torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
_, got = torch.func.jvp(lambda a: wheelops.softmax(a, -1), (x,), (t,))
_, want = torch.func.jvp(lambda a: torch.softmax(a, -1), (x,), (t,))
hessian = torch.func.hessian(lambda a: wheelops.softmax(a, -1).pow(3).sum())(x[0])
eager = torch.func.hessian(lambda a: torch.softmax(a, -1).pow(3).sum())(x[0])
report = doctor.collect(wheelops.__version__)
finding = next(f for f in report["findings"] if f["check"] == "autograd")
print(json.dumps({
    "public": _autograd.PUBLIC,
    "jvp": (got - want).abs().max().item(),
    "hessian": (hessian - eager).abs().max().item(),
    "finding": finding,
    "text": doctor.render(report),
}))
"""


@pytest.mark.slow
def test_a_torch_without_an_internal_gets_the_public_layer(tmp_path):
    package = installed_copy(tmp_path)
    env = {torch_internals.AUTOGRAD_ENV: ""}
    result = run_python(package, "-c", WITHOUT_AN_INTERNAL, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["public"] is True
    # float64 JVP and Hessian of softmax: a few roundings of values of size ~1.
    assert out["jvp"] < 1e-12 and out["hessian"] < 1e-12
    finding = out["finding"]
    assert finding["status"] == "degraded" and finding["fix"] == []
    missing = "torch._functorch.utils.enable_single_level_autograd_function"
    assert f"lacks {missing}, which the fast layer uses" in finding["message"]
    assert "public APIs: torch" in finding["runtime"]
    assert "autograd (degraded): the public-API autograd layer serves the ops" in out["text"]


def test_the_doctor_names_the_layer_that_serves():
    from wheelops._compat import loader

    finding = loader.report_with_devices([], None).finding("autograd")
    assert finding is not None
    layer = "public APIs" if _autograd.PUBLIC else "fast layer"
    assert finding.runtime.startswith(layer), finding


# The derivative suite, on the public layer: every derivative test passes there too.
DERIVATIVE_SUITE = ("test_derivatives.py", "test_derivative_properties.py")


def test_the_derivative_suite_passes_on_the_public_layer():
    if _autograd.PUBLIC:
        pytest.skip("this run is on the public layer already: the suite itself is the test")
    env = {**os.environ, torch_internals.AUTOGRAD_ENV: torch_internals.PUBLIC}
    env["WHEELOPS_HYPOTHESIS_PROFILE"] = "public-layer"  # conftest.py: 25 draws a test
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("WHEELOPS_PROGRESS_LOG", None)  # the outer run's log is its own
    suite = [str(TESTS / name) for name in DERIVATIVE_SUITE]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *suite]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    assert " passed" in summary and "failed" not in summary, summary
