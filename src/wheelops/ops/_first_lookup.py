"""The ops' Python kernels (fake kernels, autograd, vmap rules) are registered at the first
lookup of a wheelops op, not at import: registering them cost a third of `import wheelops`
(issue #38), and a program that imports wheelops may never call an op.

Every route from Python to a wheelops op is a lookup in the `torch.ops.wheelops`
namespace: the wheelops functions and modules, raw `torch.ops.wheelops.*` calls,
torch.compile, torch.export and torch.export.load, opcheck, and torch itself where it hands
an op from C++ to Python (a __torch_dispatch__ mode such as FakeTensorMode gets it as
`torch.ops.<namespace>.<op>.<overload>`). The namespace resolves a name with its
`__getattr__` the first time and keeps the op as an attribute after; here its class gains
a `__getattr__` that registers every op's Python side first, and holds back the ops that
the registration itself looks up until it is done (another thread would otherwise find
one as an attribute, half registered). So no Python code can hold a wheelops op whose
Python kernels are not registered, and a name looked up again costs what it did before.
What never passes through Python (a C++ program, a TorchScript model loaded with
torch.jit.load and run before Python looks an op up) sees the ops as a C++ program does,
without the Python kernels.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any


def register_at_first_lookup(
    namespace: ModuleType, register: Callable[[], None] | Registration
) -> None:
    """Have `register` (every op's Python kernels) run once, at the first lookup of a name in
    `namespace` (torch.ops.wheelops); at once where this torch's namespace does not resolve
    names the way this relies on. A caller that also registers directly passes a
    `Registration` and runs that, never the function inside it: the function's first op
    lookup would start the registration again within it (#42)."""
    registration = register if isinstance(register, Registration) else Registration(register)
    if registration.done:
        return
    kind = type(namespace)
    # torch sets `name` and `_dir` (and ModuleType its dunders) when it makes a namespace; any
    # other attribute is a name looked up already, which the hook would never see again.
    looked_up = [n for n in vars(namespace) if not n.startswith("_") and n != "name"]
    if looked_up or not callable(getattr(kind, "__getattr__", None)):
        registration.run(namespace)
        return

    class RegisteringNamespace(kind):  # type: ignore[misc, valid-type]
        # torch names an op after its namespace's class (`__module__`): torch.export saves
        # that name, so this class goes by torch's.
        __module__, __qualname__ = kind.__module__, kind.__qualname__

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__") or registration.done:  # dunders: copy, pickle, typing
                return super().__getattr__(name)
            held = registration.run(self)
            if name in held:  # looked up by the registration: that very op
                return held[name]
            return vars(self)[name] if name in vars(self) else super().__getattr__(name)

        def __setattr__(self, name: str, value: Any) -> None:
            # torch keeps an op it resolved as an attribute: not while the registration runs
            if not registration.held(name, value):
                super().__setattr__(name, value)

    RegisteringNamespace.__name__ = kind.__name__
    try:
        namespace.__class__ = RegisteringNamespace
    except TypeError:  # a namespace whose class cannot be swapped
        registration.run(namespace)


class Registration:
    """One registration and the ops it looked up, held back until it is done. Every route
    to it (an op's first lookup, a direct call) runs it through `run`, so it runs once per
    process: a second registration of an op is an error under torch 2.10/2.11
    (register_fake) and a warning under later ones (the autograd kernel)."""

    def __init__(self, register: Callable[[], None]) -> None:
        self.register = register
        self.done = False
        self._lock = threading.RLock()
        self._held: dict[str, Any] | None = None  # while registering

    def run(self, namespace: ModuleType) -> dict[str, Any]:
        """Register (the first caller; other threads wait for it), then publish the ops it
        looked up. In the registering thread, a lookup of its own gets what it holds; once
        done, nothing."""
        with self._lock:
            if self.done or self._held is not None:
                return self._held or {}
            self._held = {}
            try:
                self.register()
                self.done = True
            finally:
                held, self._held = self._held, None
                vars(namespace).update(held)
            return held

    def held(self, name: str, value: Any) -> bool:
        """Hold back an op the registration looked up; False when none runs."""
        if self._held is None:
            return False
        self._held[name] = value
        return True
