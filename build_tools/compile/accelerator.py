"""The optional autograd accelerator (DESIGN.md 13; accelerator/, src/wheelops/ops/_accel.py):
one library per torch version of the matrix, each compiled against that version's own
headers, outside the stable ABI.

No torch needs to be installed for it. The headers come from PyPI's torch wheel of each
version, of which only torch/include/ is read, with HTTP range requests (a few MB of a
500 MB file), and cached. The library names torch's libraries (libtorch_cpu.so, libc10.so,
libtorch_python.so, all loaded by `import torch` before wheelops loads it) through stubs
that carry only their sonames: it binds to the running torch's own copies.

Dev mode (build_tools/dev.py) builds it with these same commands, for the torch that runs
(`build_incremental`: that torch's own headers, the compiler CXX names, as every build), and
recompiles only what changed, by the builder's stamps and depfiles. The commands are
assembled here and not by builder.py's Library: that describes csrc/'s stable-ABI
libraries (TORCH_TARGET_VERSION, the limited API's defines, the glibc floor's header,
-z defs against libc10 and libtorch_cpu, a CUDA toolkit), of which the accelerator takes
none; a third kind of Library would branch every assembler there. What both need alike,
per-object stamps and depfiles, MAX_JOBS compiles and the link, is builder.py's Job,
object_jobs and run_jobs, which these commands run on.

    python -m build_tools.compile.accelerator --out DIR [--torch 2.11.0 ...]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import urllib.parse
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from build_tools.compile import builder, flags, native_sources

PYPI_JSON = os.environ.get("WHEELOPS_TORCH_JSON_URL", "https://pypi.org/pypi")
# The libraries the accelerator calls into, named by soname only (see the docstring).
TORCH_LIBRARIES = ("torch_python", "torch_cpu", "c10")
CXX_FLAGS = [
    "-std=c++20",
    "-O2",
    "-fPIC",
    "-fvisibility=hidden",
    "-D_GLIBCXX_USE_CXX11_ABI=1",
    "-ffunction-sections",
    "-fdata-sections",
]
# One exported symbol (accelerator/exports.map): the copies of newer C++ runtime symbols
# in accelerator/runtime_compat.cpp must bind within the library only.
EXPORTS = native_sources.ACCEL_DIR / "exports.map"
# The shared C++ runtime as the native libraries link it, whatever the compiler's defaults
# (flags.cxx_runtime_link_flags says why): without it, a compiler that links the runtime
# statically (the GPU machine's g++) gave dev mode's build a second
# __throw_bad_array_new_length beside runtime_compat.cpp's, and g++ 12 here refuses the link.
LINK_FLAGS = [
    "-shared",
    "-Wl,--gc-sections",
    f"-Wl,--version-script={EXPORTS}",
    *flags.cxx_runtime_link_flags(),
]
# A wheel's are stripped whole (a third of the file). Dev mode keeps the symbol table: the
# exports map leaves nothing but PyInit in the dynamic one, so the symbol table is where
# backtraces and cxx_runtime's check find what the library defines.
WHEEL_STRIP = "-s"


def library_path(package: Path, torch_version: str) -> Path:
    """Where src/wheelops/ops/_accel.py looks for the build for `torch_version`."""
    folder = "torch" + torch_version.replace(".", "_")  # as src/wheelops/ops/_accel.py folder()
    return package / "_accel" / folder / "wheelops_accel.abi3.so"


def cache_root() -> Path:
    root = os.environ.get("WHEELOPS_ACCEL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "wheelops" / "accel"


class _RemoteFile(io.RawIOBase):
    """A file on an HTTP server read by ranges, in blocks: enough of a file for zipfile."""

    BLOCK = 4 << 20

    def __init__(self, url: str, size: int) -> None:
        self.url, self.size, self.pos = url, size, 0
        self.blocks: dict[int, bytes] = {}

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def _block(self, index: int) -> bytes:
        if index not in self.blocks:
            start = index * self.BLOCK
            end = min(start + self.BLOCK, self.size) - 1
            request = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end}"})
            with urllib.request.urlopen(request, timeout=120) as response:
                if response.status != 206:
                    raise RuntimeError(f"{self.url}: the server ignored a range request")
                self.blocks[index] = response.read()
        return self.blocks[index]

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer)
        done = 0
        while done < len(view) and self.pos < self.size:
            block = self._block(self.pos // self.BLOCK)
            offset = self.pos % self.BLOCK
            chunk = block[offset : offset + len(view) - done]
            view[done : done + len(chunk)] = chunk
            done += len(chunk)
            self.pos += len(chunk)
        return done


@functools.cache
def _releases(index: str) -> dict[str, list[dict]]:
    # The project's JSON (every release's files): a release's own URL is not served by
    # every PyPI mirror.
    with urllib.request.urlopen(index, timeout=120) as response:
        return json.load(response)["releases"]


def _wheel_url(torch_version: str, platform: str) -> tuple[str, int]:
    """The URL and size of one of PyPI's torch wheels of `torch_version` for `platform`
    (any CPython: the headers are the same)."""
    index = f"{PYPI_JSON}/torch/json"
    for entry in _releases(index).get(torch_version, []):
        name = entry["filename"]
        if name.endswith(f"_{platform}.whl") and "manylinux" in name:
            return urllib.parse.urljoin(index, entry["url"]), int(entry["size"])
    raise RuntimeError(f"PyPI has no torch {torch_version} wheel for {platform} ({index})")


def _installed_headers(torch_version: str, platform: str) -> Path | None:
    """torch/include/ of the installed torch, where it is `torch_version` on `platform`:
    a source build needs no network."""
    import platform as host

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None or host.machine() != platform:
        return None
    root = Path(spec.origin).parent
    version = (root / "version.py").read_text() if (root / "version.py").exists() else ""
    found = re.search(r"^__version__\s*=\s*['\"]([^'\"+]+)", version, re.M)
    if found is None or found.group(1) != torch_version or not (root / "include").is_dir():
        return None
    return root / "include"


def torch_headers(torch_version: str, platform: str) -> Path:
    """torch/include/ of torch `torch_version` for `platform`: the installed torch's where it
    is that version, else PyPI's wheel's, cached."""
    installed = _installed_headers(torch_version, platform)
    if installed is not None:
        return installed
    target = cache_root() / "headers" / f"torch{torch_version}-{platform}"
    if (target / "complete").exists():
        return target / "include"
    url, size = _wheel_url(torch_version, platform)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="headers-", dir=target.parent))
    with zipfile.ZipFile(io.BufferedReader(_RemoteFile(url, size), 1 << 20)) as wheel:
        for member in wheel.infolist():
            if member.filename.startswith("torch/include/") and not member.is_dir():
                wheel.extract(member, work)
    shutil.rmtree(target, ignore_errors=True)
    (work / "torch").rename(target)
    shutil.rmtree(work)
    (target / "complete").write_text(url + "\n")
    return target / "include"


def _soname_stubs(directory: Path, cc: str) -> Path:
    """Empty libraries named as torch's, for the linker to record as needed."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in TORCH_LIBRARIES:
        stub = directory / f"lib{name}.so"
        if not stub.exists():
            subprocess.run(
                [cc, "-shared", "-x", "c", "/dev/null", f"-Wl,-soname,lib{name}.so", "-o", stub],
                check=True,
            )
    return directory


