"""Shared by the trained regression tests: rerun the quick tier's model checks of some claims, with the reference
report's seed, and compare each value (within the tolerance its check states), verdict and reason with
reports/reference/results.json. The claims are split over three test files so that two test workers share them."""
from __future__ import annotations

import json
import warnings

from bma_verify.reports.builder import run_claims
from bma_verify.reports.catalog import CLAIM_INDEX, REPORT_ORDER
from bma_verify.reports.core import CheckContext
from bma_verify.reports.float_path import cpu_identity, in_force
from bma_verify.reports.registry import CLAIMS
from bma_verify.reports.regression import REFERENCE_DIR, compare_results

#: The claim folders with a model check that REPORT_ORDER does not name (added since), rerun with "others".
FOLDER_MODEL_CLAIMS = tuple(e.id for e in CLAIM_INDEX if e.id not in REPORT_ORDER and "model" in e.kinds)
#: The claims each trained regression file reruns (together: every claim with a model check).
GROUPS = {
    "fig2_run": ("exp-fig2-attention", "exp-fig3-parameters", "thm2-consistency", "exp-fig5-generalization",
                 "exp-fig6-column-alignment", "prop1-invariance", "ext-selective-depth", "prop2-ds-quadratic"),
    "robustness": ("exp-robustness",),
    "others": ("ext-dag-training", "footnote1-selective-induction", "bma-score-identity",
               "thm1-construction", "thm3-init-gradient", "ext-dag-construction") + FOLDER_MODEL_CLAIMS,
}


def rerun_and_compare(group: str, figures_dir) -> list[str]:
    """What moved (empty when nothing did) when the model checks of ``GROUPS[group]`` are rerun. On another
    processor or float path than the reference's, a verdict that moves to or from INCONCLUSIVE (and a reason) is reported
    as a warning, not a failure, and seeds after the first are not compared (``compare_results``'s
    ``other_processor``)."""
    reference = json.loads((REFERENCE_DIR / "results.json").read_text())
    assert reference["tier"] == "quick"
    claims = [c for c in CLAIMS if c.id in GROUPS[group]]
    ctx = CheckContext(tier="quick", seed=reference["seed"], figures_dir=figures_dir)
    current = {"claims": run_claims(claims, ctx, kinds=("model",))}
    assert sum(len(c["checks"]) for c in current["claims"]) >= len(claims)
    environment = reference.get("environment", {})
    # the reference's processor *and* float path (a path pinned otherwise, e.g. ATEN_CPU_CAPABILITY=default, is
    # another machine as far as a run at a transition goes)
    here = (cpu_identity(), in_force())
    there = (environment.get("cpu"), {key: environment.get(key) for key in in_force()})
    settled = None if here[0] is not None and here == there else []
    moved = compare_results(reference, current, other_processor=settled)
    if settled:
        warnings.warn(f"run on {here}, the reference on {there}; settled differently:\n" + "\n".join(settled))
    return moved
