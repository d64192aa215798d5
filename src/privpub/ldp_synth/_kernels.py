"""Pure array kernels of privpub.ldp_synth: EM, the linear estimator, projection, MI, sampling.

Every function here works on arrays only (no data frames, no schema, no privacy accounting).
All loops are over attributes, EM iterations or BN nodes, never over users.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "em_batched",
    "em_collapsed",
    "entropy",
    "linear_contract",
    "mutual_information",
    "outer_rows",
    "project_simplex",
    "sample_conditional",
]

#: above this many U*D entries, EM avoids the dense pattern-by-cell matrix and contracts in stages
DENSE_LIMIT = 4_000_000


def outer_rows(tables: Sequence[NDArray[np.float64]]) -> NDArray[np.float64]:
    """Row-wise outer product: ``out[u] = kron(tables[0][u], tables[1][u], ...)`` as a (U, D) matrix.

    The first table is the most significant axis (C order), so ``out.reshape(U, *sizes)`` indexes
    cells as ``[u, w_1, ..., w_m]``.
    """
    out = tables[0]
    for t in tables[1:]:
        out = (out[:, :, None] * t[:, None, :]).reshape(out.shape[0], -1)
    return np.ascontiguousarray(out)


def _staged_forward(tables: Sequence[NDArray[np.float64]], p: NDArray[np.float64]) -> NDArray[np.float64]:
    """``Z[u] = sum_w p[w] * prod_t tables[t][u, w_t]`` without materialising U x D."""
    # contract the last axis first: p has shape (n_1, ..., n_m)
    m = len(tables)
    letters = "abcdefghijklmnopqrstvwxyz"[:m]
    spec = ",".join(f"u{c}" for c in letters) + f",{letters}->u"
    out: NDArray[np.float64] = np.einsum(spec, *tables, p, optimize=True)
    return out


def _staged_backward(tables: Sequence[NDArray[np.float64]], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """``G[w_1..w_m] = sum_u w[u] * prod_t tables[t][u, w_t]``."""
    m = len(tables)
    letters = "abcdefghijklmnopqrstvwxyz"[:m]
    spec = "u," + ",".join(f"u{c}" for c in letters) + f"->{letters}"
    out: NDArray[np.float64] = np.einsum(spec, w, *tables, optimize=True)
    return out


def em_collapsed(
    tables: Sequence[NDArray[np.float64]],
    weights: NDArray[np.float64],
    *,
    tol: float = 1e-6,
    max_iter: int = 1000,
    stop: str = "max_abs",
    init: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], int, bool, NDArray[np.float64]]:
    """EM for a joint distribution from per-pattern likelihood rows (paper Alg. 2, collapsed form).

    Parameters
    ----------
    tables : sequence of (U, n_t) float arrays
        ``tables[t][u, v]`` is the likelihood factor of attribute ``t`` at value ``v`` for pattern ``u``
        (proportional to ``P(report block | v)``; constants per row cancel).
    weights : (U,) float array
        Pattern weights, summing to 1 (``count_u / N``).
    tol, max_iter : float, int
        Stop when ``max |P_t - P_{t-1}| < tol`` or after ``max_iter`` iterations.
    stop : {"max_abs", "paper"}
        ``"paper"`` uses the paper's signed rule ``max P_t - max P_{t-1} <= tol`` (ablation only).
    init : array or None
        Starting distribution (default uniform). Cells at 0 stay at 0.

    Returns
    -------
    p : (n_1, ..., n_m) array, the estimate (>= 0, sums to 1)
    n_iter : int
    converged : bool
    z : (U,) array, the E-step normalisers at the returned ``p`` (for the log-likelihood)
    """
    sizes = tuple(int(t.shape[1]) for t in tables)
    n_cells = math.prod(sizes)
    n_pat = int(weights.shape[0])
    p = np.full(n_cells, 1.0 / n_cells) if init is None else np.asarray(init, dtype=np.float64).ravel().copy()
    dense = n_pat * n_cells <= DENSE_LIMIT
    lam = outer_rows(tables) if dense else None
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 - n_iter is returned
        if lam is not None:
            z = lam @ p
            g = (weights / z) @ lam
        else:
            z = _staged_forward(tables, p.reshape(sizes))
            g = _staged_backward(tables, weights / z).ravel()
        new = p * g
        new /= new.sum()
        if stop == "paper":
            done = new.max() - p.max() <= tol
        else:
            done = float(np.max(np.abs(new - p))) < tol
        p = new
        if done:
            converged = True
            break
    z = lam @ p if lam is not None else _staged_forward(tables, p.reshape(sizes))
    return p.reshape(sizes), n_iter, converged, z


def em_batched(
    lam: NDArray[np.float64],
    weights: NDArray[np.float64],
    *,
    tol: float = 1e-6,
    max_iter: int = 1000,
    stop: str = "max_abs",
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.bool_], NDArray[np.float64]]:
    """Many same-shape EMs at once: ``lam`` is (B, U, D) (padding rows: ones with weight 0).

    Each EM follows exactly the iteration of :func:`em_collapsed` and freezes at its own stopping
    point; the working set is compacted as EMs finish.

    Returns
    -------
    p : (B, D), n_iter : (B,), converged : (B,), z : (B, U) normalisers at the returned ``p``.
    """
    n_batch, _, n_cells = lam.shape
    p = np.full((n_batch, n_cells), 1.0 / n_cells)
    n_iter = np.zeros(n_batch, dtype=np.int64)
    converged = np.zeros(n_batch, dtype=bool)
    active = np.arange(n_batch)  # batch index of each working row
    live = np.ones(n_batch, dtype=bool)  # working rows still iterating
    lam_w, w_w, p_w = lam, weights, p.copy()
    for it in range(1, max_iter + 1):
        z = np.matmul(lam_w, p_w[:, :, None])[:, :, 0]
        g = np.matmul((w_w / z)[:, None, :], lam_w)[:, 0, :]
        new = p_w * g
        new /= new.sum(axis=1, keepdims=True)
        if stop == "paper":
            done = new.max(axis=1) - p_w.max(axis=1) <= tol
        else:
            done = np.max(np.abs(new - p_w), axis=1) < tol
        p_w = np.where(live[:, None], new, p_w)  # finished rows stay frozen
        n_iter[active[live]] = it
        fin = live & done
        if fin.any():
            converged[active[fin]] = True
            live &= ~done
            if not live.any():
                break
            if live.sum() < 0.75 * live.size:  # compact the working set
                p[active[~live]] = p_w[~live]
                active, lam_w, w_w, p_w = active[live], lam_w[live], w_w[live], p_w[live]
                live = np.ones(active.size, dtype=bool)
    p[active] = p_w
    z_all = np.matmul(lam, p[:, :, None])[:, :, 0]
    return p, n_iter, converged, z_all


def linear_contract(
    tables: Sequence[NDArray[np.float64]], counts: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``sum_u counts[u] * prod_t tables[t][u, w_t]`` as an (n_1, ..., n_m) array."""
    sizes = tuple(int(t.shape[1]) for t in tables)
    n_pat = int(counts.shape[0])
    if n_pat * math.prod(sizes) <= DENSE_LIMIT:
        return (counts @ outer_rows(tables)).reshape(sizes)
    return _staged_backward(tables, counts)


