"""The trained-model side of bma-verify (SPEC.md §3): the two-layer transformers, Theorem 1's construction,
online training against BMA, analyses and the paper's figures. PyTorch; CPU by default, CUDA when asked."""
from model.absolute import AbsoluteConfig, AbsolutePETransformer
from model.construction import bma_construction
from model.standard import StandardConfig, StandardTransformer
from model.structured import StructuredConfig, StructuredTransformer
from model.training import TrainConfig, TrainRun, train

__all__ = [
    "AbsoluteConfig", "AbsolutePETransformer", "StandardConfig", "StandardTransformer", "StructuredConfig",
    "StructuredTransformer", "TrainConfig", "TrainRun", "bma_construction", "train",
]
