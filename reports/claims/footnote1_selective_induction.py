"""Claim footnote1-selective-induction."""
from bma_verify.reports.checks import ext_dag, selective
from bma_verify.reports.claim import Check, Claim

CLAIM = Claim("footnote1-selective-induction",
      "Footnote 1 (a claim of the paper): the BMA construction covers the selective-induction task of D'Angelo, "
      "Croce and Flammarion (ICLR 2025).",
      "Each sequence draws κ uniformly from K, x_{<κ} ~ μ (stationary), x_t ~ P*(·|x_{t−κ}); mapping one example = "
      "one window of the sequence and parent h' = t − κ (pad row μ), the tree BMA selector equals the "
      "Bayes-optimal predictive over lags, weights Π_{s<t} P*(x_s|x_{s−κ}) with μ(x_s) for s < κ.",
      (Check("exact", ext_dag.footnote1_selective_induction,
             "constructed vs Bayes-optimal predictive at every position, several lag sets; finding: dropping the μ "
             "terms is not Bayes-optimal"),
       Check("model", selective.footnote1_selective_training,
             "the tree task's structured model trained on the windows from a random initialisation: layer-2 "
             "attention vs the lag posterior and prediction vs the Bayes-optimal predictive on held-out "
             "sequences; control: the uniform-lag predictor (kernel known, lag not inferred)",
             reading="reproduction")), section="beyond")
