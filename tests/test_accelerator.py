"""The optional autograd accelerator (src/wheelops/ops/_accel.py, accelerator/; DESIGN.md 13):
where it serves, each accelerated op gives bit for bit what its own Python path gives,
values and gradients, and hands every call it declines (keywords, subclasses, transforms,
bad arguments) to that path; where it is off, absent or cannot load, the Python path
serves alone and `_accel.state()` says why."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import torch
from _native_fixtures import installed_copy, run_python

import wheelops
from wheelops.ops import _accel

REPO = Path(__file__).resolve().parent.parent
TORCH = torch.__version__.split("+")[0]

# Every accelerated op, called through its public function (the accelerator's entry) and
# through its Python path, on the same inputs; the gradients of both by autograd.grad.
EQUIVALENCE = r"""
import json, sys
import torch, wheelops
from wheelops.ops import _accel

torch.manual_seed(0)
def t(*shape):
    return torch.randn(*shape, dtype=torch.float64).float().requires_grad_()

x, w, b, wide = t(4, 8), t(8), t(8), t(4, 16)
weight, bias = t(16, 8), t(16)
calls = [
    ("add", (x, t(4, 8))), ("relu_scale", (x, 1.7)), ("relu_scale", (x, 2)),
    ("softmax", (x, -1)), ("softmax", (x, 0)),
    ("layer_norm", (x, w, b, 1e-5)), ("layer_norm", (x, None, None, 1e-5)),
    ("layer_norm", (x, None, b, 0.5)), ("rms_norm", (x, w, None)), ("rms_norm", (x, None, 1e-3)),
    ("bias_gelu", (x, b, "none")), ("bias_gelu", (x, b, "tanh")), ("silu_and_mul", (wide,)),
    ("fused_linear_gelu", (x, weight, bias, "none")),
    ("fused_linear_gelu", (x, weight, None, "tanh")),
]
report = {"mismatches": [], "served": [], "grad_fns": {}}
for name, args in calls:
    module = sys.modules[f"wheelops.ops.{name}"]
    public = getattr(wheelops, name)
    public(*args)  # the first call registers the ops: the entry is bound after it
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    for grad_mode in (True, False):
        with torch.set_grad_enabled(grad_mode):
            fast, slow = public(*args), module._python_path(*args)
        same = torch.equal(fast, slow)
        if grad_mode:
            report["grad_fns"][name] = [type(fast.grad_fn).__name__, type(slow.grad_fn).__name__]
            g = torch.randn_like(fast)
            fast_grads = torch.autograd.grad(fast, inputs, g)
            slow_grads = torch.autograd.grad(slow, inputs, g)
            same = same and all(map(torch.equal, fast_grads, slow_grads))
        if not same:
            kinds = [type(a).__name__ for a in args]
            report["mismatches"].append(f"{name}{kinds} grad={grad_mode}")
    report["served"].append(module._eager is not module._python_path)

# Declined calls take the Python path: keywords, a subclass, a bad argument.
class Sub(torch.Tensor):
    pass
report["keywords"] = torch.equal(wheelops.softmax(x, dim=0), wheelops.softmax(x, 0))
report["subclass"] = type(wheelops.add(x.detach().as_subclass(Sub), x.detach())).__name__
try:
    wheelops.add(x, x.double())
    report["bad_argument"] = "no error"
except Exception as err:
    report["bad_argument"] = f"{type(err).__name__}: {err}"
report["state"] = _accel.state()
print(json.dumps(report))
"""

STATE = "import torch, wheelops; wheelops.add(torch.ones(2), torch.ones(2)); " + (
    "from wheelops.ops import _accel; print(_accel.state())"
)


def _pypi_reachable() -> bool:
    try:
        urllib.request.urlopen("https://pypi.org/pypi/torch/json", timeout=20).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_copy(tmp_path_factory.mktemp("accel-install"))


@pytest.fixture(scope="module")
def accelerator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The accelerator for this torch: the one the installed wheel carries, else (dev mode, or
    a torch the wheel has none for) one built from the checkout by
    build_tools.compile.accelerator (torch's headers: this torch's own, else PyPI's)."""
    if _accel.expected_path().is_file():
        return _accel.expected_path()
    if not (REPO / "accelerator").is_dir():
        pytest.skip("needs the source checkout")
    if not (Path(torch.__file__).parent / "include").is_dir() and not _pypi_reachable():
        pytest.skip("needs this torch's headers: its include/ or PyPI's wheel")
    out = tmp_path_factory.mktemp("accel-build")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build_tools.compile.accelerator",
            "--out",
            str(out),
            "--torch",
            TORCH,
        ],
        cwd=REPO,
        check=True,
        timeout=900,
    )
    return out / "_accel" / _accel.folder(TORCH) / "wheelops_accel.abi3.so"


