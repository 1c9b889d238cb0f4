"""The claim registry: the paper's claims, then ours ("Beyond the paper"), each from its own module.

Adding a claim means adding a module to :mod:`reports.claims` (its ``CLAIM`` and check functions) and listing it
here, nothing else.
"""
from __future__ import annotations

from bma_verify.reports.claim import Check, Claim
from bma_verify.reports.claims import (bma_score_identity, prop1_invariance, thm1_construction, lemma3_strict_dpi,
                                       lemma4_loglik_gap, thm2_consistency, thm3_init_gradient, prop2_ds_quadratic,
                                       exp_fig2_attention, exp_fig3_parameters, exp_fig5_generalization,
                                       exp_fig6_column_alignment, exp_robustness, ext_dag_posterior,
                                       ext_dag_lemma4_sets, ext_dag_lemma3_sets, ext_dag_thm3_sets,
                                       ext_dag_construction, ext_dag_families, ext_dag_training,
                                       ext_selective_claim1, ext_selective_depth, ext_selective_fig3,
                                       footnote1_selective_induction)

#: The paper's claims, in the order of the paper.
PAPER = (bma_score_identity, prop1_invariance, thm1_construction, lemma3_strict_dpi, lemma4_loglik_gap,
         thm2_consistency, thm3_init_gradient, prop2_ds_quadratic, exp_fig2_attention, exp_fig3_parameters,
         exp_fig5_generalization, exp_fig6_column_alignment, exp_robustness)
#: Beyond the paper: our k-parent DAG extensions (the paper's open question 1), and the paper's footnote 1 about
#: the selective-induction task, checked here because it is a claim about another task.
BEYOND = (ext_dag_posterior, ext_dag_lemma4_sets, ext_dag_lemma3_sets, ext_dag_thm3_sets, ext_dag_construction,
          ext_dag_families, ext_dag_training, footnote1_selective_induction, ext_selective_fig3,
          ext_selective_claim1, ext_selective_depth)

CLAIMS: tuple[Claim, ...] = tuple(module.CLAIM for module in PAPER + BEYOND)
CLAIM_IDS: tuple[str, ...] = tuple(c.id for c in CLAIMS)

__all__ = ["CLAIMS", "CLAIM_IDS", "Check", "Claim", "get_claim"]


def get_claim(claim_id: str) -> Claim:
    for claim in CLAIMS:
        if claim.id == claim_id:
            return claim
    raise ValueError(f"claim must be one of {', '.join(CLAIM_IDS)}; got {claim_id!r}")
