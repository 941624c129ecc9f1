"""The hook that registers the ops' Python kernels at the first lookup of an op
(src/wheelops/ops/_first_lookup.py), against this torch's own `torch.ops` namespaces: it must
see the first lookup of each name (else `import wheelops` pays for the registration, or a
name resolves without its kernels), and none after (a resolved op is the namespace's
attribute: a lookup costs what it does without the hook). In-process and about a tenth of
a second, so that every torch CI installs runs it: it is among the wheel tests of every
cell (build_tools/plan/matrix.py WHEEL_TESTS) and the emulated ones
(build_tools/run/steps.py); the whole package's first uses, in fresh processes:
test_import_defers.py."""

from __future__ import annotations

import uuid

import torch

from wheelops.ops._first_lookup import register_at_first_lookup

# Every scratch library, alive until the process ends: a library freed takes its op out of
# the dispatcher but leaves its namespace in torch.ops, and torch 2.10's decomposition
# table (built when torch._inductor is first imported, as opcheck does) then fails on the
# missing op ("'CustomDecompTable' object is not a mapping") in every later test of the
# process.
_LIBRARIES: list[torch.library.Library] = []


def _scratch_namespace() -> tuple[str, torch.library.Library]:
    """A namespace of its own, holding one op, f(x) = 2x; no name looked up yet."""
    name = f"wheelops_test_{uuid.uuid4().hex[:8]}"
    library = torch.library.Library(name, "DEF")
    library.define("f(Tensor x) -> Tensor")
    library.impl("f", lambda x: x * 2, "CPU")
    _LIBRARIES.append(library)
    return name, library


def test_registers_before_the_first_name_resolves():
    name, _library = _scratch_namespace()
    namespace = getattr(torch.ops, name)
    calls = []  # per call of register: whether the op was resolved already

    register_at_first_lookup(namespace, lambda: calls.append("f" in vars(namespace)))
    assert calls == []  # deferred: this torch's namespace took the hook
    assert not hasattr(namespace, "__wrapped__")  # a dunder probe registers nothing
    assert calls == []
    assert torch.equal(namespace.f(torch.ones(2)), torch.full((2,), 2.0))
    assert calls == [False]
    namespace.f(torch.ones(2))  # resolved: an attribute now, no hook
    assert calls == [False]
    # An attribute of the instance: Python finds it before it would call a __getattr__, so
    # every later lookup of the name is torch's own.
    assert "f" in vars(namespace)
    # Named as torch names it without the hook (torch.export saves that name).
    control, _control_library = _scratch_namespace()
    plain = getattr(torch.ops, control).f.default
    assert namespace.f.default.__module__ == plain.__module__.replace(control, name)


def test_a_name_looked_up_already_registers_at_once():
    name, _library = _scratch_namespace()
    namespace = getattr(torch.ops, name)
    namespace.f  # noqa: B018 -- looked up before the hook: it would never see this name again
    calls = []
    register_at_first_lookup(namespace, lambda: calls.append(True))
    assert calls == [True]
