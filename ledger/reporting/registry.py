"""A DP Deployments Registry record as YAML, the form the registry keeps its records in.

The record itself (what the ledger knows, its figures composed by the ledger's own accounting)
is made below the API, in operations/registry_record.py; here it is only written out.
"""

from __future__ import annotations

from typing import Any

from ..operations.registry_record import PLACEHOLDER


def to_yaml(record: dict[str, Any]) -> str:
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _text(dumper, value: str):  # multi-line text as a literal block, as the registry's own records
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    _Dumper.add_representer(str, _text)
    return "# DP Deployments Registry record exported by privacy-ledger.\n" \
           f"# Search for '{PLACEHOLDER.split(' ')[0]}' to find what a person must fill in.\n" + \
        yaml.dump(record, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
