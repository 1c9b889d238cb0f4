"""The check of claim ext-dag-families (reports/claims/ext_dag_families/claim.py) at small sizes.

Compared against: the planted product-of-experts target of the control (it lies in every standard family, so the
rule must find no gap there), and, with the control made to pass, ``reports.core.settle`` withholding the pass
("not discriminating"). The families themselves are tested in tests/test_dag_families.py.
"""
import json

import pytest

import bma_verify.model.dag_families as M
import bma_verify.reports.claims.ext_dag_families.claim as E
from bma_verify.reports.core import CheckContext, jsonable, settle

SMALL = {"d": 3, "H": 5, "L_values": [1, 3, 8], "n_fit": 60, "n_eval": 60, "control_L_values": [1, 3],
         "control_n": 40}


@pytest.fixture()
def ctx(tmp_path, monkeypatch):
    monkeypatch.setitem(E.SIZES, "quick", SMALL)
    return CheckContext(tier="quick", seed=0, figures_dir=tmp_path)


def test_families_check_passes_and_rejects_its_control(ctx):
    out = E.ext_dag_families(ctx)
    assert out.verdict == "pass" and out.control.rejected
    assert settle(out) == ("pass", "")
    assert out.control.measured["max_in_sample_gap"] < E.FIT_RESOLUTION
    assert (ctx.figures_dir / "ext_dag_family_gaps.png").exists()
    json.dumps(jsonable(out.measured))
    json.dumps(jsonable(out.control.as_dict()))


def test_families_check_not_discriminating_when_the_control_passes(ctx, monkeypatch):
    # Make the control's target the real posterior: the rule then finds a gap there too and the pass is withheld.
    monkeypatch.setattr(E, "planted_poe_log_posterior", lambda W, k: M.exact_log_posterior)
    out = E.ext_dag_families(ctx)
    assert not out.control.rejected
    verdict, reason = settle(out)
    assert verdict == "inconclusive" and "not discriminating" in reason


def test_decide_families_inconclusive_when_the_fitter_misses():
    # Reference: a simplicial gap above the resolution means the fitter is not trusted.
    fam = {"gap_fit": [0.1, 0.2], "gap_fit_se": [0.01, 0.01], "converged": [True, True]}
    curve = {"L": [1, 3], "families": {"heads": fam, "poe": fam, "poe_slots": fam,
                                       "simplicial": {"gap_fit": [1e-3, 0.0], "gap_fit_se": [1e-4, 0.0],
                                                      "converged": [True, True]}}}
    assert E.decide_families(curve)["verdict"] == "inconclusive"
    curve["families"]["simplicial"]["gap_fit"] = [0.0, 0.0]
    assert E.decide_families(curve)["verdict"] == "pass"
    curve["families"]["poe"] = {"gap_fit": [0.1, 1e-12], "gap_fit_se": [0.01, 1e-13], "converged": [True, True]}
    assert E.decide_families(curve)["verdict"] == "fail"
