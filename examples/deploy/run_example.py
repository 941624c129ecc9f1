"""The deploy example end to end, from the installed wheelops and torch.

    python examples/deploy/run_example.py WORK_DIR [--device cpu|cuda]

1. export_model.py: export and package a model that calls every wheelops op;
2. CMake: configure this folder with torch's and wheelops' prefixes (find_package(Torch),
   find_package(wheelops)), and build run_package;
3. run_package: load wheelops, run the package from C++, compare with Python's outputs;
4. run_package --without-wheelops: what LibTorch says when the ops are not loaded.

Exits non-zero where any step fails. Run as a script, from any folder.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

import wheelops

HERE = Path(__file__).resolve().parent


def run(*command: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    printable = " ".join(str(c) for c in command)
    print(f"$ {printable}", flush=True)
    started = time.monotonic()
    done = subprocess.run([str(c) for c in command], text=True, capture_output=True)
    print(done.stdout + done.stderr, end="", flush=True)
    print(f"  ({time.monotonic() - started:.1f} s, exit {done.returncode})", flush=True)
    if check and done.returncode != 0:
        sys.exit(f"failed: {printable}")
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    package, build = args.work / "package", args.work / "build"
    shutil.rmtree(build, ignore_errors=True)

    run(sys.executable, HERE / "export_model.py", package, "--device", args.device)
    prefixes = f"{torch.utils.cmake_prefix_path};{wheelops.cmake_prefix_path}"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    cmake = shutil.which("cmake") or "cmake"
    settings = [f"-DCMAKE_PREFIX_PATH={prefixes}", f"-DWHEELOPS_PYTHON={sys.executable}"]
    run(cmake, "-S", HERE, "-B", build, *generator, "-DCMAKE_BUILD_TYPE=Release", *settings)
    run(cmake, "--build", build)
    files = [package / "model.pt2", package / "inputs.pt", package / "expected.pt"]
    program = build / "run_package"
    run(program, *files, "--device", args.device)
    without = run(program, *files, "--device", args.device, "--without-wheelops", check=False)
    if without.returncode == 0:
        sys.exit("run_package --without-wheelops ran the model: the ops came from elsewhere")
    if "Could not find schema for wheelops::" not in without.stderr:
        sys.exit(
            "run_package --without-wheelops failed without naming the wheelops op it "
            "missed (README troubleshooting quotes LibTorch's words)"
        )
    print(
        "deploy example: C++ ran the package with Python's outputs; without wheelops "
        "loaded it fails as shown above"
    )


if __name__ == "__main__":
    main()
