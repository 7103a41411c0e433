"""Output files and release documents: a file written whole or not at all, never over the ledger;
a stored release as its document in the file format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.records import Release


def guarded_target(out: str | Path, url: str, option: str, source: str = "command line", *,
                   new: bool = False) -> Path:
    """An output path checked against the ledger at `url` (store/files.py: never the ledger, never
    anything but a regular file or a new path; exit 2 naming `option` of `source`)."""
    from ..store import files

    return files.checked(out, url, option, source, new=new)


def guarded_write(path: Path, data, url: str, option: str, source: str = "command line", *, new: bool = False,
                  mode: int | None = None) -> Path:
    """Write a whole output file (bytes, text, or an iterable of chunks) or nothing, under the guard."""
    from ..store import files

    return files.write(path, data, url, option, source, new=new, mode=mode)


def cap_from_document(document: dict):
    """A cap as an audit event's payload states it (store/codec.py), as the report's cap history reads it."""
    from ..store.codec import cap_from_dict

    return cap_from_dict(document)


def release_document(release: Release) -> dict[str, Any]:
    """A release as its document in the file format (store/codec.py), as `releases --json` lists it."""
    from ..store.codec import release_to_dict

    return release_to_dict(release)


def release_part_readers():
    """(guarantee_from_dict, mechanism_from_dict, pufferfish_from_dict): the file format's readers of
    a stored release's parts (store/codec.py), for a register written from the raw release rows."""
    from ..store.codec import guarantee_from_dict, mechanism_from_dict, pufferfish_from_dict

    return guarantee_from_dict, mechanism_from_dict, pufferfish_from_dict
