"""Rows as the codec's dicts: release, dataset, family and cap rows in the form codec.py decodes
(a release's JSON columns read as their stored text and parsed once per distinct text), and the
values of a release row from the codec's dict. The reads every command starts with are SQL text
typed by the table's columns (`text_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
import json

from sqlalchemy import Text, cast, text

from .codec import canonical_json, json_scalar as _json_scalar
from .table_models import CapRow, DatasetRow, FamilyRow, ReleaseRow

_RELEASES = ReleaseRow.__table__


def text_rows(table, where: str = "", order: str = "", *binds):
    """SELECT every column of `table` as SQL text typed by the table's own columns (the same rows,
    JSON decoded and booleans as bool, as the Core select). The reads every `check` and `record`
    start with are written so: a fresh process compiles a Core select in 1-6 ms (the first ones
    the most), its text in a fraction of that, and a command is a fresh process."""
    names = ", ".join(f'"{column.name}"' for column in table.c)
    clause = text(f"SELECT {names} FROM {table.name}" + (f" WHERE {where}" if where else "")
                  + (f" ORDER BY {order}" if order else ""))
    return (clause.bindparams(*binds) if binds else clause).columns(*table.c)


def dataset_dict(row: DatasetRow, variables: list[dict], allowance: str | None = None) -> dict:
    return {"name": row.name, "description": row.description, "delta": row.delta,
            "variables": variables, "groups": row.groups, "self_approval": bool(row.self_approval),
            "relation": row.relation or "replace", **({"allowance": allowance} if allowance is not None else {})}


def family_dict(row: FamilyRow) -> dict:
    return {"id": row.id, "dataset": row.dataset, "partition": row.partition, "description": row.description}


def release_row_dict(row) -> dict:
    """A release row (ORM or Core: the columns as attributes) as the codec's dict."""
    return {
        "id": row.id,
        "dataset": row.dataset,
        "title": row.title,
        "reads": row.reads,
        "mechanism": {"name": row.mechanism_name, "params": row.mechanism_params},
        "guarantees": row.guarantees,
        "derived_from": row.derived_from,
        "family": row.family,
        "status": row.status,
        "recorded_by": row.recorded_by,
        "recorded_at": row.recorded_at,
        "approved_by": row.approved_by,
        "approved_at": row.approved_at,
        "published_at": row.published_at,
        "pufferfish": row.pufferfish,
        "output_digest": row.output_digest,
        "output": row.output,
        **({} if row.part is None else {"part": row.part}),  # (as codec.release_to_dict writes it)
    }


def cap_dict(row: CapRow) -> dict:
    return {"dataset": row.dataset, "name": row.name, "subset": row.subset, "whole_dataset": row.whole_dataset,
            "epsilon": row.epsilon, "delta": row.delta, "rho": row.rho,
            **({"filter": row.filter} if row.filter else {})}  # (as codec.cap_to_dict writes it)


def release_values(body: dict, seq: int) -> dict:
    return {
        "id": body["id"], "seq": seq, "dataset": body["dataset"], "title": body["title"], "reads": body["reads"],
        "mechanism_name": body["mechanism"]["name"], "mechanism_params": body["mechanism"]["params"],
        "guarantees": body["guarantees"], "derived_from": body["derived_from"], "family": body["family"],
        "status": body["status"], "recorded_by": body["recorded_by"], "recorded_at": body["recorded_at"],
        "approved_by": body["approved_by"], "approved_at": body["approved_at"],
        "published_at": body["published_at"], "pufferfish": body["pufferfish"],
        "output_digest": body["output_digest"], "output": body["output"], "part": body.get("part"),
    }


VERIFY_CHUNK = 5_000  # events, and release rows, read and checked at a time by `verify`

# The release columns with each JSON column read as its stored text (no JSON type processor:
# `release_row_dicts` parses each distinct text of a chunk once), under the column's own name.
_JSON_COLUMNS = ("reads", "mechanism_params", "guarantees", "derived_from", "pufferfish")
RELEASE_TEXT_COLUMNS = tuple(cast(column, Text).label(column.name) if column.name in _JSON_COLUMNS else column
                              for column in _RELEASES.c)
