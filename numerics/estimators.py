"""Monte Carlo estimates with honest error bars: sample means, I and I_χ² from paired samples.

Serves ``lemma3-strict-dpi`` (Monte Carlo check), ``lemma4-loglik-gap`` and ``thm3-init-gradient``. Every
estimate is an :class:`Estimate` carrying its standard error and a normal confidence interval.

Intervals for information measures use the delta method: a plug-in functional T(P̂) has
√n (T(P̂) − T(P)) → N(0, Var φ(X, Y)) with φ its influence function, so stderr = sd(φ(x_i, y_i)) / √n with φ
evaluated at the empirical law. The influence functions are
- I:    φ(a, b) = log r(a, b) − I,  r = P(a, b) / (P(a) P(b));
- I_χ²: φ(a, b) = 2 r(a, b) − Σ_y P(y) r(a, y)² − Σ_x P(x) r(x, b)².
At I = 0 (independence) φ ≡ 0 and the estimator is of order 1/n, so the delta method fails there. Near
independence an estimate of I uses instead the law of the G statistic G = 2n·Î_plugin: χ²((m_x − 1)(m_y − 1)) under
independence (bias ≈ (d − 1)²/(2n) nats), non-central with λ = 2n·I near it; its interval inverts that law in λ
and stays valid at I = 0. The bias corrections below are the leading 1/n terms (Miller–Madow for I;
(m_x − 1)(m_y − 1)/n for I_χ², exact in expectation under independence).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtri, xlogy
from scipy.stats import chi2, ncx2

from bma_verify.numerics.validation import check_positive_int, check_tokens


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo estimate: ``value`` ± ``stderr``, with a normal interval [``low``, ``high``] at ``level``.

    Fields may be arrays (an estimate per coordinate); ``n`` is the number of samples.
    """

    value: np.ndarray | float
    stderr: np.ndarray | float
    low: np.ndarray | float
    high: np.ndarray | float
    n: int
    level: float = 0.95
    #: Near independence (:func:`mutual_information_estimate`): the G statistic, its degrees of freedom and the λ per
    #: unit of the estimated quantity (λ = ``g_per_unit`` · truth); ``g_statistic`` is None for a normal estimate.
    g_statistic: float | None = None
    g_df: int = 0
    g_per_unit: float = 0.0

    @property
    def estimate(self):
        """Alias of ``value`` (the name under which ``init_gradient(method="monte-carlo")`` documents its result)."""
        return self.value

    def contains(self, truth) -> np.ndarray | bool:
        """Whether the interval contains ``truth`` (elementwise)."""
        return (np.asarray(self.low) <= truth) & (truth <= np.asarray(self.high))

    def agreement_z(self, truth) -> np.ndarray | float:
        """How many standard deviations the estimate lies from ``truth``: (value − truth)/stderr, or, near
        independence, the normal quantile of G under its non-central χ² law at ``truth`` (same false-alarm rate)."""
        if self.g_statistic is None:
            return (np.asarray(self.value) - truth) / np.asarray(self.stderr)
        return g_statistic_z(self.g_statistic, self.g_df, self.g_per_unit * float(truth))


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1); got {level}")
    return float(ndtri(0.5 + level / 2.0))


def _from_influence(value, influence: np.ndarray, level: float) -> Estimate:
    """Estimate with stderr sd(influence)/√n along axis 0."""
    n = influence.shape[0]
    stderr = influence.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.full(np.shape(value), np.inf)
    z = _z(level)
    if np.ndim(value) == 0:
        value, stderr = float(value), float(stderr)
    return Estimate(value, stderr, value - z * stderr, value + z * stderr, int(n), level)


#: An estimate of I is "near independence" when the G-test does not reject independence at this level: there the
#: delta method's interval collapses, and the χ² law of G is used instead.
NEAR_INDEPENDENCE_P = 1e-6


def _g_cdf(g: float, df: int, noncentrality: float) -> float:
    return float(chi2.cdf(g, df)) if noncentrality <= 0 else float(ncx2.cdf(g, df, noncentrality))


def _g_sf(g: float, df: int, noncentrality: float) -> float:
    return float(chi2.sf(g, df)) if noncentrality <= 0 else float(ncx2.sf(g, df, noncentrality))


def g_statistic_z(g: float, df: int, noncentrality: float) -> float:
    """The normal quantile of G under χ²(df, λ = ``noncentrality``): N(0, 1) when the law is right (tails exact)."""
    cdf = _g_cdf(g, df, noncentrality)
    return float(ndtri(cdf)) if cdf < 0.5 else float(-ndtri(_g_sf(g, df, noncentrality)))


