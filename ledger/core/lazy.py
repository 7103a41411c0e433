"""Modules imported on first use, so a command pays only for what it runs (issue 13).

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

    def __getattr__(self, attribute: str):
        # every read is forwarded (nothing is copied here), so a test's monkeypatch of
        # the real module is seen through the proxy
        return getattr(self._load(), attribute)

    def __setattr__(self, attribute: str, value) -> None:
        setattr(self._load(), attribute, value)

    def __delattr__(self, attribute: str) -> None:
        delattr(self._load(), attribute)

    def __dir__(self):
        return dir(self._load())


def lazy_module(name: str) -> types.ModuleType:
    """`name`, imported when first used (the real module if it is already imported)."""
    import sys

    return sys.modules.get(name) or LazyModule(name)


def lazy_callable(module: str, name: str):
    """A function or class of `module` (`Session`, `select`), imported on the first call."""

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{module}.{name}, imported on the first call."
    return call