_RELEASE_DICT_ORDER = ("id", "dataset", "title", "reads", "mechanism_name", "mechanism_params", "guarantees",
                       "derived_from", "family", "status", "recorded_by", "recorded_at", "approved_by", "approved_at",
                       "published_at", "pufferfish", "output_digest", "output", "part")  # release_row_dict's keys


def release_row_dicts(rows: Sequence) -> list[dict]:
    """`release_row_dict` of each row of `RELEASE_TEXT_COLUMNS` (the JSON columns as their
    stored text), the same dicts: each distinct JSON text of the chunk is parsed once (a JSON
    column's processor parsed every cell, through three layers of calls: five cells a release,
    and most of them repeat, the mechanisms' parameters above all). Rows with the same text
    share its parsed value: the dicts are read, never changed. Each text is parsed alone, so
    a cell that is not JSON fails as the processor failed on it (joining the texts into one
    array to parse them in one call was slower, and could read two bad cells as good ones)."""
    return [body for body, _ in _release_rows(rows, canonical=False)]


def release_row_dicts_canonical(rows: Sequence) -> list[tuple[dict, str]]:
    """`release_row_dicts`, each dict with its canonical JSON (codec.canonical_json of it, the
    text a release event holds), written field by field in sorted key order: each distinct JSON
    text of the chunk written canonically once, the other fields as JSON scalars (json.dumps
    of the whole dict, keys sorted, cost five times as much; `audit verify` writes every row)."""
    return _release_rows(rows, canonical=True)


def _release_rows(rows: Sequence, canonical: bool) -> list[tuple[dict, str]]:
    names = [column.name for column in RELEASE_TEXT_COLUMNS]
    at = {name: names.index(name) for name in names}
    json_at = [at[name] for name in _JSON_COLUMNS]
    loads = json.loads
    parsed = {text: loads(text) for text in {row[k] for row in rows for k in json_at} if type(text) is str}
    parsed[None] = None  # (NULL stays None, as the processor gave it)
    written = {text: canonical_json(value) for text, value in parsed.items()} if canonical else {}
    j = _json_scalar
    fields = itemgetter(*(at[name] for name in _RELEASE_DICT_ORDER))
    found = []
    for (id_, dataset, title, reads, mechanism_name, params, guarantees, derived_from, family, status, recorded_by,
         recorded_at, approved_by, approved_at, published_at, pufferfish, output_digest, output, part) in map(fields, rows):
        body = {
            "id": id_, "dataset": dataset, "title": title, "reads": parsed[reads],
            "mechanism": {"name": mechanism_name, "params": parsed[params]}, "guarantees": parsed[guarantees],
            "derived_from": parsed[derived_from], "family": family, "status": status, "recorded_by": recorded_by,
            "recorded_at": recorded_at, "approved_by": approved_by, "approved_at": approved_at,
            "published_at": published_at, "pufferfish": parsed[pufferfish], "output_digest": output_digest,
            "output": output}
        if part is not None:  # (as codec.release_to_dict writes it)
            body["part"] = part
        text = ""
        if canonical:  # the keys in sorted order, as canonical_json writes them
            text = (f'{{"approved_at":{j(approved_at)},"approved_by":{j(approved_by)},"dataset":{j(dataset)},'
                    f'"derived_from":{written[derived_from]},"family":{j(family)},"guarantees":{written[guarantees]},'
                    f'"id":{j(id_)},"mechanism":{{"name":{j(mechanism_name)},"params":{written[params]}}},'
                    f'"output":{j(output)},"output_digest":{j(output_digest)},'
                    + (f'"part":{j(part)},' if part is not None else "")
                    + f'"published_at":{j(published_at)},"pufferfish":{written[pufferfish]},"reads":{written[reads]},'
                    f'"recorded_at":{j(recorded_at)},"recorded_by":{j(recorded_by)},"status":{j(status)},'
                    f'"title":{j(title)}}}')
        found.append((body, text))
    return found
