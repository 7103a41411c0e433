"""Records <-> plain JSON-able dicts, and canonical JSON for the audit chain.

Exact numbers are written as strings ("104/4099", "1/10"), so a record read
back is equal to the one written. `canonical_json` is the byte form hashed
by the audit chain: sorted keys, no whitespace, UTF-8.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ..accounting.spend import UNBOUNDED, Spend
from ..accounting.budget import CapTotal
from ..core.numbers import exact_text
from ..core.records import (
    DEFAULT_ALLOWANCE,
    Cap,
    Dataset,
    Family,
    Guarantee,
    Mechanism,
    Notion,
    PufferfishGuarantee,
    Relation,
    Release,
    Status,
    Variable,
)

GENESIS_HASH = "0" * 64


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_hash(previous: str, body: dict) -> str:
    """SHA-256 over the previous event's hash and this event's canonical JSON."""
    return hashlib.sha256((previous + canonical_json(body)).encode("utf-8")).hexdigest()


def event_hash(previous: str, seq: int, at: str, actor: str, kind: str, subject: str, payload_json: str) -> str:
    """`chain_hash` of the event {seq, at, actor, kind, subject, payload} whose payload is
    already canonical JSON (as stored): the body's canonical JSON is written around it,
    keys in sorted order, instead of parsing the payload and writing it again."""
    dump = json_scalar
    text = (f'{{"actor":{dump(actor)},"at":{dump(at)},"kind":{dump(kind)},"payload":{payload_json},'
            f'"seq":{dump(seq)},"subject":{dump(subject)}}}')
    return hashlib.sha256((previous + text).encode("utf-8")).hexdigest()


def event_hash_of_bytes(previous: str, seq: int, at: str, actor: str, kind: str, subject: str,
                        payload_utf8: bytes) -> str:
    """`event_hash` over the payload's stored UTF-8 bytes (the chain walk reads them as bytes:
    decoding a payload to text only to encode it again cost as much as hashing it)."""
    dump = json_scalar
    head = f'{previous}{{"actor":{dump(actor)},"at":{dump(at)},"kind":{dump(kind)},"payload":'
    tail = f',"seq":{dump(seq)},"subject":{dump(subject)}}}'
    return hashlib.sha256(b"".join((head.encode("utf-8"), payload_utf8, tail.encode("utf-8")))).hexdigest()


_encode_string = json.encoder.encode_basestring  # what json.dumps(text, ensure_ascii=False) writes


def json_scalar(value: Any) -> str:
    """`canonical_json` of one field of an event or a row: a string, an integer or None written
    directly (the same text; json.dumps costs ten times more per call, five calls an event, and
    `audit verify` hashes every event of the chain), anything else through json.dumps."""
    if type(value) is str:
        return _encode_string(value)
    if type(value) is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    return canonical_json(value)


def _number(value: Fraction | None) -> str | None:
    return None if value is None else str(value)


@lru_cache(maxsize=4096)
def _parsed_fraction(text: str) -> Fraction:
    return Fraction(text)  # Fractions are immutable: one parse serves every record with this value


def _fraction(text: str | None) -> Fraction | None:
    return None if text is None else _parsed_fraction(text)


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def parse_time(text: str | None) -> datetime | None:
    """A moment as a release row stores it (`release_to_dict`: ISO 8601 text, or None), read back
    exactly (aware where it was written aware)."""
    return None if text is None else datetime.fromisoformat(text)


def _param(value: Any) -> Any:
    if isinstance(value, Fraction):
        return {"fraction": str(value)}
    if isinstance(value, tuple):
        return [_param(item) for item in value]
    return value


def _unparam(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"fraction"}:
        return _parsed_fraction(value["fraction"])
    if isinstance(value, list):
        return tuple(_unparam(item) for item in value)
    return value


def guarantee_to_dict(guarantee: Guarantee) -> dict:
    return {
        "protects": sorted(guarantee.protects),
        "notion": guarantee.notion.value,
        "epsilon": _number(guarantee.epsilon),
        "delta": _number(guarantee.delta),
        "rho": _number(guarantee.rho),
        "relation": guarantee.relation.value,
        # written only in an add/remove dataset: a release of a replace-one dataset keeps its form
        **({"charged_in": guarantee.charged_in.value} if guarantee.charged_in is not None else {}),
    }


def guarantee_from_dict(data: dict) -> Guarantee:
    return _guarantee(tuple(data["protects"]), data["notion"], data["epsilon"], data["delta"], data["rho"],
                      data["relation"], data.get("charged_in"))


@lru_cache(maxsize=4096)
def _guarantee(protects: tuple[str, ...], notion: str, epsilon: str | None, delta: str | None, rho: str | None,
               relation: str, charged_in: str | None = None) -> Guarantee:
    # Guarantees are frozen records and repeat across a ledger's releases: one object each.
    return Guarantee(
        protects=frozenset(protects),
        notion=Notion(notion),
        epsilon=_fraction(epsilon),
        delta=_fraction(delta),
        rho=_fraction(rho),
        relation=Relation(relation),
        charged_in=None if charged_in is None else Relation(charged_in),
    )


def mechanism_to_dict(mechanism: Mechanism) -> dict:
    return {"name": mechanism.name, "params": {key: _param(value) for key, value in mechanism.params}}


def mechanism_from_dict(data: dict) -> Mechanism:
    return Mechanism(data["name"], tuple(sorted((key, _unparam(value)) for key, value in data["params"].items())))


def release_to_dict(release: Release) -> dict:
    """Everything the ledger knows of a release, lifecycle fields included. `part` is written
    only when the release has one (schema 16): a release without it is the same dict, and so
    the same canonical JSON, as before parts were named, and the audit chain's events of
    releases recorded before verify as they are."""
    body = {
        "id": release.id,
        "dataset": release.dataset,
        "title": release.title,
        "reads": sorted(release.reads),
        "mechanism": mechanism_to_dict(release.mechanism),
        "guarantees": [guarantee_to_dict(g) for g in release.guarantees],
        "derived_from": list(release.derived_from),
        "family": release.family,
        "status": release.status.value,
        "recorded_by": release.recorded_by,
        "recorded_at": _time(release.recorded_at),
        "approved_by": release.approved_by,
        "approved_at": _time(release.approved_at),
        "published_at": _time(release.published_at),
        "pufferfish": [pufferfish_to_dict(g) for g in release.pufferfish],
        "output_digest": release.output_digest,
        "output": release.output,
    }
    if release.part is not None:
        body["part"] = release.part
    return body


_STATUSES = {status.value: status for status in Status}  # (a dict: Status(value) is slow)


def release_from_dict(data: dict) -> Release:
    """The release a dict of `release_to_dict` (or an earlier format) describes. A family member
    written before parts were named (no `part`) is its own part, its id: what the ledger assumed
    of it (schema 16)."""
    part = data.get("part")
    if part is None and data["family"] is not None:
        part = data["id"]
    return Release(
        id=data["id"],
        dataset=data["dataset"],
        title=data["title"],
        reads=frozenset(data["reads"]),
        mechanism=mechanism_from_dict(data["mechanism"]),
        guarantees=tuple(guarantee_from_dict(g) for g in data["guarantees"]),
        derived_from=tuple(data["derived_from"]),
        family=data["family"],
        part=part,
        status=_STATUSES[data["status"]],
        recorded_by=data["recorded_by"],
        recorded_at=parse_time(data["recorded_at"]),
        approved_by=data["approved_by"],
        approved_at=parse_time(data["approved_at"]),
        published_at=parse_time(data["published_at"]),
        pufferfish=tuple(pufferfish_from_dict(g) for g in data.get("pufferfish") or ()),
        output_digest=data.get("output_digest"),
        output=data.get("output"),
        source=f"release {data['id']}",
    )


def pufferfish_to_dict(guarantee: PufferfishGuarantee) -> dict:
    return {
        "kind": guarantee.kind,
        "protects": sorted(guarantee.protects),
        "secrets": guarantee.secrets,
        "assumptions": guarantee.assumptions,
        "epsilon": _number(guarantee.epsilon),
        "delta": _number(guarantee.delta),
        "parameters": {key: _param(value) for key, value in guarantee.parameters},
    }


def pufferfish_from_dict(data: dict) -> PufferfishGuarantee:
    return PufferfishGuarantee(
        kind=data["kind"],
        protects=frozenset(data["protects"]),
        secrets=data["secrets"],
        assumptions=data["assumptions"],
        epsilon=_fraction(data.get("epsilon")),
        delta=_fraction(data.get("delta")),
        parameters=tuple(sorted((key, _unparam(value)) for key, value in (data.get("parameters") or {}).items())),
    )


def dataset_to_dict(dataset: Dataset) -> dict:
    body = {
        "name": dataset.name,
        "description": dataset.description,
        "delta": _number(dataset.delta),
        "variables": [
            {"name": v.name, "classification": v.classification, "description": v.description,
             "categories": None if v.categories is None else list(v.categories)}
            for v in dataset.variables
        ],
        "groups": {name: sorted(members) for name, members in dataset.groups},
    }
    if dataset.self_approval:  # written only when waived: earlier datasets keep their form
        body["self_approval"] = True
    if dataset.relation != Relation.REPLACE:  # written only for add/remove: earlier datasets keep their form
        body["relation"] = dataset.relation.value
    if dataset.allowance != DEFAULT_ALLOWANCE:  # written only when not the default: earlier datasets keep their form
        body["allowance"] = _number(dataset.allowance)
    return body


def dataset_from_dict(data: dict) -> Dataset:
    return Dataset(
        name=data["name"],
        variables=tuple(Variable(v["name"], v["classification"], v["description"],
                                 None if v.get("categories") is None else tuple(v["categories"]))
                        for v in data["variables"]),
        description=data["description"],
        delta=_fraction(data["delta"]),
        groups=tuple((name, frozenset(members)) for name, members in data["groups"].items()),
        self_approval=bool(data.get("self_approval", False)),
        relation=Relation(data.get("relation", Relation.REPLACE.value)),
        allowance=_fraction(data.get("allowance")) if data.get("allowance") is not None else DEFAULT_ALLOWANCE,
    )


def family_to_dict(family: Family) -> dict:
    return {
        "id": family.id,
        "dataset": family.dataset,
        "partition": None if family.partition is None else sorted(family.partition),
        "description": family.description,
    }


def family_from_dict(data: dict) -> Family:
    partition = data["partition"]
    return Family(data["id"], data["dataset"], None if partition is None else frozenset(partition), data["description"])


def cap_to_dict(cap: Cap) -> dict:
    return {
        "dataset": cap.dataset,
        "name": cap.name,
        "subset": sorted(cap.subset),
        "whole_dataset": cap.whole_dataset,
        "epsilon": _number(cap.epsilon),
        "delta": _number(cap.delta),
        "rho": _number(cap.rho),
        **({"filter": cap.filter} if cap.filter else {}),
    }


def cap_from_dict(data: dict, order: tuple[str, ...] = ()) -> Cap:
    """A cap as stored; `order`: its dataset's variables, in dataset order (Cap.order)."""
    return Cap(
        dataset=data["dataset"],
        name=data["name"],
        subset=frozenset(data["subset"]),
        epsilon=_fraction(data["epsilon"]),
        delta=_fraction(data["delta"]),
        rho=_fraction(data["rho"]),
        whole_dataset=data["whole_dataset"],
        filter=data.get("filter"),
        order=order,
    )


