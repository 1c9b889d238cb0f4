"""Claim ``prop1-invariance``: W + 1aᵀ gives the same A^(2); W + b1ᵀ does not. Its statement, readings, checks,
thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "prop1-invariance", "section": "paper", "kinds": ("symbolic", "exact", "model"),
                 "short": "W + 1aᵀ gives the same A^(2); W + b1ᵀ does not"}
