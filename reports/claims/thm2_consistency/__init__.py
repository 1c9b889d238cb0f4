"""Claim ``thm2-consistency``: A^(2) → e_pa(h) as the number of examples L → ∞. Its statement, readings, checks,
thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "thm2-consistency", "section": "paper", "kinds": ("monte-carlo", "symbolic", "model"),
                 "short": "A^(2) → e_pa(h) as the number of examples L → ∞"}