def test_accelerated_ops_equal_their_python_paths_bit_for_bit(package, accelerator):
    run = run_python(package, "-c", EQUIVALENCE, env={"WHEELOPS_ACCEL_LIBRARY": str(accelerator)})
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.splitlines()[-1])
    assert report["state"].startswith(f"loaded for torch {TORCH}"), report["state"]
    assert all(report["served"]), report
    # The accelerator's nodes are C++ (torch names them CppFunction), the Python path's not:
    # the two calls took different paths to equal results.
    for name, (fast, slow) in report["grad_fns"].items():
        assert fast == "CppFunction" and slow != fast, (name, fast, slow)
    assert report["mismatches"] == []
    assert report["keywords"] is True
    assert report["subclass"] == "Sub"  # __torch_function__ kept the subclass
    # The Python path explains the kernel's refusal, naming the arguments.
    assert report["bad_argument"].startswith(
        "TypeError: wheelops.add: arguments 'a' and 'b' must"
    ), report


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WHEELOPS_ACCEL": "0"}, "off (WHEELOPS_ACCEL=0)"),
        ({"WHEELOPS_ACCEL_LIBRARY": "/nonexistent/wheelops_accel.abi3.so"}, "absent for torch"),
    ],
)
def test_without_the_accelerator_the_python_path_serves(package, env, expected):
    run = run_python(package, "-c", STATE, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith(expected), run.stdout


def test_a_damaged_accelerator_is_refused_and_the_python_path_serves(package, tmp_path):
    damaged = tmp_path / "wheelops_accel.abi3.so"
    damaged.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    run = run_python(package, "-c", STATE, env={"WHEELOPS_ACCEL_LIBRARY": str(damaged)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith("refused (ImportError"), run.stdout


def test_a_wheel_carries_the_accelerator_for_each_torch_of_its_variant():
    """The wheel's _accel/ holds one build per torch release its matrix variant is tested
    with (none in a cross-built wheel), and under the torch running here, where it is one of
    them, that build serves."""
    info = wheelops.build_info()
    if info.dev_mode or info.built_as is None:
        pytest.skip("not a wheel of the matrix: dev mode builds the accelerator for its torch")
    from build_tools.plan import matrix

    package = Path(wheelops.__file__).parent
    native = info.platform.endswith(platform.machine())
    versions = matrix.matrix().variant(info.built_as).torch if native else ()
    carried = {p.parent.name for p in (package / "_accel").glob("torch*/wheelops_accel.abi3.so")}
    # The build's names are the loader's (build_tools/compile/accelerator.py, _accel.folder).
    assert carried == {_accel.folder(v) for v in versions}
    run = run_python(package, "-c", STATE)
    assert run.returncode == 0, run.stderr
    if TORCH in versions:
        built = package / "_accel" / _accel.folder(TORCH) / "wheelops_accel.abi3.so"
        assert run.stdout.strip() == f"loaded for torch {TORCH} from {built}", run.stdout
    else:
        assert run.stdout.strip().startswith(f"absent for torch {TORCH}"), run.stdout


def test_the_doctor_reports_the_accelerators_state(package, accelerator, tmp_path):
    """`python -m wheelops` names the accelerator's state: serving (ok), turned off or
    refused (degraded, with the fix), absent for this torch (ok); the install serves in
    every case (exit 0)."""
    damaged = tmp_path / "wheelops_accel.abi3.so"
    damaged.write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    cases = [
        ({"WHEELOPS_ACCEL_LIBRARY": str(accelerator)}, "ok", "loaded for torch", ()),
        ({"WHEELOPS_ACCEL": "0"}, "degraded", "off (WHEELOPS_ACCEL=0)", ("unset WHEELOPS_ACCEL",)),
        ({"WHEELOPS_ACCEL_LIBRARY": str(damaged)}, "degraded", "refused (ImportError", None),
        ({"WHEELOPS_ACCEL_LIBRARY": str(tmp_path / "none.so")}, "ok", "absent for torch", ()),
    ]
    for env, status, runtime, fix in cases:
        run = run_python(package, "-m", "wheelops", "--json", env=env)
        assert run.returncode == 0, (env, run.stdout, run.stderr)
        found = [f for f in json.loads(run.stdout)["findings"] if f["check"] == "accelerator"]
        assert len(found) == 1, (env, found)
        assert (found[0]["status"], found[0]["runtime"][: len(runtime)]) == (status, runtime)
        if fix is None:  # a damaged library: the reinstall the install's own damage gets
            assert found[0]["fix"] and "pip install" in found[0]["fix"][0], found[0]
        else:
            assert tuple(found[0]["fix"]) == fix, found[0]
