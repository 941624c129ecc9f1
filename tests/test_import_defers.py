"""What `import wheelops` leaves for later (#38). The ops' Python kernels are registered at
the first lookup of an op (src/wheelops/ops/_first_lookup.py): none before it, all of them by
the time the op that was looked up can run, whatever the first use is and however many
threads race to it, on either autograd layer. The doctor's modules and the matrix model
are not loaded at all. The hook itself, under each torch CI installs: test_first_lookup.py."""

from __future__ import annotations

import json

import pytest
from _native_fixtures import installed_copy, run_python

from wheelops._compat import torch_internals

# The first lookup (wheelops.add, in the main thread) registers; the registration pauses
# where an op is half registered: relu_scale_with_mask, looked up (relu_scale runs it when a
# gradient is wanted) and given its fake kernel, not yet its autograd. Meanwhile three
# threads make their first use of the ops: a raw call of it that needs autograd, opcheck
# of it (the fake kernel, the autograd registration) and a public function under a
# gradient. Each must wait for the whole registration (the pause ends when they are done,
# or after 2 s), and then find every kernel.
FIRST_USES = """
import json, sys, threading
import torch
import wheelops
modules = sorted(m for m in sys.modules if m.startswith("wheelops"))
from wheelops._compat import loader
fixes = [fix for f in loader.loaded().report.findings for fix in f.fix]
from torch._library.simple_registry import singleton
from wheelops.ops import _autograd

def registered(op):
    autograd = torch._C._dispatch_has_kernel_for_dispatch_key(f"wheelops::{op}", "Autograd")
    return autograd and singleton.find(f"wheelops::{op}").fake_impl.kernel is not None

ops = ["add", "relu_scale", "relu_scale_with_mask", "softmax", "layer_norm_backward"]
at_import = {op: registered(op) for op in ops}
x = torch.randn(4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
paused, results, lock = threading.Event(), {}, threading.Lock()
all_done = threading.Event()
register = _autograd.register

def pausing(op, **formulas):
    if op == "relu_scale_with_mask" and not paused.is_set():
        paused.set()
        all_done.wait(timeout=2.0)
    register(op, **formulas)

_autograd.register = pausing

def raw_relu_scale_with_mask():
    a = x.clone().requires_grad_()
    torch.ops.wheelops.relu_scale_with_mask(a, 0.5)[0].sum().backward()
    want = a.detach().clone().requires_grad_()
    (torch.relu(want) * 0.5).sum().backward()
    return torch.equal(a.grad, want.grad)

def opcheck():
    torch.library.opcheck(torch.ops.wheelops.relu_scale_with_mask.default, (x, 0.5))
    return True

def public_softmax():
    a = x.clone().requires_grad_()
    wheelops.softmax(a, -1)[:, 0].sum().backward()
    want = a.detach().clone().requires_grad_()
    torch.softmax(want, -1)[:, 0].sum().backward()
    return bool((a.grad - want.grad).abs().max() < 1e-12)

uses = (raw_relu_scale_with_mask, opcheck, public_softmax)

def run(use):
    paused.wait()
    try:
        outcome = use()
    except Exception as err:
        outcome = f"{type(err).__name__}: {err}"
    with lock:
        results[use.__name__] = outcome
        if len(results) == len(uses):
            all_done.set()

threads = [threading.Thread(target=run, args=(use,)) for use in uses]
for t in threads:
    t.start()
results["add"] = torch.equal(wheelops.add(x, x), 2 * x)  # the first lookup
for t in threads:
    t.join()
after = {op: registered(op) for op in ops}
print(json.dumps({"at_import": at_import, "results": results, "after": after, "modules": modules,
                  "fixes": fixes}))
"""


@pytest.mark.parametrize("layer", ["", torch_internals.PUBLIC])
def test_first_uses_during_the_registration_find_every_kernel(tmp_path, layer):
    package = installed_copy(tmp_path)
    result = run_python(package, "-c", FIRST_USES, env={torch_internals.AUTOGRAD_ENV: layer})
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert not any(out["at_import"].values()), out  # import registered nothing
    assert out["results"] == dict.fromkeys(out["results"], True), out
    assert len(out["results"]) == 4
    assert all(out["after"].values()), out  # one lookup registered every op
    # The doctor's modules never; the matrix model only where a finding prints a command
    # (an older torch's, say: its fix names the torch to install).
    later = {f"wheelops._compat.{m}" for m in ("doctor", "dlerror", "probes", "links")}
    if not out["fixes"]:
        later.add("wheelops._compat.matrix")
    assert not later & {*out["modules"]}, (sorted(later & {*out["modules"]}), out["fixes"])
    assert "wheelops._compat.loader" in out["modules"]


# Every route to the registration, in either order, then again: one registration, no
# warning (torch 2.13 and later: "Overriding a previously registered kernel") and no error
# (2.10/2.11: register_fake "already has an fake impl registered").
REGISTER_AGAIN = """
import sys, torch, wheelops
from wheelops.ops import register_python_kernels
x = torch.ones(3)
if sys.argv[1] == "direct first":
    register_python_kernels()  # the doctor's first-use probe: its first lookup is within
assert torch.equal(wheelops.add(x, x), 2 * x)
register_python_kernels()
register_python_kernels()
assert torch.equal(torch.ops.wheelops.relu_scale(x, 2.0), 2 * x)
print("ok")
"""


@pytest.mark.parametrize("route", ["direct first", "lookup first"])
def test_a_second_registration_is_a_no_op(tmp_path, route):
    package = installed_copy(tmp_path)
    result = run_python(package, "-W", "error", "-c", REGISTER_AGAIN, route)
    assert result.returncode == 0 and "Warning" not in result.stderr, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"