def project_simplex(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Euclidean projection onto the probability simplex (sort rule; keeps the input's shape).

    Examples
    --------
    >>> project_simplex(np.array([0.5, -0.01])).round(3)
    array([0.755, 0.245])
    """
    v = np.asarray(x, dtype=np.float64)
    flat = v.ravel()
    u = np.sort(flat)[::-1]
    css = np.cumsum(u) - 1.0
    j = np.arange(1, u.size + 1)
    ok = u > css / j
    rho = int(np.nonzero(ok)[0][-1])
    theta = css[rho] / (rho + 1)
    out: NDArray[np.float64] = np.maximum(flat - theta, 0.0).reshape(v.shape)
    return out


def entropy(p: NDArray[np.float64]) -> float:
    """Shannon entropy in nats, ``-sum_{p>0} p ln p``."""
    q = np.asarray(p, dtype=np.float64).ravel()
    q = q[q > 0]
    return float(-np.sum(q * np.log(q)))


def mutual_information(joint: NDArray[np.float64]) -> float:
    """``I(X; Pi)`` in nats from a joint with the child ``X`` on axis 0 and the parents on the others.

    Computed as paper Eq. 5 over cells with positive mass, clipped at 0.

    Examples
    --------
    >>> round(mutual_information(np.array([[0.5, 0.0], [0.0, 0.5]])), 6)
    0.693147
    """
    j = np.asarray(joint, dtype=np.float64)
    j = j.reshape(j.shape[0], -1)
    total = j.sum()
    if total <= 0:
        return 0.0
    j = j / total
    px = j.sum(axis=1, keepdims=True)
    pp = j.sum(axis=0, keepdims=True)
    denom = px * pp
    mask = j > 0
    val = float(np.sum(j[mask] * np.log(j[mask] / denom[mask])))
    return max(val, 0.0)


def sample_conditional(
    table: NDArray[np.float64], parent_index: NDArray[np.int64] | None, u: NDArray[np.float64]
) -> NDArray[np.int64]:
    """Draw child values by inverse CDF from conditional rows.

    Parameters
    ----------
    table : (n_parent_configs, n_child) array of conditional rows (each sums to 1), or (n_child,)
        for a root.
    parent_index : (n,) int array or None
        Row of ``table`` for each sample (mixed radix of the parents' values).
    u : (n,) uniforms from one ``rng.random(n)`` call.
    """
    t = np.atleast_2d(np.asarray(table, dtype=np.float64))
    cdf = np.cumsum(t, axis=1)
    n_child = t.shape[1]
    if parent_index is None:
        out = np.searchsorted(cdf[0], u, side="right")
    else:
        # vectorised per-row search: count the cumulative values <= u in each sample's row
        rows = cdf[parent_index]
        out = np.sum(rows <= u[:, None], axis=1)
    codes: NDArray[np.int64] = np.minimum(out, n_child - 1).astype(np.int64)
    return codes
