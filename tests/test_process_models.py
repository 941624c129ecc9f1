"""Process models (issue #19): how wheelops behaves under threads, fork, spawn,
torch.multiprocessing and subprocesses, each in a fresh interpreter.

Each scenario is a script run in its own process with a timeout: it must exit 0 (works)
or, where torch documents a limitation, fail with torch's own error, never a signal or a
hang. docs/troubleshooting.md states each outcome.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _helpers import needs_caching_allocator

SETUP = """
import os, sys, threading
import torch
"""


def run_script(tmp_path: Path, body: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `body` as a script file (spawn re-imports it: workers live at its top level)."""
    script = tmp_path / "scenario.py"
    script.write_text(textwrap.dedent(SETUP) + textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if k != "WHEELOPS_SKIP_GUARD"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode >= 0, f"killed by signal {-done.returncode}: {done.stderr[-3000:]}"
    return done


def ok(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0 and "SCENARIO OK" in done.stdout, (
        done.stdout[-2000:] + done.stderr[-3000:]
    )


def test_import_from_eight_threads_at_once(tmp_path):
    """Python's import lock makes one thread run wheelops/__init__; the others wait for it
    and get the finished module. The libraries are mapped once."""
    ok(
        run_script(
            tmp_path,
            """
        barrier = threading.Barrier(8)
        results, errors = [], []

        def worker(i):
            barrier.wait()
            try:
                import wheelops
                x = torch.full((64,), float(i))
                results.append(torch.equal(wheelops.add(x, x), 2 * x))
            except BaseException as err:
                errors.append(repr(err))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and results == [True] * 8, (errors, results)
        maps = open("/proc/self/maps").read().splitlines()
        mapped = {line.split()[-1] for line in maps if "_ops_cpu" in line}
        assert len(mapped) == 1, mapped
        print("SCENARIO OK")
    """,
        )
    )


DATALOADER = """
import wheelops

class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        x = torch.arange(8, dtype=torch.float32) + i
        return wheelops.relu_scale(wheelops.add(x, x), 0.5)  # = x


def check(context):
    loader = torch.utils.data.DataLoader(Squares(), batch_size=4, num_workers=2,
                                         multiprocessing_context=context)
    got = torch.cat(list(loader))
    want = torch.arange(16, dtype=torch.float32)[:, None] + torch.arange(8.0)
    assert torch.equal(got, want), got
"""


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_dataloader_workers_call_ops_on_cpu(tmp_path, context):
    """Workers forked after import inherit the loaded libraries; spawned and forkserver
    workers import wheelops afresh."""
    ok(
        run_script(
            tmp_path,
            DATALOADER
            + f"""
if __name__ == "__main__":
    check({context!r})
    print("SCENARIO OK")
""",
        )
    )


@pytest.mark.gpu
def test_fork_after_cuda_use_cpu_ops_work_and_cuda_ops_raise_torchs_error(tmp_path):
    """After the parent used CUDA, forked workers run CPU ops; a CUDA op in a forked child
    fails with torch's documented error (CUDA cannot be re-initialised after fork)."""
    ok(
        run_script(
            tmp_path,
            DATALOADER
            + """
import multiprocessing as mp

def cuda_in_child(queue):
    try:
        x = torch.ones(4, device="cuda")
        wheelops.add(x, x)
        queue.put("ran")
    except RuntimeError as err:
        queue.put(str(err))

if __name__ == "__main__":
    x = torch.ones(4, device="cuda")
    assert torch.equal(wheelops.add(x, x), 2 * x)
    check("fork")
    context = mp.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=cuda_in_child, args=(queue,))
    child.start()
    said = queue.get(timeout=120)
    child.join(timeout=60)
    assert "Cannot re-initialize CUDA in forked subprocess" in said, said
    print("SCENARIO OK")
""",
        )
    )


@pytest.mark.gpu
@needs_caching_allocator  # CUDA IPC shares the caching allocator's blocks
def test_cuda_tensors_shared_with_spawned_processes(tmp_path):
    """torch.multiprocessing shares CUDA tensors by IPC handle: a spawned child runs an op
    on the parent's tensor and writes into the parent's output."""
    ok(
        run_script(
            tmp_path,
            """
import torch.multiprocessing as mp
import wheelops

def child(x, out):
    out.copy_(wheelops.softmax(x))
    torch.cuda.synchronize()

if __name__ == "__main__":
    mp.set_start_method("spawn")
    x = torch.randn(64, 256, device="cuda")
    out = torch.zeros_like(x)
    process = mp.Process(target=child, args=(x, out))
    process.start()
    process.join(timeout=240)
    assert process.exitcode == 0, process.exitcode
    torch.testing.assert_close(out, torch.softmax(x, -1))
    print("SCENARIO OK")
""",
        )
    )


@pytest.mark.gpu
def test_subprocess_imports_while_the_parent_holds_a_cuda_context(tmp_path):
    ok(
        run_script(
            tmp_path,
            """
import subprocess
import wheelops

x = torch.ones(1024, device="cuda")
assert torch.equal(wheelops.add(x, x), 2 * x)
child = subprocess.run([sys.executable, "-c",
    "import torch, wheelops; x = torch.ones(8, device='cuda'); "
    "assert torch.equal(wheelops.add(x, x), 2 * x); print('child ok')"],
    capture_output=True, text=True, timeout=240)
assert child.returncode == 0 and "child ok" in child.stdout, child.stderr
assert torch.equal(wheelops.add(x, x), 2 * x)
print("SCENARIO OK")
""",
        )
    )


def test_subprocess_imports_while_the_parent_has_loaded_wheelops(tmp_path):
    """The CPU twin of the above: a child process loads its own copy."""
    ok(
        run_script(
            tmp_path,
            """
import subprocess
import wheelops

child = subprocess.run([sys.executable, "-c",
    "import torch, wheelops; x = torch.ones(8); assert torch.equal(wheelops.add(x, x), 2 * x)"],
    capture_output=True, text=True, timeout=240)
assert child.returncode == 0, child.stderr
print("SCENARIO OK")
""",
        )
    )
