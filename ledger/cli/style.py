"""How the command line presents itself: types in help as a person reads them.

Typer 0.2x prints a parameter's Python type (`<list[Path]>`, `<str>`, `<bool>`);
stewards read `FILE...`, `TEXT`, `NUMBER`, and a flag needs no type at all. This
module adjusts Typer's help rendering once, at import; if Typer's internals differ
(another version), help falls back to Typer's own and nothing else changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

LABELS = {str: "TEXT", Path: "FILE", int: "INTEGER", float: "NUMBER"}
# text options that hold something more specific (exact numbers are read from text: "1/3")
NAMED = {"epsilon": "NUMBER", "delta": "NUMBER", "rho": "NUMBER", "dataset": "NAME", "by": "NAME", "name": "NAME",
         "out": "FILE", "since": "DATE", "format": "FORMAT", "release": "RELEASE-ID", "release_id": "RELEASE-ID",
         "variables": "VARIABLE", "subset": "VARIABLE", "plans": "FILE", "example": "NAME", "mechanism": "NAME"}


def _install() -> None:
    try:
        from typer import core
    except ImportError:  # pragma: no cover
        return
    parameter = getattr(core, "_TyperParameter", None)
    argument = getattr(core, "TyperArgument", None)
    if parameter is None or argument is None or not hasattr(parameter, "display_type"):
        return
    original = parameter.display_type

    def display_type(self, ctx):
        try:
            if getattr(self, "is_flag", False):
                return None
            if self.metavar is not None:
                return self.metavar
            descriptor = self.type_descriptor
            if descriptor.is_choice:
                return original(self, ctx).strip("<>")
            annotation = descriptor.annotation
            if descriptor.is_list:
                inner = get_args(annotation)
                annotation = inner[0] if inner else str
            label = (NAMED.get(self.name or "") if annotation is str else None) or LABELS.get(annotation) \
                or original(self, ctx).strip("<>").upper()
            if descriptor.is_list and isinstance(self, argument):
                label += "..."
            return label
        except Exception:  # noqa: BLE001 (help must render whatever Typer's internals are)
            return original(self, ctx)

    parameter.display_type = display_type
    if hasattr(argument, "_usage_display_name"):
        def usage_name(self) -> str:
            name = (self.metavar or self.name or "").upper()
            name = name if self.required else f"[{name}]"
            return name + ("..." if self.nargs != 1 else "")

        argument._usage_display_name = usage_name


_install()
