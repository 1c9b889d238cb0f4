"""Claim ``ext-selective-fig3``: their task: the tree construction is the Bayes predictive. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-selective-fig3", "section": "beyond", "kinds": ("monte-carlo",),
                 "short": "their task: the tree construction is the Bayes predictive"}
