"""The trained-model side of bma-verify (SPEC.md §3): the two-layer transformers, Theorem 1's construction,
online training against BMA, analyses and the paper's figures. PyTorch; CPU by default, CUDA when asked."""
from bma_verify.model.absolute import AbsoluteConfig, AbsolutePETransformer
from bma_verify.model.construction import bma_construction
from bma_verify.model.standard import StandardConfig, StandardTransformer
from bma_verify.model.structured import StructuredConfig, StructuredTransformer
from bma_verify.model.training import TrainConfig, TrainRun, train

__all__ = [
    "AbsoluteConfig", "AbsolutePETransformer", "StandardConfig", "StandardTransformer", "StructuredConfig",
    "StructuredTransformer", "TrainConfig", "TrainRun", "bma_construction", "train",
]
