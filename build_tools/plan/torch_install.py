"""Which torch to install for a test cell, from where, and a check that it is the one wanted.

A cell is (variant, torch): torch "2.14.1" means the 2.14.1 build for the
variant itself (from PyTorch's index <torch_index>/<variant>), "2.13.0+cpu" the
CPU-only build of 2.13.0 (a CUDA wheel must still serve such a torch, on CPU).
Where PyTorch's index cannot be reached (as on a machine that sees only PyPI),
the default registry's build is taken, and `verify` decides whether it serves
the cell: the PyPI torch is a CUDA build (13.0 for torch 2.11 to 2.14), so a
cu130 cell can run there while a cu126 cell cannot.

torch "newest" (matrix.json's quick_torch of the universal row) is the newest torch
release on PyPI when the run starts (PyPI's JSON API), so CI meets each new torch the
day it comes out. It is installed from PyPI with pip's configuration left unread
(build_tools/plan/installer.py): a machine's constraint file capping torch at the releases
it keeps on disk would otherwise install an older one.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from dataclasses import dataclass
from functools import cache
from urllib.parse import urlparse

INDEX_OVERRIDE = "WHEELOPS_TORCH_INDEX_URL"
ANY_CUDA = "any CUDA"
NEWEST = "newest"  # the newest torch release on PyPI, resolved when the run starts
PYPI_TORCH_JSON = "https://pypi.org/pypi/torch/json"


@dataclass(frozen=True)
class TorchInstall:
    requirement: str  # "torch==2.13.0+cpu"
    index_url: str | None  # None: the default registry (pip's own configuration)
    build: str  # "cpu" or the variant ("cu130") the torch must serve

    def pip_args(self) -> list[str]:
        return [self.requirement, *(["--index-url", self.index_url] if self.index_url else [])]


@cache
def reachable(url: str, timeout: float = 3.0) -> bool:
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


@cache
def newest_release(url: str = PYPI_TORCH_JSON) -> str:
    """The newest torch release on PyPI (its JSON API's latest version: no pre-release)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            version = json.load(response)["info"]["version"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(
            f"the newest torch release: cannot read {url} ({type(err).__name__}: {err})"
        ) from err
    if not isinstance(version, str) or not version[:1].isdigit():
        raise SystemExit(f"the newest torch release: {url} names no version ({version!r})")
    return version


def resolve(torch: str) -> str:
    """A cell's torch as pip installs it: "newest" becomes PyPI's newest release."""
    return newest_release() if torch == NEWEST else torch


def plan(variant: str, torch: str, torch_index_url: str, any_cuda: bool = False) -> TorchInstall:
    """`any_cuda`: the wheel serves every CUDA major (universal): the default registry's
    torch of that version, whatever its CUDA, is the cell's (PyPI's 2.10.0 is CUDA 12.8)."""
    version, _, label = torch.partition("+")
    build = label or variant
    if any_cuda and not label:
        return TorchInstall(f"torch=={version}", None, ANY_CUDA)
    index_root = os.environ.get(INDEX_OVERRIDE, torch_index_url).rstrip("/")
    if reachable(index_root):
        return TorchInstall(f"torch=={version}", f"{index_root}/{build}", build)
    # PyPI names CPU builds only by their label; its CUDA builds carry none.
    requirement = f"torch=={version}+cpu" if build == "cpu" else f"torch=={version}"
    return TorchInstall(requirement, None, build)


def verify(install: TorchInstall, version: str, cuda: str | None) -> str | None:
    """None if the installed torch (its __version__ and version.cuda) serves the cell,
    else why not."""
    wanted = install.requirement.split("==")[1].split("+")[0]
    if version.split("+")[0] != wanted:
        return f"wanted torch {wanted}, got {version}"
    if install.build == ANY_CUDA:
        return None if cuda else f"wanted a CUDA build of torch {wanted}, got {version}"
    if install.build == "cpu":
        if cuda is None:
            return None
        return f"wanted a CPU-only torch, got torch {version} built for CUDA {cuda}"
    want_major, want_minor = _cuda_of(install.build)
    if cuda is None:
        return f"wanted a torch for {install.build}, got the CPU-only torch {version}"
    major, minor = (int(p) for p in cuda.split(".")[:2])
    if major != want_major or minor < want_minor:
        return (
            f"wanted a torch for CUDA {want_major}.{want_minor} ({install.build}), got torch "
            f"{version} built for CUDA {cuda}; reach PyTorch's index or set {INDEX_OVERRIDE} "
            "to a mirror of it"
        )
    return None


def _cuda_of(variant: str) -> tuple[int, int]:
    digits = variant.removeprefix("cu")
    return int(digits[:-1]), int(digits[-1])


def install(variant: str, torch: str, default_registry: bool = False) -> tuple[str, str | None]:
    """Install the cell's torch into the running Python; returns its version and CUDA
    version, or exits saying why the torch that came is not the one the cell needs.
    default_registry: take it from pip's own registry even where PyTorch's index is
    reachable (the CUDA 13 build torch is PyPI's default build)."""
    import subprocess
    import sys

    from build_tools.plan import installer
    from build_tools.plan import matrix as build_matrix

    matrix = build_matrix.load()
    spec = matrix.variant(variant)
    if torch == "smoke":
        torch = spec.smoke_torch or ""
    newest = torch == NEWEST
    torch = resolve(torch)
    chosen = plan(variant, torch, matrix.torch_index_url, any_cuda=bool(spec.parts))
    if default_registry:
        chosen = TorchInstall(f"torch=={torch}", None, variant)
    where = chosen.index_url or "the default registry (PyTorch's index is not reachable)"
    if newest:
        where += ", the newest torch on PyPI, pip's configuration files not read"
    print(f"torch for {variant}/{torch}: {chosen.requirement} from {where}", flush=True)
    installer.install(*chosen.pip_args(), pip_config=not newest)
    code = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    version, cuda = json.loads(out.stdout.strip().splitlines()[-1])
    problem = verify(chosen, version, cuda)
    if problem:
        raise SystemExit(f"torch for {variant}/{torch}: {problem}")
    print(f"torch {version} (CUDA {cuda}) serves {variant}/{torch}", flush=True)
    return version, cuda


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m build_tools.plan.torch_install", description=__doc__
    )
    parser.add_argument("variant")
    parser.add_argument(
        "torch",
        help='a version, "X.Y.Z+cpu" for the CPU-only build, "smoke", or "newest" (PyPI\'s)',
    )
    arguments = parser.parse_args()
    install(arguments.variant, arguments.torch)
