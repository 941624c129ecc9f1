"""Install requirements into a Python: with uv where a nox session names it in WHEELOPS_UV,
else with that Python's pip (cibuildwheel's before-build, the Docker images, by hand).

    python -m build_tools.plan.installer REQUIREMENT... [pip options]    # into this Python

Why uv in the nox sessions: CI's machine has 2 cores, and pip unpacks a CUDA torch on one.
Into a fresh venv there, torch 2.10.0 with its NVIDIA libraries (6.8 GB) took pip 150 s and
uv 42 s; the suite's test requirements 42 s and 10 s. uv reads no pip configuration (UV_NO_CONFIG
keeps its own out too), so the find-links pip is configured with (where a machine keeps a
torch PyPI lacks: a +cpu build) are passed on, unless `pip_config` is False (the newest torch:
a machine's pip constraints must not cap it). No cache: each venv is deleted after its cell,
and a cache of every torch a run installs would hold some 20 GB.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

UV_ENV = "WHEELOPS_UV"  # the uv binary a nox session installed (build_tools/run/steps.py)
# What every uv command here runs with: no uv configuration of the machine's.
UV_SETTINGS = {"UV_NO_CONFIG": "1"}


def uv() -> str | None:
    """The uv binary to install with, or None: install with pip."""
    return os.environ.get(UV_ENV) or None


def environment() -> dict[str, str]:
    """This process's environment, with UV_SETTINGS."""
    return {**os.environ, **UV_SETTINGS}


def pip_find_links(python: str) -> list[str]:
    """The find-links locations pip is configured with (files or the environment)."""
    listed = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    links: list[str] = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".find-links"):
            links += [link for link in " ".join(shlex.split(value)).split() if link not in links]
    return links


def command(python: str, args: list[str], uv: str | None, pip_config: bool) -> list[str]:
    if uv is None:
        return [python, "-m", "pip", "install", *args]
    links = pip_find_links(python) if pip_config else []
    found = [arg for link in links for arg in ("--find-links", link)]
    return [uv, "pip", "install", "--python", python, "--no-cache", *found, *args]


def install(*args: str, python: str = sys.executable, pip_config: bool = True) -> None:
    binary = uv()
    env = environment()
    if not pip_config:
        env["PIP_CONFIG_FILE"] = os.devnull
    run = command(python, list(args), binary, pip_config)
    print(f"+ {'uv pip' if binary else 'pip'} install", " ".join(args), flush=True)
    subprocess.run(run, check=True, env=env)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(f"usage: python -m build_tools.plan.installer REQUIREMENT...\n{__doc__}")
    install(*sys.argv[1:])