_SPEND_FIELDS = ("pure", "approx_epsilon", "approx_delta", "rho", "pure_rho")


def spend_to_dict(spend: Spend) -> dict:
    if spend.unbounded:
        return {"unbounded": True}
    body = {}  # the nonzero components as text, in _SPEND_FIELDS' order (each field read once)
    for name in _SPEND_FIELDS:
        value = getattr(spend, name)
        if value:
            body[name] = str(value)
    return body


def spend_from_dict(data: dict) -> Spend:
    if data.get("unbounded"):
        return UNBOUNDED
    return Spend(**{name: Fraction(value) for name, value in data.items()})


def cap_total_to_dict(total: CapTotal) -> dict:
    body = {
        "standalone": spend_to_dict(total.standalone),
        "families": {fid: [_option_to_dict(o) for o in options] for fid, options in sorted(total.families.items())},
        "drivers": [[rid, exact_text(value)] for rid, value in total.drivers],
        "value": exact_text(total.value),
    }
    if total.choices:  # releases with a choice of charges; absent in older rows
        body["choices"] = [[[spend_to_dict(o) for o in options], count] for options, count in total.choices]
    return body


def _option_to_dict(option) -> dict:
    from ..accounting.charge_choice import Worst

    if isinstance(option, Worst):
        return {"worst": [spend_to_dict(a) for a in option.alternatives]}
    return spend_to_dict(option)


def _option_from_dict(data: dict):
    from ..accounting.charge_choice import Worst

    if "worst" in data:
        return Worst(tuple(spend_from_dict(a) for a in data["worst"]))
    return spend_from_dict(data)


def _family_options_from(data) -> tuple:
    if isinstance(data, dict):  # written by older versions: one Spend per family
        return (spend_from_dict(data),)
    return tuple(_option_from_dict(o) for o in data)


def cap_total_from_dict(data: dict) -> CapTotal:
    return CapTotal(
        standalone=spend_from_dict(data["standalone"]),
        families={fid: _family_options_from(options) for fid, options in data["families"].items()},
        drivers=tuple((rid, _driver_value(value)) for rid, value in data["drivers"]),
        value=None if data.get("value") is None else _driver_value(data["value"]),
        choices=tuple((tuple(spend_from_dict(o) for o in options), count)
                      for options, count in data.get("choices", ())),
    )


def _driver_value(text: str):
    if text == "inf":
        return math.inf
    return Fraction(text) if "/" in text or "." not in text and "e" not in text else float(text)
