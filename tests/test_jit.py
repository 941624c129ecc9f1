"""Dev mode: build csrc/ and the accelerator in place, rebuild only what changed, pick up an
edited kernel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _checkout import checkout_copy

RUN_ADD = (
    "import torch, build_tools.dev as dev\n"
    "info = dev.load(cuda={cuda})\n"
    "import wheelops\n"
    "from wheelops._compat import loader\n"
    "device = 'cuda' if {cuda} else 'cpu'\n"
    "out = wheelops.add(torch.ones(3, device=device), torch.ones(3, device=device))\n"
    "from wheelops.ops import _accel\n"
    "print(_accel.state())\n"
    "print(out.tolist(), info.dev_mode, loader.loaded().cpu)\n"
)


def _run(checkout: Path, cache: Path, cuda: bool) -> tuple[str, float, float]:
    """The ops' answer line, and when the CPU library and the accelerator were built."""
    env = {**os.environ, "WHEELOPS_JIT_CACHE": str(cache), "PYTHONPATH": str(checkout / "src")}
    out = subprocess.run(
        [sys.executable, "-c", RUN_ADD.format(cuda=cuda)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    accelerator, answer = out.stdout.splitlines()[-2:]
    assert accelerator.startswith("loaded for torch"), accelerator  # "... from PATH"
    library, accelerator_path = Path(answer.split()[-1]), Path(accelerator.split()[-1])
    return answer, library.stat().st_mtime, accelerator_path.stat().st_mtime


def _edit_add_kernel(checkout: Path) -> None:
    # A kernel author's edit: a + b becomes a + b + 1 in the CPU and CUDA kernels.
    for name, old, new in [
        (
            "add.cpp",
            "return x + y;",
            "return x + y + 1;",
        ),
        ("add.cu", "return x + y;", "return x + y + A(1);"),
    ]:
        path = checkout / "csrc" / "ops" / name
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))


def _dev_cycle(tmp_path: Path, cuda: bool) -> None:
    checkout, cache = checkout_copy(tmp_path), tmp_path / "cache"
    first, built_at, accelerator_at = _run(checkout, cache, cuda)
    assert first.startswith("[2.0, 2.0, 2.0] True")
    again, built_again_at, accelerator_again_at = _run(checkout, cache, cuda)
    assert again == first and built_again_at == built_at, "rebuilt with nothing changed"
    assert accelerator_again_at == accelerator_at, "accelerator rebuilt with nothing changed"
    _edit_add_kernel(checkout)
    edited, _, accelerator_edited_at = _run(checkout, cache, cuda)
    assert edited.startswith("[3.0, 3.0, 3.0] True"), edited
    assert accelerator_edited_at == accelerator_at, "a kernel edit rebuilt the accelerator"


@pytest.mark.slow
def test_dev_mode_cpu(tmp_path):
    _dev_cycle(tmp_path, cuda=False)


@pytest.mark.slow
@pytest.mark.gpu
def test_dev_mode_cuda(tmp_path):
    _dev_cycle(tmp_path, cuda=True)
