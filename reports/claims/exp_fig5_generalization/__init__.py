"""Claim ``exp-fig5-generalization``: Fig. 5: trained at small L, L_pa stays near BMA at other L'. Its statement,
readings, checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "exp-fig5-generalization", "section": "paper", "kinds": ("model",),
                 "short": "Fig. 5: trained at small L, L_pa stays near BMA at other L'"}
