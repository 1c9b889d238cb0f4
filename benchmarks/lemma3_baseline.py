"""The baseline of the batched Lemma 3 benchmark: ``numerics.dpi_sweep.lemma3_ratio_batch`` as it was before it
formed joints for candidates only, in blocks of instances (commit 78f45c1), kept verbatim but for the public
``dobrushin_coefficients`` in place of its private twin. Not part of the package."""
import numpy as np
from scipy.special import xlogy

from bma_verify.numerics.claim_sweeps import MI_FLOOR
from bma_verify.numerics.contraction import dobrushin_coefficients


def ratio_batch_before(kernels, parents, inits) -> dict:
    """What ``lemma3_ratio_batch`` returned (the same keys and shapes), computed for every pair h' < h at once."""
    B, d, _ = kernels.shape
    H = parents.shape[1]
    rows = np.arange(B)[:, None]
    depth = np.zeros((B, H), dtype=np.int64)
    ancestors = np.zeros((B, H, H), dtype=bool)  # ancestors[b, k, j]: j is an ancestor of k (k included)
    ancestors[:, 0, 0] = True
    for k in range(1, H):
        depth[:, k] = depth[rows[:, 0], parents[:, k]] + 1
        ancestors[:, k] = ancestors[rows[:, 0], parents[:, k]]
        ancestors[:, k, k] = True
    powers = np.empty((B, H, d, d))
    powers[:, 0] = np.eye(d)
    for t in range(1, H):
        powers[:, t] = powers[:, t - 1] @ kernels
    laws = np.einsum("bix,bhxy->bihy", inits, powers[rows, depth])  # (B, I, H, d): the law of x_h
    entropy = -xlogy(laws, laws).sum(-1)  # (B, I, H)
    log_kernel = np.log(np.maximum(kernels, 1e-300))
    parent_law = laws[rows, :, parents.clip(0)].transpose(0, 2, 1, 3)  # (B, I, H, d)
    loglik_parent = (parent_law * (kernels * log_kernel).sum(-1)[:, None, None]).sum(-1)  # (B, I, H)
    mi_parent_h = entropy + loglik_parent
    h, h_prime = np.tril_indices(H, k=-1)  # (P,)
    parent = parents[:, h]  # (B, P)
    common = ancestors[:, h_prime] & ancestors[rows, parent]  # (B, P, H)
    lca = H - 1 - np.argmax(common[..., ::-1], axis=-1)  # (B, P)
    up = powers[rows, depth[:, h_prime] - depth[rows, lca]]  # (B, P, d, d): x_c -> x_h'
    down = powers[rows, depth[:, h] - depth[rows, lca]]  # (B, P, d, d): x_c -> x_h
    law_c = laws[rows, :, lca].transpose(0, 2, 1, 3)  # (B, I, P, d)
    joint = np.swapaxes(up, -1, -2)[:, None] @ (law_c[..., :, None] * down[:, None])  # (B, I, P, d, d)
    joint_entropy = -(joint * np.log(np.maximum(joint, 1e-300))).sum((-2, -1))  # (B, I, P)
    mi_candidate = np.maximum(entropy[..., h_prime] + entropy[..., h] - joint_entropy, 0.0)
    loglik_candidate = (joint * log_kernel[:, None, None]).sum((-2, -1))
    mi_parent = np.maximum(mi_parent_h[..., h], 0.0)
    ratio = np.divide(mi_candidate, mi_parent, out=np.full_like(mi_candidate, np.nan), where=mi_parent > MI_FLOOR)
    return {"h": h, "h_prime": h_prime, "candidate": parent != h_prime[None, :], "ancestor": lca == h_prime[None, :],
            "mi_candidate": mi_candidate, "mi_parent": mi_parent, "ratio": ratio,
            "loglik_gap": loglik_parent[..., h] - loglik_candidate,
            "dobrushin": dobrushin_coefficients(kernels), "doeblin": 1.0 - d * kernels.min(axis=(1, 2))}
