"""The certificate names only what produced the report's figures (docs/explanation/model.md#composition: the zCDP conversion is
named in every report whose figures went through it). A pure-only ledger's figures are sums of pure
epsilons (Tan Prop 3.4): no zCDP total is converted, so its certificate names no Canonne-Kamath-Steinke
(2020) conversion; a ledger with a Gaussian (a rho total, converted at the dataset's delta) names it."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from test_report_helpers import DEMO_TIME, demo_ledger, record, rendered

from ledger.accounting.spend import CONVERSION_NAME
from ledger.reporting.cap_section import CapEntry
from ledger.reporting.certificate import with_conversion
from ledger.operations.table_view import Basis

from support import acting_as

TEXT_FORMATS = ("html", "md", "tex")

GAUSSIAN = """\
dataset: census
releases:
  - id: noisy-age
    reads: [age]
    mechanism: {name: gaussian, sigma: 4, sensitivity: 1}
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return demo_ledger(tmp_path_factory.mktemp("pure"))


def certificate_part(text: str, fmt: str) -> str:
    """The certificate: up to the risk table's heading."""
    end = {"html": '<nav class="toc">', "md": "## Privacy loss by variable", "tex": "Privacy loss by variable"}[fmt]
    return text[:text.index(end)]


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_pure_only_report_names_no_conversion(demo, fmt):
    text = rendered(demo, "census", fmt).decode("utf-8")
    assert "pure epsilon (every charged guarantee is pure" in certificate_part(text, fmt)
    assert "Conversion" not in certificate_part(text, fmt)
    assert "Canonne" not in text and "CKS" not in text


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_report_with_a_zcdp_total_names_the_conversion_at_its_delta(tmp_path, fmt):
    url = demo_ledger(tmp_path)
    with acting_as("steward"):
        record(url, tmp_path, "gaussian.yaml", GAUSSIAN, DEMO_TIME + timedelta(hours=1))
    certificate = html.unescape(certificate_part(rendered(url, "census", fmt).decode("utf-8"), fmt))
    assert "Conversion" in certificate and CONVERSION_NAME in certificate
    assert "at delta = " in certificate.split("Conversion")[1].splitlines()[0]


def test_the_conversion_is_named_when_an_accountant_shown_converts():
    """A pure-only ledger whose total row or one of whose caps takes the Rényi figure (converted by
    CKS 2020, Prop 12) names the conversion; the PLD's own figure, the basic sums, or a Gaussian-DP
    cap (converted by Dong, Roth and Su, not CKS) do not."""
    from fractions import Fraction

    from ledger.reporting.certificate import Certificate

    def cert(basis: Basis) -> Certificate:
        return Certificate(dataset="d", description="", variables=1, releases=1, charged=1, generated_at=DEMO_TIME,
                           head="", chain_ok=True, events=1, problems=(), basis=basis, conversion=None,
                           delta=Fraction(1, 10**9), epsilon=Fraction(1), rho=Fraction(1, 2), notion="pure")

    def cap(decided_by: str | None) -> CapEntry:
        return CapEntry(name="c", subset=("x",), whole_dataset=False, unit="epsilon at delta",
                        delta=Fraction(1, 10**9), limit=Fraction(5), current=Fraction(1), headroom=Fraction(4),
                        status="ok", drivers=(), decided_by=decided_by)

    pure = Basis(pure=True, delta=Fraction(1, 10**9))
    assert with_conversion(cert(pure), [cap(None), cap("basic, adaptive"), cap("gdp, adaptive")]).conversion is None
    assert with_conversion(cert(Basis(True, pure.delta, ("basic", "pld"))), []).conversion is None
    assert with_conversion(cert(Basis(True, pure.delta, ("basic", "rdp"))), []).conversion == CONVERSION_NAME
    assert with_conversion(cert(pure), [cap("rdp, adaptive")]).conversion == CONVERSION_NAME
    assert with_conversion(cert(Basis(False, pure.delta)), []).conversion == CONVERSION_NAME
