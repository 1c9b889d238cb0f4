"""Claim ``exp-fig3-parameters``: Fig. 3: trained w_H peaks at 0, W_KQ block-diagonal, σ(W_OV) ≈ π. Its statement,
readings, checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "exp-fig3-parameters", "section": "paper", "kinds": ("model",),
                 "short": "Fig. 3: trained w_H peaks at 0, W_KQ block-diagonal, σ(W_OV) ≈ π"}
