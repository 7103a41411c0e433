"""The report's register: every release as recorded, with its guarantees and lifecycle, and its
Pufferfish-family guarantees, shown apart and never added into a DP total.

Invariant: exact numbers are kept exact (GuaranteeText holds the guarantee's own Fractions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

from ..core.numbers import Number
from ..core.records import CHARGED_STATUSES, Family, Guarantee, Release
from ..operations.meeting_pack import aware  # (computed below the API; the report shows it)
from ..operations.report_reading import Ending  # (read below the API)


PUFFERFISH_KINDS = {
    "p-percent": "p% protection (Bailie 2020)",
    "dataset-attribute-privacy": "dataset attribute privacy (Zhang, Ohrimenko and Cummings)",
    "distributional-attribute-privacy": "distributional attribute privacy (Zhang, Ohrimenko and Cummings)",
    "perfect-sample-privacy": "perfect sample privacy (Rassouli, Rosas and Gündüz)",
    "pufferfish": "Pufferfish",
}


@dataclass(frozen=True)
class GuaranteeText:
    protects: tuple[str, ...]
    notion: str  # pure / approx / zcdp
    epsilon: Fraction | None
    delta: Fraction | None
    rho: Fraction | None
    relation: str  # replace / add-remove


@dataclass(frozen=True)
class RegisterEntry:
    """One release as recorded, with its lifecycle. `cells`: its non-zero cells of Table 1
    (filled in the sparse layout, where the register carries them)."""

    id: str
    title: str
    status: str
    charged: bool
    recorded_at: datetime | None
    recorded_by: str
    approved_at: datetime | None
    approved_by: str | None
    published_at: datetime | None
    reads: tuple[str, ...]
    exact: tuple[str, ...]  # read without any guarantee: not protected
    mechanism: str
    parameters: tuple[tuple[str, Any], ...]
    guarantees: tuple[GuaranteeText, ...]
    family: str | None
    family_split: str  # "random split" / "partition by ..." / ""
    derived_from: tuple[str, ...]
    output_digest: str | None
    pufferfish: tuple[str, ...]  # labels of its Pufferfish-family guarantees (their own section)
    cells: tuple[tuple[str, Number], ...]
    dataset_wide: Number | None
    published_by: str | None = None  # who published it (the publish step's person; docs/explanation/model.md#people-duties-and-the-book-of-record)
    ended: Ending | None = None  # its retraction or cancellation: who, when, why
    part: str | None = None  # a family member's part of the records (docs/explanation/model.md#families)


@dataclass(frozen=True)
class PufferfishEntry:
    """A Pufferfish-family guarantee of one release (docs/explanation/model.md#pufferfish-guarantees), shown in its own section
    and never added into a DP total.

    kind: "p-percent", "dataset-attribute-privacy", "distributional-attribute-privacy",
        "perfect-sample-privacy" (label: PUFFERFISH_KINDS);
    release: the release id; protects: the variables it is about;
    secrets: what is kept secret, as stated (ppercent.PPercentGuarantee.secrets;
        the protected attributes' means for attribute.AttributePrivacyGuarantee);
    assumptions: the data model it holds under (`assumption` of those classes);
    epsilon, delta: its parameters, when it has them;
    parameters: every other parameter as (name, value) pairs, e.g. p, laplace_scale,
        contributor, sigma2, n.
    """

    kind: str
    release: str
    protects: tuple[str, ...]
    secrets: str
    assumptions: str
    epsilon: Number | None
    delta: Number | None
    parameters: tuple[tuple[str, Any], ...]

    @property
    def label(self) -> str:
        return PUFFERFISH_KINDS.get(self.kind, self.kind)


@dataclass(frozen=True)
class RegisterSummary:
    """The register of a ledger past `summary_from()` releases, summarised.

    releases: how many the complete register holds (every release, cancelled ones too);
    file: the complete register's file name, beside the report (the page links it);
    shown: how many of the largest releases (by the whole-dataset figure) the page lists;
    entries(): every release's RegisterEntry, in recording order, one at a time (the CSV
        is written from it in chunks; not for templates)."""

    releases: int
    file: str
    shown: int
    entries: Callable[[], Iterator[RegisterEntry]] = field(compare=False, repr=False)


def register_entry(release: Release, families: Sequence[Family], cells=(), dataset_wide=None,
                   **steps) -> RegisterEntry:
    """One release of the register; `steps`: its later lifecycle (lifecycle_steps: published_by,
    ended), given here rather than by `dataclasses.replace`, which cost a fifth of a large register."""
    family = None if release.family is None else next((f for f in families if f.id == release.family), None)
    split = ""
    if family is not None:
        split = "random split" if family.partition is None else "partition by " + ", ".join(sorted(family.partition))
    return RegisterEntry(
        id=release.id,
        title=release.title,
        status=release.status.value,
        charged=release.status in CHARGED_STATUSES,
        recorded_at=aware(release.recorded_at),
        recorded_by=release.recorded_by,
        approved_at=aware(release.approved_at),
        approved_by=release.approved_by,
        published_at=aware(release.published_at),
        reads=tuple(sorted(release.reads)),
        exact=tuple(sorted(release.exact_variables)),
        mechanism=release.mechanism.name,
        parameters=tuple(release.mechanism.params),
        guarantees=tuple(guarantee_text_of(g) for g in release.guarantees),
        family=release.family,
        family_split=split,
        part=release.part,
        derived_from=tuple(release.derived_from),
        output_digest=getattr(release, "output_digest", None),
        pufferfish=tuple(PUFFERFISH_KINDS.get(g.kind, g.kind) for g in getattr(release, "pufferfish", ()) or ()),
        cells=tuple(cells),
        dataset_wide=dataset_wide,
        **steps,
    )


def guarantee_text_of(g: Guarantee) -> GuaranteeText:
    """A guarantee as the report's register shows it (`GuaranteeText`: its exact numbers kept)."""
    # no cache: a key holds what the guarantee protects, which differs from release to release
    # (the cache missed on nearly every one), and hashing its exact Fractions cost more than
    # this dataclass does
    return GuaranteeText(protects=tuple(sorted(g.protects)), notion=g.notion.value, epsilon=g.epsilon,
                         delta=g.delta, rho=g.rho, relation=g.relation.value)


def pufferfish_entries(releases: Sequence[Release]) -> tuple[PufferfishEntry, ...]:
    """The Pufferfish-family guarantees recorded with releases."""
    return tuple(pufferfish_entry(release.id, guarantee)
                 for release in releases for guarantee in getattr(release, "pufferfish", ()) or ())


def pufferfish_entry(release: str, guarantee) -> PufferfishEntry:
    """From a recorded Pufferfish guarantee (kind, protects, secrets, assumptions,
    epsilon, delta, parameters)."""
    return PufferfishEntry(
        kind=guarantee.kind,
        release=release,
        protects=tuple(sorted(guarantee.protects)),
        secrets=guarantee.secrets,
        assumptions=guarantee.assumptions,
        epsilon=getattr(guarantee, "epsilon", None),
        delta=getattr(guarantee, "delta", None),
        parameters=tuple(getattr(guarantee, "parameters", ()) or ()),
    )


def from_p_percent(release: str, guarantee) -> PufferfishEntry:
    """From ledger.mechanisms.ppercent.PPercentGuarantee (Bailie 2020)."""
    return PufferfishEntry(
        kind="p-percent", release=release, protects=tuple(guarantee.linked_variables),
        secrets=guarantee.secrets, assumptions=guarantee.assumption, epsilon=guarantee.epsilon, delta=None,
        parameters=(("p", guarantee.p), ("laplace_scale", guarantee.laplace_scale),
                    ("contributor", guarantee.contributor),
                    ("protected_contributors", guarantee.protected_contributors),
                    ("discriminative pairs", guarantee.pairs)),
    )


def from_attribute_privacy(release: str, guarantee) -> PufferfishEntry:
    """From ledger.mechanisms.attribute.AttributePrivacyGuarantee (Zhang et al., Def. 3)."""
    return PufferfishEntry(
        kind=guarantee.notion, release=release, protects=tuple(guarantee.secrets),
        secrets="the mean of each of " + ", ".join(guarantee.secrets), assumptions=guarantee.assumption,
        epsilon=guarantee.epsilon, delta=guarantee.delta,
        parameters=(("query", guarantee.query), ("sigma2", guarantee.sigma2), ("n", guarantee.n)),
    )