def g_noncentrality_interval(g: float, df: int, level: float = 0.95) -> tuple[float, float]:
    """[λ_low, λ_high]: the λ for which G is not in either α/2 tail of χ²(df, λ); λ_low = 0 when G is not in the
    upper tail of χ²(df), so the interval is valid at independence (λ = 0)."""
    alpha = 1.0 - level
    top = g + 20.0 * np.sqrt(g + df) + 50.0  # far beyond G: the cdf there is far below α/2
    low = 0.0 if _g_sf(g, df, 0.0) >= alpha / 2 else brentq(lambda lam: _g_sf(g, df, lam) - alpha / 2, 0.0, top)
    high = 0.0 if _g_cdf(g, df, 0.0) <= alpha / 2 else brentq(lambda lam: _g_cdf(g, df, lam) - alpha / 2, 0.0, top)
    return float(low), float(high)


def _near_independence(value: float, g: float, df: int, n: int, level: float) -> Estimate | None:
    """The G-law estimate of I (interval λ/(2n)) when G does not reject independence at NEAR_INDEPENDENCE_P."""
    if df < 1 or _g_sf(g, df, 0.0) < NEAR_INDEPENDENCE_P:
        return None
    low, high = (lam / (2.0 * n) for lam in g_noncentrality_interval(g, df, level))
    return Estimate(float(value), (high - low) / (2.0 * _z(level)), low, high, int(n), level,
                    g_statistic=float(g), g_df=int(df), g_per_unit=2.0 * n)


def mean_estimate(samples, *, level: float = 0.95) -> Estimate:
    """Sample mean over axis 0 with stderr = sd / √n and a normal interval.

    Parameters
    ----------
    samples : (n, ...) array of i.i.d. draws, n >= 2.
    """
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim == 0 or samples.shape[0] < 2:
        raise ValueError(f"samples must have at least 2 draws along axis 0; got shape {samples.shape}")
    if not np.all(np.isfinite(samples)):
        raise ValueError("samples must be finite")
    return _from_influence(samples.mean(axis=0), samples, level)


def empirical_joint(x, y, d: int) -> np.ndarray:
    """The (d, d) empirical joint law of paired tokens x, y (each of shape (n,))."""
    check_positive_int(d, "d", 2)
    x = check_tokens(np.asarray(x), d, "x").astype(np.int64).ravel()
    y = check_tokens(np.asarray(y), d, "y").astype(np.int64).ravel()
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"x and y must be paired samples of the same length >= 2; got {x.shape} and {y.shape}")
    counts = np.bincount(x * d + y, minlength=d * d).reshape(d, d)
    return counts / x.size


def _ratio_table(joint: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    px, py = joint.sum(1), joint.sum(0)
    outer = px[:, None] * py[None, :]
    r = np.divide(joint, outer, out=np.zeros_like(joint), where=outer > 0)  # (d, d)
    return px, py, r


def mutual_information_influence(x, y, joint) -> np.ndarray:
    """φ(x_i, y_i) = log r(x_i, y_i) − I under ``joint`` (the plug-in MI's influence function), shape (n,)."""
    _, _, r = _ratio_table(joint)
    log_r = np.log(np.where(r > 0, r, 1.0))
    mi = float((joint * log_r).sum())
    return log_r[np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)] - mi


