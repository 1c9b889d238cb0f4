"""What one training run is (``exp-*`` claims): :class:`TrainConfig` holds what every model shares, and its
``model`` field the model's own options, one dataclass per model kind.

    TrainConfig(d=5, H=10, L=10, K=32, model=StructuredOptions(w_L_delay=100))
    TrainConfig(d=5, H=6, L=4, K=16, model=TaskShapedOptions(position="relative", width=64))

:func:`config_record` flattens a config into the dict that ``metrics.json`` and checkpoints store (``"model"`` is
the kind's name, the options sit beside the shared fields).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import ClassVar

import torch

from bma_verify.model.two_layer import check_int_fields, check_output_rule
from bma_verify.model.gpt import GPT_POSITIONS, GPTConfig
from bma_verify.model.task_shaped import LAYER1_INITS, POSITIONS


@dataclass(frozen=True)
class _DisentangledOptions:
    """What the two disentangled models (structured, absolute-PE) share: the output rule, the random layer-1
    weights' scale and how the selector W_KQ trains."""

    output: str = "mixture"
    init_std: float = 0.1  # small random layer-1 weights: heads start near uniform and specialise together
    # W_KQ moves slower than the copier: a fast selector can saturate on a wrong feature before the copier heads
    # settle on same-position copies
    selector_lr_scale: float = 0.3
    selector_weight_decay: float | None = None  # AdamW weight decay of W_KQ (None: the run's weight_decay)

    def __post_init__(self) -> None:
        check_output_rule(self.output)
        if not self.selector_lr_scale > 0:
            raise ValueError(f"selector_lr_scale must be positive, got {self.selector_lr_scale!r}")
        if self.selector_weight_decay is not None and not self.selector_weight_decay >= 0:
            raise ValueError(f"selector_weight_decay must be >= 0 or None, got {self.selector_weight_decay!r}")

    def check_run(self, config: TrainConfig) -> None:
        """Checks that need the run's shared fields (none unless a subclass says so)."""


@dataclass(frozen=True)
class AbsoluteOptions(_DisentangledOptions):
    """A run of the absolute-PE disentangled transformer (model/absolute.py)."""

    kind: ClassVar[str] = "absolute"


@dataclass(frozen=True)
class StructuredOptions(_DisentangledOptions):
    """A run of the structured transformer (model/structured.py): the copier's RPE scale, its table of example
    offsets and when that table starts to learn."""

    kind: ClassVar[str] = "structured"
    beta: float = 10.0  # RPE logit scale of the copier
    # largest example offset with its own w_L weight; None: L, offsets beyond it share w_L[L]. Larger gives
    # offsets never seen in training weights of their own, which keep their initial values
    offset_range: int | None = None
    w_L_delay: int = 0  # steps during which w_L (which example a copier head reads) stays at its initial values

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.beta > 0:
            raise ValueError(f"beta must be a positive RPE logit scale, got {self.beta!r}")
        check_int_fields(self, (("w_L_delay", 0),))
        if self.offset_range is not None:
            check_int_fields(self, (("offset_range", 1),))

    def check_run(self, config: TrainConfig) -> None:
        if self.offset_range is not None and self.offset_range < config.L:
            raise ValueError(f"offset_range must be None or an integer >= L = {config.L}, got {self.offset_range!r}")


@dataclass(frozen=True)
class TaskShapedOptions:
    """A run of the task-shaped two-stream transformer (ours; model/task_shaped.py; its initialisation scales keep
    their defaults)."""

    kind: ClassVar[str] = "task-shaped"
    width: int = 64
    position: str = "absolute"  # "absolute" embeddings or "relative" biases per layer-1 head
    layer1_init: str = "mimetic"  # or the diagnostic "copy" (model/task_shaped.py)
    # the loss weighs example l by l^p (TaskShapedTransformer.loss; 0: the plain language-model objective)
    example_weight_power: float = 0.0
    rel_example_delay: int = 0  # relative positions: steps during which the example-offset biases stay put

    def __post_init__(self) -> None:
        check_int_fields(self, (("width", 1), ("rel_example_delay", 0)))
        if self.layer1_init not in LAYER1_INITS:
            raise ValueError(f"layer1_init must be one of {LAYER1_INITS}, got {self.layer1_init!r}")
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}")
        if isinstance(self.example_weight_power, bool) or not (isinstance(self.example_weight_power, (int, float))
                                                                and self.example_weight_power >= 0):
            raise ValueError(f"example_weight_power must be a number >= 0, got {self.example_weight_power!r}")

    def check_run(self, config: TrainConfig) -> None:
        """Checks that need the run's shared fields (the width's split over K heads is TaskShapedConfig's)."""


