"""prop1-invariance: the exact check (random W, a, b: column shifts invisible, row shifts not) and its control; the
model check is exp-fig6-column-alignment's (tests/claims/test_exp_fig6_column_alignment.py)."""
from __future__ import annotations

import dataclasses

import bma_verify.reports.checks.trained as trained
import bma_verify.reports.claims.exp_fig6_column_alignment.claim as fig6
import bma_verify.reports.claims.prop1_invariance.claim as claim
from bma_verify.reports import builder
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle


def test_exact_check_passes_and_rejects_the_row_shift(tmp_path):
    outcome = claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.control.rejected and settle(outcome) == ("pass", "")


def test_exact_check_with_an_invariance_rule_accepting_every_shift_is_not_discriminating(monkeypatch, tmp_path):
    monkeypatch.setitem(claim.PROP1_DRAWS, "quick", 40)
    monkeypatch.setattr(claim, "shift_invisible", lambda changes: True)
    outcome = claim.exact_check(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert outcome.verdict == "pass" and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_model_check_cites_the_fig6_check():
    model = [check for check in claim.CLAIM.checks if check.kind == "model"][0]
    assert model.cites == "exp-fig6-column-alignment:model"
    assert model.run.__module__.endswith("exp_fig6_column_alignment.claim")


def test_model_check_reads_the_fig6_verdict_and_reason(monkeypatch):
    # reference: fig6's own record in the same report; at the quick tier it cannot decide and must not train
    def refuse(*args, **kwargs):
        raise AssertionError("the quick tier must not train fig6")

    monkeypatch.setattr(trained, "train_preset_runs", refuse)
    ctx = CheckContext(tier="quick", seed=0)
    cited = builder.check_entry([c for c in claim.CLAIM.checks if c.kind == "model"][0], ctx)
    own = builder.check_entry(fig6.CLAIM.checks[0], ctx)
    assert (cited["verdict"], cited["reason"]) == (own["verdict"], own["reason"]) == ("inconclusive", fig6.QUICK_REASON)


def test_symbolic_check_fails_when_its_derived_result_is_the_planted_perturbation(monkeypatch):
    # The control's wrong expression passed off as the derivation: the shared rule must read fail, with the
    # failing identities as the instance.
    real = claim.SYMBOLIC
    monkeypatch.setattr(claim, "SYMBOLIC", dataclasses.replace(
        real, derive=lambda *args: real.perturb(*args, perturbation=real.perturbation),
        verify=lambda rng, perturbation=None, **sizes: real.verify(rng, perturbation=perturbation or real.perturbation,
                                                                    **sizes)))
    outcome = claim.symbolic_check(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "fail" and outcome.instance["identities_failed"], outcome.summary
