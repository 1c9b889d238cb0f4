"""docs/claims.md is generated from the registry and the reference report: it must not be stale."""
from bma_verify.reports import docs
from bma_verify.reports.registry import CLAIMS


def test_docs_claims_md_is_up_to_date():
    # Reference: a fresh rendering from reports/registry.py and reports/reference/results.json
    assert docs.DOCS_PATH.exists(), "run: python -m bma_verify.reports.docs"
    assert docs.DOCS_PATH.read_text() == docs.render(), "docs/claims.md is stale: run python -m bma_verify.reports.docs"


def test_docs_name_every_claim_and_reading():
    text = docs.render()
    for claim in CLAIMS:
        assert f"### {claim.id}" in text
        for check in claim.checks:
            assert f"| {check.kind} | {check.reading} |" in text