def chi2_information_influence(x, y, joint) -> np.ndarray:
    """φ(x_i, y_i) = 2 r − Σ_y P(y) r(x_i, y)² − Σ_x P(x) r(x, y_i)² (the plug-in I_χ²'s influence), (n,)."""
    px, py, r = _ratio_table(joint)
    row_term = (r**2 * py[None, :]).sum(1)  # (d,)
    col_term = (r**2 * px[:, None]).sum(0)  # (d,)
    x = np.asarray(x, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    return 2.0 * r[x, y] - row_term[x] - col_term[y]


def _plugin_mi(joint: np.ndarray) -> float:
    px, py = joint.sum(1), joint.sum(0)
    return float(xlogy(joint, joint).sum() - xlogy(px, px).sum() - xlogy(py, py).sum())


def _plugin_chi2(joint: np.ndarray) -> float:
    _, _, r = _ratio_table(joint)
    return float((joint * r).sum() - 1.0)


def mutual_information_estimate(x, y, d: int, *, method: str = "miller-madow", level: float = 0.95) -> Estimate:
    """I(X; Y) in nats from paired samples, plug-in or Miller–Madow corrected, with a delta-method interval, or
    near independence the interval of the G statistic's χ² law (module docstring).

    Miller–Madow adds (m − 1)/(2n) to each plug-in entropy (m = occupied cells), so
    Î_MM = Î + (m_x + m_y − m_xy − 1)/(2n).

    Parameters
    ----------
    x, y : (n,) int tokens in [0, d).
    method : "plug-in" or "miller-madow".
    """
    if method not in ("plug-in", "miller-madow"):
        raise ValueError(f"method must be 'plug-in' or 'miller-madow'; got {method!r}")
    joint = empirical_joint(x, y, d)
    n = np.asarray(x).size
    plugin = value = _plugin_mi(joint)
    m_x, m_y, m_xy = (joint.sum(1) > 0).sum(), (joint.sum(0) > 0).sum(), (joint > 0).sum()
    if method == "miller-madow":
        value += (m_x + m_y - m_xy - 1) / (2.0 * n)
    near = _near_independence(value, 2.0 * n * max(plugin, 0.0), int((m_x - 1) * (m_y - 1)), n, level)
    return near if near is not None else _from_influence(value, mutual_information_influence(x, y, joint), level)


def chi2_mutual_information_estimate(x, y, d: int, *, method: str = "bias-corrected",
                                     level: float = 0.95) -> Estimate:
    """I_χ²(X; Y) = Σ P(x,y)²/(P(x)P(y)) − 1 from paired samples, with a delta-method interval.

    ``bias-corrected`` subtracts (m_x − 1)(m_y − 1)/n, the plug-in's expectation under independence.

    Parameters
    ----------
    x, y : (n,) int tokens in [0, d).
    method : "plug-in" or "bias-corrected".
    """
    if method not in ("plug-in", "bias-corrected"):
        raise ValueError(f"method must be 'plug-in' or 'bias-corrected'; got {method!r}")
    joint = empirical_joint(x, y, d)
    n = np.asarray(x).size
    value = _plugin_chi2(joint)
    if method == "bias-corrected":
        m_x, m_y = (joint.sum(1) > 0).sum(), (joint.sum(0) > 0).sum()
        value -= (m_x - 1) * (m_y - 1) / n
    return _from_influence(value, chi2_information_influence(x, y, joint), level)


def mutual_information_ratio_estimate(x_numerator, x_denominator, y, d: int, *,
                                      method: str = "miller-madow", level: float = 0.95) -> Estimate:
    """R = I(Y; X_num) / I(Y; X_den) from one set of samples of (X_num, X_den, Y) (``lemma3-strict-dpi``).

    The two informations share samples, so the interval uses the joint influence
    φ_R = (φ_num − R φ_den) / I_den (delta method for a ratio); valid when I_den is well above 1/n. When the
    numerator is near independence, the interval is [num.low / den.high, num.high / den.low] from the two
    intervals at level 1 − α/2 each (together at least ``level``), and the agreement z is the numerator's G law
    at λ = 2n · R · Î_den.
    """
    numerator = mutual_information_estimate(x_numerator, y, d, method=method, level=level)
    if numerator.g_statistic is not None:
        return _ratio_near_independence(x_numerator, x_denominator, y, d, method, level)
    numerator = mutual_information_estimate(x_numerator, y, d, method=method, level=level)
    denominator = mutual_information_estimate(x_denominator, y, d, method=method, level=level)
    if denominator.value <= 0:
        raise ValueError("x_denominator carries no estimated information about y; the ratio is undefined")
    ratio = numerator.value / denominator.value
    influence = (
        mutual_information_influence(x_numerator, y, empirical_joint(x_numerator, y, d))
        - ratio * mutual_information_influence(x_denominator, y, empirical_joint(x_denominator, y, d))
    ) / denominator.value
    return _from_influence(ratio, influence, level)


def _ratio_near_independence(x_numerator, x_denominator, y, d: int, method: str, level: float) -> Estimate:
    """The ratio with a numerator near independence: Bonferroni interval of the two intervals (see above)."""
    wider = 1.0 - (1.0 - level) / 2.0
    numerator = mutual_information_estimate(x_numerator, y, d, method=method, level=wider)
    denominator = mutual_information_estimate(x_denominator, y, d, method=method, level=wider)
    if denominator.value <= 0:
        raise ValueError("x_denominator carries no estimated information about y; the ratio is undefined")
    low = numerator.low / denominator.high
    high = numerator.high / denominator.low if denominator.low > 0 else np.inf
    return Estimate(numerator.value / denominator.value, (high - low) / (2.0 * _z(level)), float(low), float(high),
                    numerator.n, level, g_statistic=numerator.g_statistic, g_df=numerator.g_df,
                    g_per_unit=numerator.g_per_unit * float(denominator.value))
