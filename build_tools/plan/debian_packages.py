"""Debian packages for the build and the emulated runs, fetched without touching the machine's apt.

apt-get runs with a private state folder (its own sources list for Debian bookworm, its
own package lists, cache and an empty dpkg status), so the machine's apt setup is neither
read nor changed, and nothing is installed: the .deb files are downloaded (apt checks
each against Debian's signed indexes) and the callers unpack them in Python
(build_tools/plan/cuda12_toolkit.py's deb_data).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from build_tools.plan.cuda12_toolkit import cache_dir
from build_tools.plan.cuda_toolkit import ToolkitError

DEBIAN_SOURCES = (
    "http://deb.debian.org/debian bookworm main",
    "http://deb.debian.org/debian bookworm-updates main",
    "http://deb.debian.org/debian-security bookworm-security main",
)
# apt-cache depends --recurse: the packages a package needs to run, nothing it merely suggests.
DEPENDS_ONLY = (
    "--recurse",
    "--no-recommends",
    "--no-suggests",
    "--no-conflicts",
    "--no-breaks",
    "--no-replaces",
    "--no-enhances",
)


def apt(machine_arch: str, state: Path, *args: str, cwd: Path | None = None) -> str:
    """apt-get / apt-cache with a private state folder for `machine_arch` packages."""
    (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (state / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    (state / "status").touch()
    sources = state / "sources.list"
    sources.write_text("".join(f"deb [arch={machine_arch}] {s}\n" for s in DEBIAN_SOURCES))
    options = [
        f"-oAPT::Architecture={machine_arch}",
        f"-oAPT::Architectures::={machine_arch}",
        f"-oDir::State::Lists={state / 'lists'}",
        f"-oDir::State::status={state / 'status'}",
        f"-oDir::Cache={state / 'cache'}",
        f"-oDir::Etc::SourceList={sources}",
        f"-oDir::Etc::SourceParts={state / 'sources.list.d'}",
        "-oAPT::Sandbox::User=root",
        "-oDebug::NoLocking=1",
        "-q",
    ]
    tool, *rest = args
    done = subprocess.run([tool, *options, *rest], capture_output=True, text=True, cwd=cwd)
    if done.returncode != 0:
        raise ToolkitError(f"{tool} {' '.join(rest)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def fetch(
    machine_arch: str,
    roots: tuple[str, ...],
    into: Path,
    closure: bool = True,
    skip: tuple[str, ...] = (),
    only: str | None = None,
) -> list[Path]:
    """Download `roots` and (`closure`) their dependencies into `into`, less the packages
    `skip` names and, with `only` (a regular expression), those whose name it misses."""
    state = cache_dir() / f"apt-{machine_arch}"
    if shutil.which("apt-get") is None:
        raise ToolkitError("the emulated runs fetch Debian packages with apt-get: none here")
    apt(machine_arch, state, "apt-get", "update")
    if closure:
        depends = apt(machine_arch, state, "apt-cache", "depends", *DEPENDS_ONLY, *roots)
    else:
        depends = "\n".join(roots)
    names = sorted(
        {line.strip() for line in depends.splitlines() if line and not line.startswith(" ")}
        - set(skip)
    )
    names = [n for n in names if not n.startswith("<")]  # virtual packages
    names = [n for n in names if only is None or re.search(only, n)]
    into.mkdir(parents=True, exist_ok=True)
    for old in into.glob("*.deb"):
        old.unlink()
    apt(machine_arch, state, "apt-get", "download", *names, cwd=into)
    return sorted(into.glob("*.deb"))
