"""The baselines of the kernel benchmark: δ(π) and the stationary law as ``check --kernel`` computed them before
issue 42's d = 2000 rows (commit fe58ae6), kept verbatim but for their names. Not part of the package."""
import numpy as np

BLOCK_BYTES = 8 * 2**20


def dobrushin_before(kernel: np.ndarray) -> float:
    """δ(π) in blocks of row differences, a (rows, d, d) array of 8 MiB at a time."""
    d = kernel.shape[0]
    rows = max(1, BLOCK_BYTES // (8 * d * d))
    buffer = np.empty((rows, d, d))
    best = 0.0
    for start in range(0, d, rows):
        block = kernel[start:start + rows]
        diff = np.subtract(block[:, None, :], kernel[None, start:, :], out=buffer[:len(block), :d - start])
        best = max(best, float(np.abs(diff, out=diff).sum(-1).max()))
    return 0.5 * best


def stationary_before(kernel: np.ndarray) -> np.ndarray:
    """The stationary law by least squares on the stacked (d + 1) × d system [πᵀ − I; 1ᵀ] μ = [0; 1]."""
    d = kernel.shape[0]
    A = np.vstack([kernel.T - np.eye(d), np.ones((1, d))])
    b = np.zeros(d + 1)
    b[-1] = 1.0
    mu = np.linalg.lstsq(A, b, rcond=None)[0]
    mu = np.clip(mu, 0.0, None)
    return mu / mu.sum()
