"""fig3's runs are fig2's: fig3 reads the parameters of the same trained models (``exp-fig2-attention``'s plan)."""
from __future__ import annotations

from bma_verify.reports.claims.exp_fig2_attention.plan import RUNS

__all__ = ["RUNS"]
