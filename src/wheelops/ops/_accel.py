"""The optional autograd accelerator (DESIGN.md 13): accelerator/autograd_accel.cpp, built
for one exact torch version and CPython, serves the eager calls of the ops a training loop
calls most; the stable-ABI layer (_autograd_fast.py) serves everything else, and every
call where this module finds no accelerator for the running torch.

A wheel carries one build per torch version it was made for, at
``wheelops/_accel/torch2_11_0/wheelops_accel.abi3.so`` (for 2.11.0): one library for every CPython
from 3.10 (CPython's limited API, but for the few lines of accelerator/python_tensor.cpp,
which read fields whose offsets every CPython shares). It is loaded only where
``<version>`` equals this torch's own, without its local label (the C++ autograd API it
uses is the same in the CPU and CUDA builds of one version); any failure to load it
leaves the stable-ABI layer serving. ``WHEELOPS_ACCEL=0`` turns it off;
``WHEELOPS_ACCEL_LIBRARY=PATH`` loads a build from elsewhere (python -m
build_tools.compile.accelerator makes one), under the same checks. ``state()`` says which it is.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

_MODULE_NAME = "wheelops_accel"  # PyInit_wheelops_accel
_PACKAGE_DIR = Path(__file__).resolve().parent.parent / "_accel"

_state: str | None = None  # None: not looked for yet
_module: ModuleType | None = None
_built_here: Path | None = None  # dev mode: the build in the JIT cache


def torch_version() -> str:
    """This torch's version without its local label: the directory name an accelerator
    built for it sits under."""
    return torch.__version__.split("+")[0]


def folder(version: str) -> str:
    """The folder of the build for torch `version` ("2.11.0" -> "torch2_11_0"): a name
    Python could import, as check-wheel-contents asks of every library's path (the build,
    build_tools/compile/accelerator.py, names it so too: tests/test_accelerator.py)."""
    return "torch" + version.replace(".", "_")


def expected_path() -> Path:
    return _PACKAGE_DIR / folder(torch_version()) / f"{_MODULE_NAME}.abi3.so"


def use_build(path: Path) -> None:
    """Dev mode: serve from ``path`` (built from this checkout for this torch)."""
    global _built_here, _state
    _built_here, _state = path, None


def _load() -> None:
    global _state, _module
    if os.environ.get("WHEELOPS_ACCEL", "1") == "0":
        _state = "off (WHEELOPS_ACCEL=0)"
        return
    path = Path(os.environ.get("WHEELOPS_ACCEL_LIBRARY") or _built_here or expected_path())
    if not path.is_file():
        _state = f"absent for torch {torch_version()}: the stable-ABI autograd layer serves"
        return
    damage = _damage(path) if path == expected_path() else None
    if damage is not None:  # mapped, a changed library may abort the process: never load it
        _state = f"refused ({path} is {damage}): the stable-ABI autograd layer serves"
        return
    try:
        loader = importlib.machinery.ExtensionFileLoader(_MODULE_NAME, str(path))
        spec = importlib.util.spec_from_file_location(_MODULE_NAME, path, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except Exception as err:  # a damaged or foreign build: the stable-ABI layer serves
        _state = f"refused ({type(err).__name__}: {err}): the stable-ABI autograd layer serves"
        return
    if torch_version() != module.TORCH_VERSION:
        _state = (
            f"refused: built for torch {module.TORCH_VERSION}, this is {torch_version()}: "
            "the stable-ABI autograd layer serves"
        )
        return
    _module, _state = module, f"loaded for torch {torch_version()} from {path}"


def _damage(path: Path) -> str | None:
    """Why the wheel's own build is not the file the wheel installed (None: it is), as the
    guard checks the libraries it loads: by the build facts' sha256, else RECORD's."""
    from wheelops._compat import loader, record

    try:
        hashes = loader.build_info().library_sha256 or {}
    except RuntimeError:
        hashes = {}
    package = _PACKAGE_DIR.parent
    return record.library_damage(package, path, hashes.get(path.relative_to(package).as_posix()))


def state() -> str:
    if _state is None:
        _load()
    assert _state is not None
    return _state


def entry(op: str, python_path: Callable[..., Any]) -> Callable[..., Any]:
    """wheelops.`op`'s eager entry: the accelerator's, which hands every call it does not
    serve to ``python_path`` (the op's own path), where it serves this op; else
    ``python_path`` itself."""
    if _state is None:
        _load()
    bound = _module.bind(op, python_path) if _module is not None else None
    return python_path if bound is None else bound
