"""The claim registry: the paper's claims, then ours ("Beyond the paper"), each from its own module.

Adding a claim means adding a module to :mod:`reports.claims` (its ``CLAIM`` and check functions) and its entry to
:data:`reports.catalog.CLAIM_INDEX` (id, module, kinds of check, a one-line statement), nothing else. The registry
imports the modules the catalog names, in its order; the catalog alone answers ``check --list`` without them.
"""
from __future__ import annotations

from importlib import import_module

from bma_verify.reports.catalog import CLAIM_INDEX
from bma_verify.reports.claim import Check, Claim

#: The paper's claims, in the order of the paper.
PAPER = tuple(import_module(f"bma_verify.reports.claims.{e.module}") for e in CLAIM_INDEX if e.section == "paper")
#: Beyond the paper: our k-parent DAG extensions (the paper's open question 1), and the paper's footnote 1 about
#: the selective-induction task, checked here because it is a claim about another task.
BEYOND = tuple(import_module(f"bma_verify.reports.claims.{e.module}") for e in CLAIM_INDEX if e.section == "beyond")

CLAIMS: tuple[Claim, ...] = tuple(module.CLAIM for module in PAPER + BEYOND)
CLAIM_IDS: tuple[str, ...] = tuple(c.id for c in CLAIMS)

__all__ = ["CLAIMS", "CLAIM_IDS", "Check", "Claim", "get_claim"]


def get_claim(claim_id: str) -> Claim:
    for claim in CLAIMS:
        if claim.id == claim_id:
            return claim
    raise ValueError(f"claim must be one of {', '.join(CLAIM_IDS)}; got {claim_id!r}")
