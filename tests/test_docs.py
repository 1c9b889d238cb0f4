"""docs/claims.md is generated from the registry and the reference report: it must not be stale."""
import re

import pytest

from bma_verify.reports import docs
from bma_verify.reports.registry import CLAIMS
from bma_verify.reports.render import verdict_label


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
    table = docs.verdict_table(docs.reference_results())
    assert all(f"| [`{claim.id}`](" in table for claim in CLAIMS)


def _rows(table: str) -> dict[str, list[str]]:
    """{claim id: its cells} of the README's table (its header, rule and section rows left out)."""
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        found = re.match(r"\[`([\w-]+)`\]", cells[0])
        if found:
            rows[found.group(1)] = cells
    return rows


def test_readme_table_gives_each_verdict_bare_with_links_to_its_detail_and_a_short_reason():
    # Reference: the reference report's claims, the headings of REPORT.md and docs/claims.md, render.verdict_label
    reference = docs.reference_results()
    rows = _rows(docs.verdict_table(reference))
    report = (docs.REFERENCE_DIR / "REPORT.md").read_text().splitlines()
    claims_md = docs.DOCS_PATH.read_text().splitlines()
    assert list(rows) == [c["id"] for c in reference["claims"]]
    for claim in reference["claims"]:
        claim_cell, verdict_cell, why, *_ = rows[claim["id"]]
        assert claim_cell == f"[`{claim['id']}`](docs/claims.md#{claim['id']})" and f"### {claim['id']}" in claims_md
        assert verdict_cell == f"[{verdict_label(claim, reasons=False)}](reports/reference/REPORT.md#{claim['id']})"
        assert f"## {claim['id']}" in report
        assert verdict_label(claim).startswith(verdict_label(claim, reasons=False))
        # a few words per reason, each the head of a reason the report gives in full
        for reason in filter(None, why.strip("—").split("; ")):
            assert len(reason.split()) <= 6 and any(r.startswith(reason.split(": ")[-1]) or reason in r
                                                   for r in claim.get("reasons", []) + claim.get("assumptions", []))
        assert (why != "—") == (claim["verdict"] == "inconclusive" and bool(claim.get("reasons"))
                                or any(a.startswith("reading ") for a in claim.get("assumptions", [])))


@pytest.mark.parametrize("reason, short", [
    ("quick tier cannot decide: one seed (d = 20) costs 67 s; the full tier decides", "quick tier cannot decide"),
    ("reading R3: count rule undecided: 0 of 3 seeds meet the rule (needs 3 of 3)", "reading R3: count rule undecided"),
    ("not converged (2 of 3 seeds still improving)", "not converged"),
    ("standard transformer (gpt-d2-absolute): count rule undecided, misses unconfirmed: 0 of 3 seeds meet the rule",
     "count rule undecided, misses unconfirmed"),
])
def test_a_short_reason_is_the_head_of_the_reason(reason, short):
    assert docs.short_reason(reason) == short


def test_render_readme_replaces_only_the_table():
    start, end = docs.README_MARKERS
    readme = f"before\n{start}\nold table\n{end}\nafter\n"
    out = docs.render_readme(readme)
    assert out.startswith(f"before\n{start}\n| claim |") and out.endswith(f"{end}\nafter\n")
    assert "old table" not in out and docs.render_readme(out) == out


def test_readme_opens_with_what_install_and_run_in_under_30_lines_and_documents_pip_install():
    # issue 42: the README was dense and `make` was the only install path
    top = docs.README_PATH.read_text().splitlines()[:30]
    headings = [line for line in top if line.startswith("#")]
    assert any("install" in h.lower() and "run" in h.lower() for h in headings), headings
    assert any(line.startswith("pip install") and "'.[test]'" in line for line in top)
    assert any(line.startswith("pip install") and line.split("#")[0].rstrip().endswith(" .") for line in top)
    assert any(line.startswith("bma-verify check") for line in top)