@dataclass(frozen=True)
class GPTOptions:
    """A run of the standard GPT on the flattened token stream (model/gpt.py; trained by model/gpt_training.py,
    which ignores ``K``): depth, width, heads and the position reading."""

    kind: ClassVar[str] = "gpt"
    depth: int = 2
    width: int = 64
    heads: int = 4
    position: str = "absolute"  # learned absolute embeddings, or "rope"

    def __post_init__(self) -> None:
        check_int_fields(self, (("depth", 1), ("width", 1), ("heads", 1)))
        if self.position not in GPT_POSITIONS:
            raise ValueError(f"position must be one of {GPT_POSITIONS}, got {self.position!r}")

    def check_run(self, config: TrainConfig) -> None:
        """The width must split into heads of an even size (RoPE rotates pairs): GPTConfig checks it."""
        GPTConfig(d=config.d, n_tokens=(config.L + 1) * config.H, depth=self.depth, width=self.width,
                  heads=self.heads, position=self.position)


ModelOptions = StructuredOptions | AbsoluteOptions | TaskShapedOptions | GPTOptions
#: Every model kind by name (the ``"model"`` entry of a config record).
MODEL_OPTIONS = {options.kind: options for options in (StructuredOptions, AbsoluteOptions, TaskShapedOptions,
                                                       GPTOptions)}
#: Former kind names, as checkpoints and metrics.json written before a rename store them, and what each is now:
#: "standard" was the task-shaped two-stream model's kind before it was named for what it is (it is not a standard
#: transformer; that is the GPT). A stored record's ``"model"`` is read through this map.
MODEL_KIND_ALIASES = {"standard": TaskShapedOptions.kind}


@dataclass
class TrainConfig:
    """One training run. Sizes follow docs/claims.md (d, H, L, K); ``test_L`` adds evaluations at other L'."""

    model: ModelOptions = field(default_factory=StructuredOptions)
    d: int = 5
    H: int = 10
    L: int = 10
    K: int = 24  # more heads than L: a spare head covers an example no other head locked onto
    alpha: float = 1.0  # Dirichlet concentration of π's rows
    eps: float = 0.0  # entrywise floor of π
    batch_size: int = 256
    steps: int = 2000
    lr: float = 0.03
    weight_decay: float = 0.0
    grad_clip: float = 1.0  # max gradient norm: an early burst in W_KQ can saturate the selector for good
    warmup: int = 50
    # decay of an exponential moving average of the weights; when > 0 the average, not the last iterate, is what
    # is evaluated, returned and checkpointed as the model (0: the last iterate)
    ema: float = 0.0
    eval_contexts: int = 2048
    eval_every: int = 100
    checkpoint_every: int = 500
    test_L: tuple[int, ...] = ()
    seed: int = 0
    device: str = "auto"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if not isinstance(self.model, tuple(MODEL_OPTIONS.values())):
            raise ValueError(f"model must be the options of one model kind ({', '.join(MODEL_OPTIONS)}: "
                             f"StructuredOptions, AbsoluteOptions, TaskShapedOptions, GPTOptions), got {self.model!r}")
        check_int_fields(self, (("d", 2), ("H", 2), ("L", 1), ("K", 1), ("batch_size", 1), ("steps", 0),
                               ("eval_contexts", 1), ("eval_every", 1), ("checkpoint_every", 1), ("warmup", 0),
                               ("seed", 0)))
        self.test_L = tuple(int(x) for x in self.test_L)
        if any(x < 1 for x in self.test_L):
            raise ValueError(f"test_L must hold integers >= 1 (test-time context sizes L'), got {self.test_L}")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        if not (self.lr > 0 and self.alpha > 0 and self.weight_decay >= 0 and self.grad_clip > 0):
            raise ValueError("lr, alpha and grad_clip must be positive and weight_decay non-negative")
        if not 0 <= self.ema < 1:
            raise ValueError(f"ema must be a decay in [0, 1) (0: no weight average), got {self.ema!r}")
        self.model.check_run(self)
        resolve_device(self.device)


def config_record(config: TrainConfig) -> dict:
    """``config`` as one flat dict: ``"model"`` the kind's name, then the shared fields, then the model's options
    (what ``metrics.json`` and checkpoints store)."""
    shared = {f.name: getattr(config, f.name) for f in fields(config) if f.name != "model"}
    return {"model": config.model.kind, **shared, **asdict(config.model)}


def with_changes(config: TrainConfig, **changes) -> TrainConfig:
    """``config`` with each change applied where its field lives, among the shared fields or the model's options:
    ``with_changes(run, steps=600, example_weight_power=0)`` for a task-shaped run."""
    shared = {f.name for f in fields(config)}
    own = {name: value for name, value in changes.items() if name not in shared}
    rest = {name: value for name, value in changes.items() if name in shared}
    return replace(config, **rest) if not own else replace(config, model=replace(config.model, **own), **rest)


def resolve_device(device: str) -> torch.device:
    """'auto' → CUDA when present, else CPU; 'cuda' on a machine without CUDA raises ValueError."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for but no CUDA device is present; use --device cpu or auto")
        return torch.device("cuda")
    raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
