"""Two GPUs: every op on cuda:1 while cuda:0 is current (also on a side stream of
cuda:1), arguments split over two GPUs, and DistributedDataParallel training of
a model of every differentiable op (NCCL, one process per GPU).

Bugs these catch: a launch or allocation on the current device instead of the
tensors' (a missing device guard), a stream looked up for the wrong device, a
guard that leaks the device switch to the caller, and gradients that DDP's
all-reduce would average wrongly.
"""

from __future__ import annotations

from pathlib import Path

import opspecs
import pytest
import torch
from _ddp_worker import WheelopsNet, run_ddp, train_as_ranks
from _op_catalog import forward_backward, outputs
from _stream_helpers import (
    COLS,
    ROWS,
    assert_matches_eager,
    assert_same_kernels,
    check_beside_busy_default_streams,
    eager_reference,
    grads_like,
)
from opspecs._spec import OpSpec

CUDA0, CUDA1 = torch.device("cuda", 0), torch.device("cuda", 1)


def _same_gpu_model() -> bool:
    """Launch shapes follow the SM count: bitwise equality across the two GPUs
    only holds for the same model."""
    a, b = (torch.cuda.get_device_properties(i) for i in (0, 1))
    return (a.name, a.multi_processor_count) == (b.name, b.multi_processor_count)


@pytest.mark.gpu
@pytest.mark.multi_gpu
@pytest.mark.parametrize("spec", opspecs.ALL, ids=opspecs.NAMES)
def test_op_on_second_gpu_while_first_is_current(spec: OpSpec) -> None:
    with torch.cuda.device(CUDA0):
        args1 = spec.inputs((ROWS, COLS), device=CUDA1, seed=5, requires_grad=True)
        out_grads1 = grads_like(spec, args1, outputs(spec.call(*args1)), seed=6)
        outs1, grads1 = forward_backward(spec, args1, out_grads1)
        assert torch.cuda.current_device() == 0, "the op left cuda:1 current"
        torch.cuda.synchronize(CUDA1)  # an illegal access on cuda:1 surfaces here

        assert all(t.device == CUDA1 for t in (*outs1, *grads1))
        (ref_outs, out_rule), (ref_grads, grad_rule) = eager_reference(spec, args1, out_grads1)
        assert_matches_eager(outs1, ref_outs, out_rule, "outputs on cuda:1")
        assert_matches_eager(grads1, ref_grads, grad_rule, "input grads on cuda:1")

        args0 = spec.inputs((ROWS, COLS), device=CUDA0, seed=5, requires_grad=True)
        out_grads0 = [g.to(CUDA0) for g in out_grads1]
        outs0, grads0 = forward_backward(spec, args0, out_grads0)
        if _same_gpu_model():  # else other launch shapes: each within the rule alone
            assert_same_kernels(outs1, outs0, "outputs, cuda:1 vs cuda:0")
            assert_same_kernels(grads1, grads0, "input grads, cuda:1 vs cuda:0")
        else:
            assert_matches_eager(outs0, ref_outs, out_rule, "outputs on cuda:0")
            assert_matches_eager(grads0, ref_grads, grad_rule, "input grads on cuda:0")
        assert torch.cuda.current_device() == 0


@pytest.mark.gpu
@pytest.mark.multi_gpu
@pytest.mark.parametrize("spec", opspecs.ALL, ids=opspecs.NAMES)
def test_op_on_side_stream_of_second_gpu_while_first_is_current(spec: OpSpec) -> None:
    """cuda:0 current, cuda:1's current stream a side stream, both default streams
    busy: the op runs on cuda:1's side stream and touches neither default stream."""
    with torch.cuda.device(CUDA0):
        check_beside_busy_default_streams(spec, CUDA1, busy=[CUDA0, CUDA1])
        assert torch.cuda.current_device() == 0
        assert torch.cuda.current_stream(CUDA1) == torch.cuda.default_stream(CUDA1)


def _mismatch_params() -> list:
    """(spec, position of the tensor moved to cuda:1) for every op with two or
    more tensor arguments and every such argument."""
    params = []
    for spec in opspecs.ALL:
        names = spec.argument_names
        args = spec.inputs((2, 8))
        positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        if len(positions) < 2:
            continue
        for i in positions:
            params.append(pytest.param(spec, i, names[i], id=f"{spec.name}-{names[i]}"))
    return params


@pytest.mark.gpu
@pytest.mark.multi_gpu
@pytest.mark.parametrize(("spec", "position", "name"), _mismatch_params())
def test_arguments_on_two_gpus_raise_naming_the_argument(
    spec: OpSpec, position: int, name: str
) -> None:
    args = list(spec.inputs((4, 16), device=CUDA0))
    args[position] = args[position].to(CUDA1)
    with pytest.raises(ValueError, match="must be on the same device") as info:
        spec.call(*args)
    message = str(info.value)
    assert message.startswith(f"wheelops.{spec.name}:"), message
    assert f"'{name}'" in message, message
    assert "cuda:0" in message and "cuda:1" in message, message


def _check_ddp_against_one_process(
    ranks: list[dict[str, torch.Tensor]], devices: list[str]
) -> None:
    """The ranks agree bit for bit, and bit for bit with one process that computes what
    DDP should from each rank's shard on that rank's device (train_as_ranks): the same
    kernels on the same values, each rank's gradients averaged, nothing else. (Against
    one process trained on the whole batches, the GEMMs' and the row sums' orders change
    with the batch, and four SGD steps carry those roundings through the whole model.)"""
    assert len(ranks) == 2
    for name, value in ranks[0].items():
        assert torch.equal(value, ranks[1][name]), f"{name}: the DDP replicas diverged"
    model = train_as_ranks([torch.device(d) for d in devices])
    initial = dict(WheelopsNet().named_parameters())
    for name, p in model.named_parameters():
        got = ranks[0][name]
        assert torch.equal(got, p.detach().cpu()), f"{name}: not the average of the ranks' steps"
        # Every parameter trained: a gradient lost on the way would leave one as it was.
        assert (got - initial[name].detach()).abs().max() > 1e-6, f"{name} did not change"


@pytest.mark.gpu
@pytest.mark.multi_gpu
def test_ddp_nccl_two_gpus_matches_one_gpu(tmp_path: Path) -> None:
    ranks = run_ddp("nccl", tmp_path)
    _check_ddp_against_one_process(ranks, ["cuda:0", "cuda:1"])


@pytest.mark.slow
def test_ddp_gloo_two_cpu_processes_matches_one_process(tmp_path: Path) -> None:
    """The same run on the host (gloo): the DDP harness checked without GPUs."""
    ranks = run_ddp("gloo", tmp_path)
    _check_ddp_against_one_process(ranks, ["cpu", "cpu"])
