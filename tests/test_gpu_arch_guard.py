"""On a real GPU: builds for other architectures are refused by the guard (not by CUDA's
"no kernel image is available"), PTX builds run, and the cpu variant explains itself.

The builds are made in dev mode (build_tools.dev) with TORCH_CUDA_ARCH_LIST set, with
the machine's own torch and matched toolkit, in a subprocess each. The C++ message
for a direct torch.ops call on such a GPU is not probed here: on the GPU machine used
so far (Ubuntu GCC 13.3, torch 2.11), any C++ exception from a dev-mode build kills
the process (SIGSEGV), while wheels built by `nox -s build` raise it cleanly there;
see DEVELOPING.md's dev mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _native_fixtures import installed_copy, read_facts, run_python, write_facts

from wheelops._compat.matrix import matrix

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent

PROBE = """
import json, torch, build_tools.dev
info = build_tools.dev.load()
assert info.cuda_libraries[0].arch_list == {spec!r}, info.cuda_libraries
import wheelops
x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
def report(label, call):
    try:
        out = call()
        print(label, json.dumps("ran, correct=%s" % bool(torch.equal(out, x + y))))
    except Exception as err:
        print(label, json.dumps(type(err).__name__ + ": " + str(err)))
report("GUARD", lambda: wheelops.add(x, y))
report("COMPILED", lambda: torch.compile(wheelops.add, fullgraph=True)(x, y))
torch.cuda.synchronize()
print("AFTER", json.dumps(str((torch.ones(4, device="cuda") * 2).sum().item())))
"""


def build_and_probe(spec: str, cache: Path) -> dict[str, str]:
    if not (REPO / "csrc" / "ops").is_dir():
        pytest.skip("needs the source checkout to build from")
    env = {
        **os.environ,
        "TORCH_CUDA_ARCH_LIST": spec,
        "WHEELOPS_JIT_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),  # dev mode's package
    }
    env.pop("WHEELOPS_SKIP_GUARD", None)
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", PROBE.format(spec=spec)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (result.stdout, result.stderr[-5000:])
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    outcome = {key: json.loads(value) for key, value in lines.items()}
    print(f"--- TORCH_CUDA_ARCH_LIST={spec} on {torch.cuda.get_device_name(0)}")
    for key, value in outcome.items():
        print(f"{key}: {value}")
    return outcome


@pytest.fixture(scope="module")
def hopper_or_newer() -> str:
    major, minor = torch.cuda.get_device_capability(0)
    if major < 9:
        pytest.skip("an 8.0 build runs on this GPU: the refusal needs capability >= 9.0")
    return f"{major}.{minor}"


def test_sass_for_an_older_major_is_refused_by_the_guard(hopper_or_newer, tmp_path):
    outcome = build_and_probe("8.0", tmp_path)
    name = torch.cuda.get_device_name(0)
    guard = outcome["GUARD"]
    assert guard.startswith("UnsupportedGPUError: wheelops.add: no kernel for cuda:0"), guard
    assert f"cuda:0 ({name}, compute capability {hopper_or_newer}) cannot run" in guard
    assert "it holds SASS 8.0 and no PTX" in guard
    assert f"--index-url {matrix().index_url}/cu130" in guard  # covers 9.0
    assert f'TORCH_CUDA_ARCH_LIST="{hopper_or_newer}"' in guard  # or build for this GPU
    assert "no kernel image is available" not in guard
    # torch.compile runs the same check in the fake kernel, at trace time.
    assert "no kernel for cuda:0" in outcome["COMPILED"]
    assert outcome["AFTER"] == "8.0"  # no CUDA error left behind


def test_ptx_for_an_older_arch_runs_through_the_driver_jit(hopper_or_newer, tmp_path):
    outcome = build_and_probe("8.0+PTX", tmp_path)
    assert outcome["GUARD"] == "ran, correct=True"
    assert outcome["COMPILED"] == "ran, correct=True"


def test_cpu_variant_explains_itself_at_the_first_cuda_tensor(tmp_path):
    package = installed_copy(tmp_path)
    for library in package.glob("_ops_cuda*.so"):
        library.unlink()
    write_facts(package, {**read_facts(package), "cuda_libraries": [], "built_as": "cpu"})
    code = (
        "import torch, wheelops\n"
        "print(wheelops.add(torch.ones(2), torch.ones(2)).tolist())\n"
        "wheelops.add(torch.ones(2, device='cuda'), torch.ones(2, device='cuda'))\n"
    )
    result = run_python(package, "-c", code)
    assert result.returncode == 1 and result.stdout.strip() == "[2.0, 2.0]"
    cuda = torch.version.cuda.replace(".", "")
    assert "wheelops.add: got a tensor on cuda:0, but wheelops has no CUDA kernels" in result.stderr
    assert "this is the cpu variant of wheelops" in result.stderr
    assert f"--index-url {matrix().index_url}/cu{cuda}" in result.stderr