def jobs(
    include: Path, stubs: Path, work: Path, output: Path, cxx: str, strip: bool
) -> tuple[list[builder.Job], builder.Job]:
    """The compile of each source into `work` against torch's headers at `include`, and the
    link into `output` through the soname stubs in `stubs` (`strip`: a wheel's)."""
    compile_flags = [
        *CXX_FLAGS,
        f"-I{include}",
        f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}",
        f"-I{sysconfig.get_paths()['include']}",
    ]
    headers = sorted(native_sources.ACCEL_DIR.glob("*.h"))
    sources = native_sources.ACCEL_SOURCES
    compiles = builder.object_jobs(cxx, sources, work, compile_flags, headers)
    objects = tuple(job.output for job in compiles)
    command = [
        cxx,
        *map(str, objects),
        *LINK_FLAGS,
        *([WHEEL_STRIP] if strip else []),
        f"-L{stubs}",
        "-Wl,--no-as-needed",
        *(f"-l{name}" for name in TORCH_LIBRARIES),
        "-o",
        str(output),
    ]
    return compiles, builder.Job(command, output, (*objects, EXPORTS), work / "link.cmd")


def _source_digest(cxx: str) -> str:
    digest = hashlib.sha256(" ".join([cxx, *CXX_FLAGS, *LINK_FLAGS, WHEEL_STRIP]).encode())
    for source in sorted(native_sources.ACCEL_DIR.iterdir()):
        digest.update(source.name.encode() + source.read_bytes())
    return digest.hexdigest()[:16]


def build(torch_version: str, out: Path, platform: str = "x86_64") -> Path:
    """The accelerator for `torch_version` at `out` (a cached build when the sources, the
    flags and the compiler are the same)."""
    cxx = builder.host_compiler()
    cached = cache_root() / "builds" / _source_digest(cxx) / f"torch{torch_version}-{platform}.so"
    if not cached.exists():
        include = torch_headers(torch_version, platform)
        stubs = _soname_stubs(cache_root() / "stubs", cxx)
        cached.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"{cached.stem}-", dir=cached.parent))
        # One compiler at a time: build_all builds MAX_JOBS torch versions side by side.
        commands = jobs(include, stubs, work, work / cached.name, cxx, strip=True)
        built = builder.run_jobs(*commands, workers=1)
        built.rename(cached)
        shutil.rmtree(work)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cached, out)
    return out


def build_incremental(torch_version: str, work: Path, verbose: bool = False) -> Path:
    """Dev mode: the accelerator for the running torch (`torch_version`: its own headers)
    at work/wheelops_accel.so, recompiling only what changed since the last build there."""
    import platform

    cxx = builder.host_compiler()
    include = torch_headers(torch_version, platform.machine())
    stubs = _soname_stubs(work / "stubs", cxx)
    commands = jobs(include, stubs, work, work / "wheelops_accel.so", cxx, strip=False)
    return builder.run_jobs(*commands, verbose)


def build_all(package: Path, torch_versions: list[str], platform: str = "x86_64") -> list[Path]:
    """One accelerator per torch version into `package` (wheelops/), two compilers at a time."""
    jobs = max(1, min(len(torch_versions), int(os.environ.get("MAX_JOBS", "2"))))
    with ThreadPoolExecutor(jobs) as pool:
        return list(
            pool.map(lambda v: build(v, library_path(package, v), platform), torch_versions)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.compile.accelerator", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="the package directory")
    parser.add_argument("--torch", action="append", required=True, help="a torch version")
    args = parser.parse_args(argv)
    for path in build_all(args.out, args.torch):
        print(f"{path}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
