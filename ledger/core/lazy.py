"""Modules imported on first use, so a command pays only for what it runs.

A pipeline calls the CLI once per release: `--help` must not import the ORM,
and `record` must not import numpy, matplotlib or pandas. A module that needs
a heavy library names it here at import time, `np = lazy_module("numpy")`, and
the library is imported the first time one of its attributes is read.

Invariant: after the first attribute read the proxy forwards to the real
module, and `sys.modules` holds the real module (not the proxy), so other
libraries importing it see nothing unusual.
"""

from __future__ import annotations

import importlib
import types

TYPE_CHECKING = False
if TYPE_CHECKING:  # names for the annotations only: importing typing would cost every command's start-up
    from collections.abc import Callable
    from typing import Any


class LazyModule(types.ModuleType):
    """A stand-in for a module, imported on the first attribute read."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_lazy_target"] = None

    def _load(self) -> types.ModuleType:
        module = self.__dict__["_lazy_target"]
        if module is None:
            module = self.__dict__["_lazy_target"] = importlib.import_module(self.__name__)
        return module

    def __getattr__(self, attribute: str) -> Any:
        # every read is forwarded (nothing is copied here), so a test's monkeypatch of
        # the real module is seen through the proxy
        return getattr(self._load(), attribute)

    def __setattr__(self, attribute: str, value: object) -> None:
        setattr(self._load(), attribute, value)

    def __delattr__(self, attribute: str) -> None:
        delattr(self._load(), attribute)

    def __dir__(self) -> list[str]:
        return dir(self._load())


def lazy_module(name: str) -> types.ModuleType:
    """`name`, imported when first used (the real module if it is already imported)."""
    import sys

    return sys.modules.get(name) or LazyModule(name)


def lazy_callable(module: str, name: str) -> Callable[..., Any]:
    """A function or class of `module` (`Session`, `select`), imported on the first call."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{module}.{name}, imported on the first call."
    return call


def submodule_alone(package: str, name: str) -> types.ModuleType:
    """`package.name` imported without running `package`'s own `__init__` when that package
    is not imported yet (its `__init__` can cost far more than the submodule: scipy.special's
    imports scipy's array-API layer, which clones numpy and so imports numpy.f2py and
    numpy.testing, about 0.1-0.2 s of a `check` that needs three of its compiled ufuncs).

    For the import, `sys.modules[package]` is a bare package object whose `__path__` is the real
    package's directory, so the submodule (and what it imports relative to the package) is found
    and executed as usual; the bare object is then taken out again. The submodule stays in
    `sys.modules` under its own name, so a later `import package` runs the real `__init__`,
    whose `from .name import ...` finds this very module: one module object, the same functions
    (tests/store/test_startup_and_writes.py checks). When `package` is imported already, this is
    `importlib.import_module` itself."""
    import os
    import sys

    qualified = f"{package}.{name}"
    found = sys.modules.get(qualified)
    if found is not None:
        return found
    if package in sys.modules:
        return importlib.import_module(qualified)
    parent, _, leaf = package.rpartition(".")
    if not parent:
        raise ValueError(f"submodule_alone needs a subpackage, not the top-level package {package!r}")
    parent_module = importlib.import_module(parent)
    if parent_module.__file__ is None:  # a namespace package has no one directory to look in
        raise ValueError(f"submodule_alone needs a regular parent package, not the namespace package {parent!r}")
    directory = os.path.join(os.path.dirname(parent_module.__file__), leaf)
    bare = types.ModuleType(package)
    bare.__path__ = [directory]
    bare.__package__ = package
    sys.modules[package] = bare
    try:
        return importlib.import_module(qualified)
    finally:
        if sys.modules.get(package) is bare:
            del sys.modules[package]
        if parent_module.__dict__.get(leaf) is bare:
            del parent_module.__dict__[leaf]
