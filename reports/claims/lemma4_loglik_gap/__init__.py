"""Claim ``lemma4-loglik-gap``: log-likelihood gap of pa over h' = MI gap + E KL > 0. Its statement, readings, checks,
thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "lemma4-loglik-gap", "section": "paper", "kinds": ("symbolic", "exact", "monte-carlo"),
                 "short": "log-likelihood gap of pa over h' = MI gap + E KL > 0"}
