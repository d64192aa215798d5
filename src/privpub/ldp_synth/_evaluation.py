"""Evaluation helpers of the paper (these read raw data; never use them on the server side).

Exact empirical joints (the non-private reference network), I_sum, edge accuracy, AVD and KL over
all a-way marginals, and the SVM accuracy protocol of spec 3.3.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import RNGLike, as_generator, check_positive_int
from privpub.errors import ParameterError
from privpub.ldp_synth._kernels import mutual_information
from privpub.ldp_synth._network import Network, edges
from privpub.ldp_synth._store import JointSource

__all__ = [
    "EmpiricalJoints",
    "edge_accuracy",
    "i_sum",
    "marginal_errors",
    "svm_accuracy",
]


class EmpiricalJoints:
    """Exact empirical joints of an ``(N, d)`` code table (non-private; for baselines and metrics).

    Examples
    --------
    >>> ej = EmpiricalJoints(np.array([[0, 1], [1, 1], [1, 0], [1, 1]]), (2, 2))
    >>> ej.joint((1, 0))
    array([[0.  , 0.25],
           [0.25, 0.5 ]])
    """

    def __init__(self, codes: ArrayLike, sizes: Sequence[int]) -> None:
        arr = np.asarray(codes, dtype=np.int64)
        if arr.ndim != 2 or arr.shape[1] != len(sizes) or arr.shape[0] == 0:
            raise ParameterError(f"codes must have shape (n > 0, {len(sizes)}), got {arr.shape}", param="codes")
        self.codes = arr
        self._sizes = tuple(int(s) for s in sizes)
        self._cache: dict[tuple[int, ...], NDArray[np.float64]] = {}

    @property
    def sizes(self) -> tuple[int, ...]:
        return self._sizes

    def counts(self, attrs: Sequence[int]) -> NDArray[np.int64]:
        a = tuple(int(x) for x in attrs)
        shape = tuple(self._sizes[x] for x in a)
        key = np.ravel_multi_index(tuple(self.codes[:, x] for x in a), shape)
        return np.bincount(key, minlength=math.prod(shape)).reshape(shape)

    def joint(self, attrs: Sequence[int]) -> NDArray[np.float64]:
        a = tuple(int(x) for x in attrs)
        s = tuple(sorted(a))
        j = self._cache.get(s)
        if j is None:
            j = self.counts(s) / float(self.codes.shape[0])
            self._cache[s] = j
        return np.transpose(j, [s.index(x) for x in a])


def i_sum(source: JointSource, network: Network) -> float:
    """``sum_i I(X_i; Pi_i)`` (nats) over the network's pairs, from ``source``'s joints."""
    return float(sum(mutual_information(source.joint((c, *p))) for c, p in network if p))


def edge_accuracy(reference: Network, network: Network) -> float:
    """``|E_ref & E| / |E_ref|`` over undirected edges (1 when the reference has no edges)."""
    e_ref = edges(reference)
    if not e_ref:
        return 1.0
    return len(e_ref & edges(network)) / len(e_ref)


def marginal_errors(
    real: ArrayLike,
    synthetic: ArrayLike,
    sizes: Sequence[int],
    a: int,
    *,
    max_subsets: int | None = None,
    rng: RNGLike = 0,
) -> tuple[float, float]:
    """Mean AVD and mean smoothed KL over a-way marginals (spec 3.3).

    ``AVD = 1/2 sum |Q - Q_hat|``; ``KL = sum_{Q>0} Q ln(Q / Q_tilde)`` with
    ``Q_tilde = (count + 0.5) / (n + 0.5 |Omega_A|)``. All ``C(d, a)`` subsets, or a uniform
    sample of ``max_subsets`` of them.

    Examples
    --------
    >>> x = np.array([[0, 1], [1, 0], [1, 1]])
    >>> marginal_errors(x, x, (2, 2), 2)[0]
    0.0
    """
    r = np.asarray(real, dtype=np.int64)
    s = np.asarray(synthetic, dtype=np.int64)
    d = len(sizes)
    k = check_positive_int(a, "a")
    if k > d:
        raise ParameterError(f"a must be <= the number of attributes {d}, got {k}")
    subsets = list(itertools.combinations(range(d), k))
    if max_subsets is not None and len(subsets) > max_subsets:
        pick = as_generator(rng).choice(len(subsets), size=max_subsets, replace=False)
        subsets = [subsets[i] for i in np.sort(pick)]
    avds = np.empty(len(subsets))
    kls = np.empty(len(subsets))
    n_r, n_s = float(r.shape[0]), float(s.shape[0])
    for i, sub in enumerate(subsets):
        shape = tuple(int(sizes[x]) for x in sub)
        cells = math.prod(shape)
        kr = np.ravel_multi_index(tuple(r[:, x] for x in sub), shape)
        ks = np.ravel_multi_index(tuple(s[:, x] for x in sub), shape)
        q = np.bincount(kr, minlength=cells) / n_r
        cs = np.bincount(ks, minlength=cells).astype(np.float64)
        avds[i] = 0.5 * np.abs(q - cs / n_s).sum()
        qt = (cs + 0.5) / (n_s + 0.5 * cells)
        m = q > 0
        kls[i] = float(np.sum(q[m] * np.log(q[m] / qt[m])))
    return float(avds.mean()), float(kls.mean())


def svm_accuracy(
    real: ArrayLike,
    synthetic: ArrayLike,
    labels: Sequence[int],
    *,
    repetitions: int = 1,
    max_train_rows: int | None = None,
    fit_real: bool = True,
) -> tuple[float, float]:
    """SVM accuracy of models trained on real vs synthetic rows, tested on real hold-out rows.

    Repetition r uses ``g = default_rng(r)``: real train = ``g.permutation(N)[:int(0.8N)]``, real
    test = the rest, synthetic train = ``g.permutation(n)[:int(0.8n)]``. For each label column an
    RBF ``SVC()`` is fit on the integer codes of the other columns; a one-class training label
    predicts that class. ``max_train_rows`` caps the training rows (CI and benchmarks only).

    Returns
    -------
    (accuracy with real training data, accuracy with synthetic training data), each averaged over
    labels and repetitions; the first is NaN when ``fit_real`` is False (it does not depend on the
    synthetic table, so experiments compute it once).
    """
    from sklearn.svm import SVC

    r = np.asarray(real, dtype=np.int64)
    s = np.asarray(synthetic, dtype=np.int64)
    n_real, n_syn = r.shape[0], s.shape[0]
    acc_real: list[float] = []
    acc_syn: list[float] = []
    for rep in range(check_positive_int(repetitions, "repetitions")):
        g = np.random.default_rng(rep)
        perm = g.permutation(n_real)
        cut = int(0.8 * n_real)
        train_r, test_r = perm[:cut], perm[cut:]
        train_s = g.permutation(n_syn)[: int(0.8 * n_syn)]
        if max_train_rows is not None:
            train_r, train_s = train_r[:max_train_rows], train_s[:max_train_rows]
        for y in labels:
            others = [j for j in range(r.shape[1]) if j != y]
            x_test, y_test = r[test_r][:, others], r[test_r, y]
            jobs = ((train_r, r, acc_real), (train_s, s, acc_syn)) if fit_real else ((train_s, s, acc_syn),)
            for train, src, acc in jobs:
                x_tr, y_tr = src[train][:, others], src[train, y]
                classes = np.unique(y_tr)
                if classes.size == 1:
                    pred = np.full(y_test.shape, classes[0])
                else:
                    pred = SVC().fit(x_tr, y_tr).predict(x_test)
                acc.append(float(np.mean(pred == y_test)))
    return (float(np.mean(acc_real)) if acc_real else float("nan")), float(np.mean(acc_syn))
