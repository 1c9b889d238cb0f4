"""The claim registry: the paper's claims, then ours ("Beyond the paper"), each from its claim folder.

Adding a claim means adding a claim folder ``reports/claims/<claim_id>/`` (``__init__.py`` with its
``CATALOG_ENTRY``, ``claim.py`` with its ``CLAIM`` and checks, optionally ``plan.py``) and its test file, nothing else:
:data:`reports.catalog.CLAIM_INDEX` discovers it (docs/adding-a-claim.md). The registry imports the modules the
catalog names, in its order; the catalog alone answers ``check --list`` without them.
"""
from __future__ import annotations

from importlib import import_module

from bma_verify.reports.catalog import CLAIM_INDEX, CLAIMS_PACKAGE, ClaimEntry
from bma_verify.reports.claim import Check, Claim


def load_claim(entry: ClaimEntry) -> Claim:
    """The ``CLAIM`` of ``entry``'s module, which must be the claim the entry names (id, section, kinds of check)."""
    claim = import_module(f"{CLAIMS_PACKAGE}.{entry.module}").CLAIM
    kinds = tuple(dict.fromkeys(check.kind for check in claim.checks))
    if (claim.id, claim.section, kinds) != (entry.id, entry.section, entry.kinds):
        raise ValueError(f"{entry.module}: CLAIM must match its catalog entry (id {entry.id!r}, section "
                         f"{entry.section!r}, kinds {entry.kinds}); got {claim.id!r}, {claim.section!r}, {kinds}")
    return claim


def load_claims(entries: tuple[ClaimEntry, ...]) -> tuple[Claim, ...]:
    """The claims of ``entries`` (:func:`reports.catalog.claim_index`), in their order."""
    return tuple(load_claim(entry) for entry in entries)


CLAIMS: tuple[Claim, ...] = load_claims(CLAIM_INDEX)
CLAIM_IDS: tuple[str, ...] = tuple(c.id for c in CLAIMS)

__all__ = ["CLAIMS", "CLAIM_IDS", "Check", "Claim", "get_claim", "load_claims"]


def get_claim(claim_id: str) -> Claim:
    for claim in CLAIMS:
        if claim.id == claim_id:
            return claim
    raise ValueError(f"claim must be one of {', '.join(CLAIM_IDS)}; got {claim_id!r}")
