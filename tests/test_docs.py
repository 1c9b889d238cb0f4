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


def test_readme_verdict_table_is_the_reference_reports():
    # Reference: the verdict table rendered from reports/reference/results.json between the README's markers
    readme = docs.README_PATH.read_text()
    assert all(marker in readme for marker in docs.README_MARKERS)
    assert readme == docs.render_readme(readme), "README's verdict table is stale: run make reference"
    table = docs.verdict_table(docs._reference())
    assert all(f"| `{claim.id}` |" in table for claim in CLAIMS)


def test_render_readme_replaces_only_the_table():
    start, end = docs.README_MARKERS
    readme = f"before\n{start}\nold table\n{end}\nafter\n"
    out = docs.render_readme(readme)
    assert out.startswith(f"before\n{start}\n| claim |") and out.endswith(f"{end}\nafter\n")
    assert "old table" not in out and docs.render_readme(out) == out
