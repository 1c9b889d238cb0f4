"""Claim ``thm1-construction``: the construction's A^(2) → the BMA posterior as β → ∞. Its statement, readings, checks,
thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "thm1-construction", "section": "paper", "kinds": ("symbolic", "exact", "model"),
                 "short": "the construction's A^(2) → the BMA posterior as β → ∞"}
