"""Claim ``exp-fig2-attention``: Fig. 2: trained A^(2) puts its mass on the true parent. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "exp-fig2-attention", "section": "paper", "kinds": ("model",),
                 "short": "Fig. 2: trained A^(2) puts its mass on the true parent"}
