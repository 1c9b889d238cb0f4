"""Regression: rerun the quick tier's symbolic, exact and Monte Carlo checks and compare every measured value with
the committed reference report (reports/reference/results.json), within the tolerance each check states.

Model checks are not rerun here (minutes of training); their values and tolerances (seed spread) are in the
reference, and `bma-verify report` reruns them.
"""
import json

import pytest

from reports.builder import run_claims
from reports.core import CheckContext
from reports.registry import CLAIMS
from reports.regression import REFERENCE_DIR, compare_results

NUMERIC_KINDS = ("symbolic", "exact", "monte-carlo")


@pytest.mark.slow
def test_quick_tier_numeric_results_match_the_reference(tmp_path):
    reference = json.loads((REFERENCE_DIR / "results.json").read_text())
    assert reference["tier"] == "quick"
    ctx = CheckContext(tier="quick", seed=reference["seed"], figures_dir=tmp_path)
    current = {"claims": run_claims(CLAIMS, ctx, kinds=NUMERIC_KINDS)}
    rerun = sum(len(c["checks"]) for c in current["claims"])
    assert rerun >= 15, "the numeric checks of the quick tier did not run"
    moved = compare_results(reference, current)
    print("\n".join(["values that moved against reports/reference:"] + moved) if moved else "nothing moved")
    assert not moved, "\n".join(moved)


def test_reference_report_is_complete_and_small():
    reference = json.loads((REFERENCE_DIR / "results.json").read_text())
    assert {c["id"] for c in reference["claims"]} == {c.id for c in CLAIMS}
    assert all(c["checks"] for c in reference["claims"])
    for name in ("REPORT.md", "report.html"):
        assert (REFERENCE_DIR / name).exists()
    figures = list((REFERENCE_DIR / "figures").glob("*.png"))
    assert len(figures) >= 6
    assert all(f.stat().st_size <= 300 * 1024 for f in figures), [f.name for f in figures if f.stat().st_size > 300 * 1024]
