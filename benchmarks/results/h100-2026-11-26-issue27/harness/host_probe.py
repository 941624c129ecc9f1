"""Per-call host cost of the layers of a wheelops call, CUDA tensors [1, 64], best of 7."""

import cProfile
import pstats
import timeit

import torch
import torch.nn.functional as F
from torch import _C

import wheelops

a = torch.randn(1, 64, device="cuda")
b = torch.randn(1, 64, device="cuda")
w = torch.randn(64, device="cuda")
ov = torch.ops.wheelops.add.default
ln = torch.ops.wheelops.layer_norm.default
N = 20000


def t(name, fn):
    fn()
    torch.cuda.synchronize()
    best = min(timeit.repeat(fn, number=N, repeat=7)) / N * 1e6
    torch.cuda.synchronize()
    print(f"{name:55s} {best:7.2f} us", flush=True)


def below(op, *args):
    with _C._AutoDispatchBelowAutograd():
        return op._op(*args)


cuda_ks = _C.DispatchKeySet(_C.DispatchKey.CUDA)
with torch.no_grad():
    t("torch.add", lambda: torch.add(a, b))
    t("torch.ops.aten.add.Tensor", lambda: torch.ops.aten.add.Tensor(a, b))
    t("wheelops.add", lambda: wheelops.add(a, b))
    t("add _op below autograd", lambda: below(ov, a, b))
    t("add _op (through the Python autograd kernel)", lambda: ov._op(a, b))
    t("add redispatch_boxed(CUDA)", lambda: ov._handle.redispatch_boxed(cuda_ks, a, b))
    t("guard alone", lambda: _C._AutoDispatchBelowAutograd().__enter__())
    t("torch.empty_like", lambda: torch.empty_like(a))
    t("F.layer_norm", lambda: F.layer_norm(a, (64,), w, w, 1e-5))
    t("wheelops.layer_norm", lambda: wheelops.layer_norm(a, w, w, 1e-5))
    t("layer_norm _op below autograd", lambda: below(ln, a, w, w, 1e-5))
    if hasattr(torch.ops.wheelops, "layer_norm_inference"):
        li = torch.ops.wheelops.layer_norm_inference.default
        t("layer_norm_inference _op below autograd", lambda: below(li, a, w, w, 1e-5))
    t("F.rms_norm", lambda: F.rms_norm(a, (64,), w, 1e-6))
    t("wheelops.rms_norm", lambda: wheelops.rms_norm(a, w, 1e-6))
    t("torch.softmax", lambda: torch.softmax(a, -1))
    t("wheelops.softmax", lambda: wheelops.softmax(a, -1))
    t("softmax _op below autograd", lambda: below(torch.ops.wheelops.softmax.default, a, -1))
with torch.inference_mode():
    t("inference: torch.add", lambda: torch.add(a, b))
    t("inference: add _op", lambda: ov._op(a, b))
    t("inference: layer_norm _op", lambda: ln._op(a, w, w, 1e-5))
with torch.no_grad():
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(N):
        wheelops.add(a, b)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)
