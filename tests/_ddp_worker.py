"""A small model of differentiable wheelops ops, its training, and a
DistributedDataParallel run of it in spawned processes (one per GPU, NCCL; or
two CPU processes with gloo).

Spawned children unpickle ``ddp_worker`` by module name, so this is a module of
its own. They find it, and the same wheelops as the parent, because
``multiprocessing``'s spawn gives each child the parent's import path: pytest puts
this directory on it (the tests import their helpers as top-level modules), and
nothing on it holds another wheelops (the checkout's is in src/, on it only in dev
mode, for parent and children alike).
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

import wheelops

FEATURES, HIDDEN, STATE, CLASSES = 24, 32, 16, 8
BATCH, STEPS, LR = 16, 4, 0.5
DTYPE = torch.float64  # DDP against one process to ~1e-12, not float32's ~1e-6


class WheelopsNet(torch.nn.Module):
    """Differentiable ops as a model uses them: a GELU layer, norms, a SwiGLU residual
    block, an LLTM cell, a softmax head (modules of wheelops.nn where they exist).

    The same ``seed`` gives the same parameters (on the host, float64)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):  # leave the caller's RNG alone
            torch.manual_seed(seed)
            linear = {"dtype": DTYPE}
            self.inp = torch.nn.Linear(FEATURES, HIDDEN, bias=False, **linear)
            self.gelu = wheelops.nn.BiasGELU(HIDDEN, fan_in=FEATURES, dtype=DTYPE)
            self.norm1 = wheelops.nn.LayerNorm(HIDDEN, dtype=DTYPE)
            self.up = torch.nn.Linear(HIDDEN, 2 * HIDDEN, bias=False, **linear)
            self.swiglu = wheelops.nn.SiluAndMul()
            self.norm2 = wheelops.nn.RMSNorm(HIDDEN, dtype=DTYPE)
            self.state = torch.nn.Linear(FEATURES, 2 * STATE, **linear)
            self.cell = wheelops.nn.LLTM(HIDDEN, STATE, dtype=DTYPE)
            self.head = torch.nn.Linear(STATE, CLASSES, **linear)
            self.softmax = wheelops.nn.Softmax(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(self.gelu(self.inp(x)))
        h = wheelops.add(h, self.swiglu(self.up(h)))  # a SwiGLU residual block
        h = self.norm2(wheelops.relu_scale(h, 0.5))
        old_h, old_cell = self.state(x).chunk(2, dim=-1)  # old_cell: a strided view
        new_h, new_cell = self.cell(h, (torch.tanh(old_h), old_cell))
        return self.softmax(self.head(wheelops.add(new_h, new_cell)))


def loss_fn(probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # A mean over rows: with equal shards, DDP's average of the ranks' gradients
    # is the gradient of this loss over the whole batch.
    return (probs - target).square().sum(-1).mean()


def make_batches(seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """STEPS full batches (inputs, one-hot targets) on the host."""
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(STEPS):
        x = torch.randn(BATCH, FEATURES, generator=generator, dtype=DTYPE)
        labels = torch.randint(0, CLASSES, (BATCH,), generator=generator)
        batches.append((x, F.one_hot(labels, CLASSES).to(DTYPE)))
    return batches


def train(
    model: torch.nn.Module,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    rank: int = 0,
    world_size: int = 1,
) -> None:
    """Plain SGD, one step per batch, on rows [rank * n, (rank + 1) * n) of each."""
    assert BATCH % world_size == 0
    rows = BATCH // world_size
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for x, target in batches:
        shard = slice(rank * rows, (rank + 1) * rows)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[shard].to(device)), target[shard].to(device))
        loss.backward()
        optimizer.step()


def train_as_ranks(devices: list[torch.device]) -> torch.nn.Module:
    """What DDP computes from ``train(..., rank, len(devices))`` on every rank, in one
    process: each rank's model on its own device (the same kernels as its rank's), each
    shard's gradients times 1 / world_size (DDP's reducer, exact for two ranks), summed
    (the all-reduce: for two ranks one float64 addition, the same in either order and on
    any device), then the same SGD step on each. Returns rank 0's model."""
    assert len(devices) == 2, "more ranks: the all-reduce's order of additions is NCCL's"
    rows = BATCH // len(devices)
    models = [WheelopsNet().to(device) for device in devices]
    optimizers = [torch.optim.SGD(m.parameters(), lr=LR) for m in models]
    for x, target in make_batches():
        shards = []
        for rank, (model, device) in enumerate(zip(models, devices, strict=True)):
            shard = slice(rank * rows, (rank + 1) * rows)
            loss = loss_fn(model(x[shard].to(device)), target[shard].to(device))
            grads = torch.autograd.grad(loss, list(model.parameters()))
            shards.append([(g * (1 / len(devices))).cpu() for g in grads])
        for model, optimizer, device in zip(models, optimizers, devices, strict=True):
            for p, first, second in zip(model.parameters(), *shards, strict=True):
                p.grad = (first + second).to(device)
            optimizer.step()
    return models[0]


def _load_native() -> None:
    # Against a source tree (dev mode) the ops are JIT-built on first use, as
    # conftest.py does for the parent; an installed wheel loaded them at import.
    from wheelops._compat import loader

    if loader.loaded() is None:
        from build_tools import dev

        dev.load()


def ddp_worker(rank: int, world_size: int, port: int, backend: str, out_dir: str) -> None:
    """Train WheelopsNet under DDP on this rank's shards; save the parameters."""
    # NVLink SHARP (NVLS) multicast is unavailable on the test machines: NCCL
    # must not try it, nor torch's symmetric memory.
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    _load_native()
    cuda = backend == "nccl"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    options: dict[str, object] = {}
    if cuda:
        torch.cuda.set_device(device)
        options["device_id"] = device  # binds the communicator to this rank's GPU
    dist.init_process_group(
        backend, rank=rank, world_size=world_size, timeout=timedelta(seconds=60), **options
    )
    try:
        model = WheelopsNet().to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank] if cuda else None)
        train(ddp, make_batches(), device, rank, world_size)
        state = {name: p.detach().cpu() for name, p in model.named_parameters()}
        torch.save(state, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(
    backend: str, out_dir: Path, world_size: int = 2, timeout_s: float = 100.0
) -> list[dict[str, torch.Tensor]]:
    """Spawn `world_size` ddp_worker processes and return each rank's parameters.

    A worker's exception is raised here with its traceback; workers still
    running after `timeout_s` (a hang in a collective) are terminated."""
    import torch.multiprocessing as mp

    context = mp.start_processes(
        ddp_worker,
        args=(world_size, _free_port(), backend, str(out_dir)),
        nprocs=world_size,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + timeout_s
    try:
        while not context.join(timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
            if time.monotonic() > deadline:
                raise TimeoutError(f"DDP workers still running after {timeout_s:.0f} s")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.terminate()
                process.join(10)
                if process.is_alive():
                    process.kill()
                    process.join(10)
    return [
        torch.load(Path(out_dir) / f"rank{rank}.pt", weights_only=True)
        for rank in range(world_size)
    ]
