"""Every public wheelops op described once: the tests' cross-cutting suites (streams,
graphs, two GPUs, derivatives, determinism, export, native checks), the benchmark and
the agreement test read these descriptions, so that an op added here is covered by all.

One module per op, ``opspecs/<op>.py``, defining ``SPEC``; modules are found by their
files, as ``src/wheelops/ops/`` finds its ops (a name starting with "_" is a helper).
"""

from __future__ import annotations

import importlib
import pkgutil

from opspecs._spec import OpSpec


def _discover() -> tuple[OpSpec, ...]:
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    specs = tuple(importlib.import_module(f"{__name__}.{name}").SPEC for name in names)
    for name, spec in zip(names, specs, strict=True):
        assert spec.name == name, f"opspecs/{name}.py describes {spec.name!r}"
    return specs


ALL: tuple[OpSpec, ...] = _discover()
BY_NAME: dict[str, OpSpec] = {spec.name: spec for spec in ALL}
NAMES: list[str] = [spec.name for spec in ALL]
