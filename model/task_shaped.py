"""The task-shaped transformer (ours): two streams, two layers, pre-norm, FFNs and a summed residual, with
attention masks and relative biases shaped to the task (a diagnostic of ``exp-robustness``; the standard
transformer of Appendix G is the GPT of model/gpt.py).

Positions (``TaskShapedConfig.position``): "absolute" sums token + example index + position embeddings (GPT-2's
way); "relative" keeps only the token in the residual stream and gives every layer-1 head a learned bias over the
key's offset from its row, u_k[l − l'] + v_k[h − h'] (T5's relative bias, Raffel et al. 2020, on the two axes of the
(example, position) grid, as Swin's 2-D bias, Liu et al. 2021). exp-robustness trains the relative one. To predict
x^l_h without seeing it the model keeps two streams (the two-stream attention of XLNet, Yang et al. 2019): a
*content* stream that holds the real tokens, and a *query* stream whose row (l, h) holds a [MASK] token at (example
l, position h). Layer 1 (K heads), in raster order: query row (l, h) and content row (l, h) both attend to the
content of every earlier example and of their own example before h (a content row never attends to itself; its token
is already in its residual stream). Layer 2 (one head, the parent selector A^(2)): query row (l, h) attends to
content rows (l, h'), h' < h. Each layer: x + Attn(LN(x)), then x + FFN(LN(x)); output through a final LayerNorm and
an unembedding (the usual logit output). ``forward`` returns A^(2) and the log-probabilities of the query example
only; ``loss`` is the standard language-model objective, −log f(x^l_h) averaged over every example (context and
query) and h >= 1, each example read from the ones before it. Example 2 read from example 1 alone is the easy case
of "copy the same position of an earlier example", so every batch carries that curriculum.

The architecture can express BMA's parent selection exactly with either positions: tests/test_model_task_shaped.py
sets weights by hand (head k copies x^k_h from the same position h, layer 2 scores Σ_k log π(copy_k(h) |
copy_k(h'))) and gets A^(2) = the BMA posterior to 1e-4.

Its initialisation (:class:`TaskShapedConfig`) makes copies of the same position exist at step 0, which a pairing
signal in layer 2 needs; why, and what else was tried: docs/notes/exp-robustness.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bma_verify.model.two_layer import TwoLayerModel, causal_softmax, check_int_fields


LAYER1_INITS = ("mimetic", "copy")
POSITIONS = ("absolute", "relative")
#: layer1_init "copy": query-bias x key-projection gain on the target example, and the position-match gain. At
#: step 0 each head then puts > 0.99 of its attention on its (example, position) (tests/test_model_task_shaped.py).
COPY_GAIN, POSITION_GAIN = 6.0, 2.0
#: qk_gain when TaskShapedConfig leaves it None, by position encoding (see TaskShapedConfig)
DEFAULT_QK_GAIN = {"absolute": 4.0, "relative": 0.5}


@dataclass
class TaskShapedConfig:
    """d, max_H, max_L (largest L), K layer-1 heads, width (divisible by K), ffn_mult; the initialisation scales.

    position : "absolute" (learned example and position embeddings summed into the tokens, as in GPT-2) or
        "relative" (no position in the residual stream; every layer-1 head adds a learned bias over the key's
        offset from the row, u_k[l − l'] + v_k[h − h'], as T5 (Raffel et al. 2020) does over one axis and Swin (Liu
        et al. 2021) over two; layer 2 reads content only)
    qk_gain : layer 1 starts with W_Q = W_K, entries N(0, qk_gain² / width) (mimetic). With absolute positions
        (default 4.0) every head then prefers keys at its own position, so same-position copies exist at step 0;
        with relative ones (default 0.5) it only adds a mild preference for keys holding a token like the row's
        own, which must not drown the position bias (at 4.0 the relative model stalled; docs/notes/exp-robustness.md)
    relative_example_std : relative positions: u_k drawn N(0, std²), so that at step 0 the heads lean to different
        example offsets (as the structured copier's random w_L do); nothing says which head should take which
    relative_position_slope : relative positions: v_k starts at −slope · |h − h'| (ALiBi's shape, Press et al.
        2022): every head starts preferring the same position of whichever example it leans to; both tables learn
    token_std : std of the token embeddings (absolute positions are N(0, 1)); below 1, so that at step 0 a content
        row is drawn to the same position of other examples more than to keys that hold its own token
    example_scale, example_freq : absolute positions: example l starts as example_scale · [cos(ω l), sin(ω l)], ω
        evenly spaced in [0, example_freq] (sinusoids, Vaswani et al. 2017): nearby examples look alike, so at step
        0 a row's same-position copy leans to the most recent examples, and query and content rows copy the same
        example
    layer1_init : "mimetic" (the above: nothing about which example to copy is given) or "copy", a diagnostic
        that starts layer 1 as the copier of the hand-set BMA model: from every row (l, h) with l > k, head k
        attends to position h of example k mod max_L (query bias COPY_GAIN against the key's projection on a
        random example embedding, plus a position match of gain POSITION_GAIN through orthonormal directions;
        needs width / K > max_H and absolute positions; the mimetic draws above are overwritten).
        Every weight still trains; layer 2, the parent selector, starts random. It asks whether the selector is
        learned once copies exist, apart from whether the copies form.
    """

    d: int
    max_H: int
    max_L: int
    K: int
    width: int = 64
    ffn_mult: int = 4
    position: str = "absolute"
    qk_gain: float | None = None
    token_std: float = 0.5
    example_scale: float = 1.0
    example_freq: float = 0.6
    relative_example_std: float = 4.0
    relative_position_slope: float = 4.0
    layer1_init: str = "mimetic"

    def __post_init__(self) -> None:
        check_int_fields(self, (("d", 2), ("max_H", 2), ("max_L", 1), ("K", 1), ("width", 1), ("ffn_mult", 1)))
        if self.width % self.K:
            raise ValueError(f"width must be divisible by K = {self.K}, got {self.width}")
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}")
        if self.layer1_init not in LAYER1_INITS:
            raise ValueError(f"layer1_init must be one of {LAYER1_INITS}, got {self.layer1_init!r}")
        if self.layer1_init == "copy" and self.position != "absolute":
            raise ValueError(f"layer1_init 'copy' needs position 'absolute', got {self.position!r}")
        if self.layer1_init == "copy" and self.width // self.K <= self.max_H:
            raise ValueError(f"layer1_init 'copy' needs a head size width / K > max_H = {self.max_H}, "
                             f"got {self.width // self.K}")
        scales = {name: getattr(self, name) for name in ("token_std", "example_scale", "example_freq",
                                                         "relative_example_std", "relative_position_slope")}
        scales["qk_gain"] = self.initial_qk_gain
        if not all(value >= 0 for value in scales.values()):
            raise ValueError(f"{', '.join(scales)} must be >= 0, got {list(scales.values())}")

    @property
    def initial_qk_gain(self) -> float:
        """qk_gain, or its default for the position encoding when None (derived, so that ``replace(config,
        position=...)`` takes the new encoding's default)."""
        return DEFAULT_QK_GAIN[self.position] if self.qk_gain is None else self.qk_gain


class FeedForward(nn.Module):
    def __init__(self, width: int, mult: int):
        super().__init__()
        self.up = nn.Linear(width, mult * width)
        self.down = nn.Linear(mult * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class TaskShapedTransformer(TwoLayerModel):
    """Two-stream, two-layer pre-norm transformer; layer 2 is a single head so A^(2) is one matrix."""

    def __init__(self, config: TaskShapedConfig, *, generator: torch.Generator | None = None):
        super().__init__()
        self.config = c = config
        self.d, self.K = c.d, c.K
        w = c.width
        self.tok = nn.Embedding(c.d + 1, w)  # token c.d is [MASK]
        if c.position == "absolute":
            self.ex = nn.Embedding(c.max_L + 1, w)
            self.pos = nn.Embedding(c.max_H, w)
        else:  # per layer-1 head: a bias over the example offset 0..max_L and over the position offset
            self.rel_example = nn.Parameter(torch.zeros(c.K, c.max_L + 1))
            self.rel_position = nn.Parameter(torch.zeros(c.K, 2 * c.max_H - 1))  # index h − h' + max_H − 1
        self.ln1, self.ln1_kv = nn.LayerNorm(w), nn.LayerNorm(w)
        self.q1, self.k1, self.v1, self.o1 = (nn.Linear(w, w) for _ in range(4))
        self.ln1_ffn, self.ffn1 = nn.LayerNorm(w), FeedForward(w, c.ffn_mult)
        self.ln2, self.ln2_kv = nn.LayerNorm(w), nn.LayerNorm(w)
        self.q2, self.k2, self.v2, self.o2 = (nn.Linear(w, w) for _ in range(4))
        self.ln2_ffn, self.ffn2 = nn.LayerNorm(w), FeedForward(w, c.ffn_mult)
        self.ln_f, self.unembed = nn.LayerNorm(w), nn.Linear(w, c.d)

        def normal(shape, std):  # from the caller's generator: reproducible, no global seed
            return torch.randn(shape, generator=generator) * std

        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Linear):  # unit-scale activations (GPT-2's 0.02 left every path near zero)
                    m.weight.copy_(normal(m.weight.shape, 1 / math.sqrt(m.in_features)))
                    m.bias.zero_()
            self.tok.weight.copy_(normal(self.tok.weight.shape, c.token_std))
            if c.position == "absolute":
                self.pos.weight.copy_(normal(self.pos.weight.shape, 1.0))
                angle = torch.arange(c.max_L + 1)[:, None] * torch.linspace(0, c.example_freq, w // 2)
                self.ex.weight.zero_()  # an odd width leaves its last column zero
                self.ex.weight[:, :2 * (w // 2)] = c.example_scale * torch.cat([angle.cos(), angle.sin()], 1)
            self.q1.weight.copy_(normal((w, w), c.initial_qk_gain / math.sqrt(w)))
            self.k1.weight.copy_(self.q1.weight)
            if c.position == "relative":
                self.rel_example.copy_(normal(self.rel_example.shape, c.relative_example_std))
                offsets = torch.arange(1 - c.max_H, c.max_H).abs()
                self.rel_position.copy_(-c.relative_position_slope * offsets.expand(c.K, -1))
            if c.layer1_init == "copy":
                self._copy_init(normal)

    def _copy_init(self, normal) -> None:
        """Layer 1 as the BMA copier: head k reads position h of example k mod max_L (``layer1_init="copy"``)."""
        c, w = self.config, self.config.width
        hs = w // c.K
        self.ex.weight.copy_(normal(self.ex.weight.shape, 1.0))  # random: one direction per example
        positions = self.pos.weight / self.pos.weight.norm(dim=1, keepdim=True)  # (max_H, w)
        self.q1.bias.zero_()
        for k in range(c.K):
            first = k * hs
            target = self.ex.weight[k % c.max_L]
            self.q1.weight[first] = 0.0  # row `first` of head k: a constant query against "is example k"
            self.q1.bias[first] = COPY_GAIN
            self.k1.weight[first] = COPY_GAIN * target / target.norm()
            basis, _ = torch.linalg.qr(normal((hs - 1, c.max_H), 1.0))  # (hs-1, max_H), orthonormal columns
            self.q1.weight[first + 1:first + hs] = POSITION_GAIN * basis @ positions  # same position: largest
            self.k1.weight[first + 1:first + hs] = self.q1.weight[first + 1:first + hs]

    def forward(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
        context, query = self.checked_tokens(context, query)
        log_att, log_probs = self._examples(context, query, all_examples=False)
        return log_att[:, 0], log_probs[:, 0]  # (B, H, H), (B, H, d)

    def example_log_probs(self, context, query) -> tuple[torch.Tensor, torch.Tensor]:
        """(log A^(2) (B, L+1, H, H), log-probs (B, L+1, H, d)) of every example l, each read from examples < l and
        its own prefix x^l_{<h} only (index L is the query: equal to ``forward``)."""
        context, query = self.checked_tokens(context, query)
        return self._examples(context, query, all_examples=True)

    def loss(self, context, query, *, example_weight_power: float = 0.0) -> torch.Tensor:
        """−log f(x^l_h) over every example l = 1..L+1, positions h >= 1 and the batch (nats per token): the mean
        over positions and batch of example l, weighted by l^p / Σ_l' l'^p (p = ``example_weight_power``).

        p = 0 is the standard language-model objective (the mean over every term): example l is predicted from
        the examples before it, exactly as the query is from the context; example 2 read from example 1 alone is an
        easy, strong signal for "copy the same position of an earlier example". p > 0 leans the objective to the
        later examples: an example offset of L exists only in the query example's terms (1 / (L+1) of the plain
        objective), so the heads that must copy the oldest example get little of its gradient (what p = 3 changed:
        docs/notes/exp-robustness.md). Evaluation (``forward``, query loss, A^(2)) reads the query only.
        """
        if isinstance(example_weight_power, bool) or not example_weight_power >= 0:
            raise ValueError(f"example_weight_power must be a number >= 0, got {example_weight_power!r}")
        log_probs = self.example_log_probs(context, query)[1]  # (B, L+1, H, d)
        context, query = self.checked_tokens(context, query)
        tokens = torch.cat([context, query[:, None, :]], dim=1)  # (B, L+1, H)
        picked = log_probs.gather(-1, tokens[..., None])[..., 0][..., 1:]  # (B, L+1, H-1)
        if example_weight_power == 0:
            return -picked.mean()
        weights = torch.arange(1, picked.shape[1] + 1, dtype=picked.dtype, device=picked.device)
        weights = weights ** example_weight_power
        return -(picked.mean(dim=(0, 2)) * (weights / weights.sum())).sum()

    def _examples(self, context: torch.Tensor, query: torch.Tensor, *, all_examples: bool
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """(log A^(2) (B, E, H, H), log-probs (B, E, H, d)) of the last example (E = 1) or of all L+1 (E = L+1)."""
        B, L, H = context.shape
        c = self.config
        if L > c.max_L or H > c.max_H:
            raise ValueError(f"context must have L <= max_L = {c.max_L} and H <= max_H = {c.max_H}, "
                             f"got L = {L}, H = {H}")
        dev = context.device
        first = 0 if all_examples else L  # first predicted example
        E, N = L + 1 - first, (L + 1) * H
        tokens = torch.cat([context, query[:, None, :]], dim=1)  # (B, L+1, H)
        content, qstream = self._embed(tokens, first)  # (B, N, w), (1, E*H, w)
        own = content[:, first * H:]  # (B, E*H, w): content rows of the predicted examples

        # layer 1 in raster order i = l*H + h: query row i and content row i both see content j < i (the examples
        # before l and its own example before h). A content row does not attend to itself (its token is already in
        # its residual): at the mimetic start it would copy itself instead of other examples.
        rows = torch.cat([qstream.expand(B, -1, -1), own], dim=1)  # (B, 2EH, w)
        i = torch.arange(first * H, N, device=dev)
        j = torch.arange(N, device=dev)
        before = j[None] < i[:, None]  # (EH, N)
        allowed = torch.cat([before, before], dim=0)  # (2EH, N)
        bias = self._relative_bias(i.repeat(2), H, N)  # None with absolute positions
        rows = rows + self._attention1(self.ln1(rows), self.ln1_kv(content), allowed, bias)
        rows = rows + self.ffn1(self.ln1_ffn(rows))
        g, kv = rows[:, :E * H].view(B, E, H, -1), rows[:, E * H:].view(B, E, H, -1)  # (B, E, H, w) each

        # layer 2: the parent selector, one head, query row (l, h) over content rows (l, h'), h' < h
        q = self.q2(self.ln2(g))  # (B, E, H, w)
        kv = self.ln2_kv(kv)
        k = self.k2(kv)  # (B, E, H, w)
        log_att = causal_softmax(q @ k.transpose(-1, -2) / math.sqrt(c.width))  # (B, E, H, H)
        g = g + self.o2(log_att.exp() @ self.v2(kv))  # row 0 attends to nothing: it only gets o2's bias
        g = g + self.ffn2(self.ln2_ffn(g))
        return log_att, F.log_softmax(self.unembed(self.ln_f(g)), dim=-1)  # (B, E, H, H), (B, E, H, d)

    @torch.no_grad()
    def layer1_query_attention(self, context, query) -> torch.Tensor:
        """Layer-1 attention of the query stream of the last example: (B, K, H, (L+1)·H), row h of head k over
        the content keys in raster order (example l', position h'); the analogue of the structured copier's
        attention, from which :func:`model.analysis.task_shaped_head_summary` reads where each head goes."""
        context, query = self.checked_tokens(context, query)  # on the model's device
        B, L, H = context.shape
        dev = context.device
        N = (L + 1) * H
        tokens = torch.cat([context, query[:, None, :]], dim=1)  # (B, L+1, H)
        content, rows = self._embed(tokens, L)  # (B, N, w), (1, H, w)
        x, kv = self.ln1(rows.expand(B, -1, -1)), self.ln1_kv(content)
        K, hs = self.K, x.shape[-1] // self.K
        q = self.q1(x).view(B, H, K, hs).transpose(1, 2)  # (B, K, H, hs)
        k = self.k1(kv).view(B, N, K, hs).transpose(1, 2)  # (B, K, N, hs)
        i = torch.arange(L * H, N, device=dev)
        allowed = torch.arange(N, device=dev)[None] < i[:, None]  # (H, N): the same mask as in _examples
        logits = (q @ k.transpose(-1, -2)) / math.sqrt(hs)  # scaled_dot_product_attention's scale
        bias = self._relative_bias(i, H, N)
        if bias is not None:
            logits = logits + bias
        att = torch.softmax(logits.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, K, H, N)
        return torch.nan_to_num(att)  # row (L, 0) of a context with L = 0 has no key

    def _embed(self, tokens: torch.Tensor, first: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(content (B, N, w), query stream (1, E*H, w)) of ``tokens`` (B, L+1, H): the query stream holds [MASK]
        at every (example l >= first, position h); absolute positions add the example and position embeddings."""
        B, E1, H = tokens.shape
        E = E1 - first
        content = self.tok(tokens)  # (B, L+1, H, w)
        qstream = self.tok.weight[self.config.d].expand(1, E, H, -1)  # (1, E, H, w)
        if self.config.position == "absolute":
            dev = tokens.device
            ex, pos = self.ex(torch.arange(E1, device=dev)), self.pos(torch.arange(H, device=dev))  # (L+1|H, w)
            content = content + ex[None, :, None] + pos[None, None]
            qstream = qstream + ex[None, first:, None] + pos[None, None]
        return content.reshape(B, E1 * H, -1), qstream.reshape(1, E * H, -1)

    def _relative_bias(self, i: torch.Tensor, H: int, N: int) -> torch.Tensor | None:
        """(K, len(i), N): layer-1 head k's bias u_k[l − l'] + v_k[h − h'] from row i = l·H + h to key j = l'·H + h'
        (relative positions; None with absolute ones). Keys after the row are masked, so their offset is clamped."""
        if self.config.position == "absolute":
            return None
        j = torch.arange(N, device=i.device)
        example = (i[:, None] // H - j[None] // H).clamp(0, self.config.max_L)  # (R, N)
        position = i[:, None] % H - j[None] % H + self.config.max_H - 1  # (R, N), in 0 .. 2 max_H − 2
        return self.rel_example[:, example] + self.rel_position[:, position]

    def _attention1(self, x: torch.Tensor, kv: torch.Tensor, allowed: torch.Tensor,
                    bias: torch.Tensor | None = None) -> torch.Tensor:
        B, R, w = x.shape
        K, hs = self.K, w // self.K
        q = self.q1(x).view(B, R, K, hs).transpose(1, 2)  # (B, K, R, hs)
        k = self.k1(kv).view(B, -1, K, hs).transpose(1, 2)  # (B, K, N, hs)
        v = self.v1(kv).view(B, -1, K, hs).transpose(1, 2)  # (B, K, N, hs)
        # a row with no key (query row (0, 0), excluded from every loss) reads zero: unmask it, zero its output
        seen = allowed.any(-1, keepdim=True)  # (R, 1)
        mask = allowed | ~seen  # (R, N)
        if bias is not None:  # relative positions: (K, R, N) added to the logits
            mask = bias.masked_fill(~mask, float("-inf"))[None]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask) * seen  # (B, K, R, hs)
        return self.o1(y.transpose(1, 2).reshape(B, R, w))  # (B, R, w)
