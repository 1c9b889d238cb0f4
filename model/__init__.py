"""The trained-model side of bma-verify: the two-layer transformers, Theorem 1's construction, online training
against BMA, analyses and the paper's figures. PyTorch; CPU by default, CUDA when asked."""
from bma_verify.model.absolute import AbsoluteConfig, AbsolutePETransformer
from bma_verify.model.construction import bma_construction
from bma_verify.model.structured import StructuredConfig, StructuredTransformer
from bma_verify.model.task_shaped import TaskShapedConfig, TaskShapedTransformer
from bma_verify.model.train_config import AbsoluteOptions, StructuredOptions, TaskShapedOptions, TrainConfig
from bma_verify.model.training import TrainRun, train

__all__ = [
    "AbsoluteConfig", "AbsoluteOptions", "AbsolutePETransformer", "StructuredConfig", "StructuredOptions",
    "StructuredTransformer", "TaskShapedConfig", "TaskShapedOptions", "TaskShapedTransformer", "TrainConfig",
    "TrainRun", "bma_construction", "train",
]
