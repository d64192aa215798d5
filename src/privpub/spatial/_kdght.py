"""KDG-HT (Jin et al. 2022): KDG density grid from 1-D marginals, then a multi-level adaptive tree."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import (
    BudgetLedger,
    Publisher,
    RNGLike,
    as_generator,
    check_epsilon,
    check_positive_int,
    check_probability,
    check_real,
)
from privpub.errors import ParameterError
from privpub.ldp import norm_sub
from privpub.spatial._collect import MODES, Bounds, Role, check_bounds, check_points, collect
from privpub.spatial._kernels import (
    Block,
    ci_combine,
    descend,
    grid_edges,
    interval_index,
    kd_partition,
    kdg_height,
    merge_sparse,
    mtr_split,
    oue_v1,
    uniform_interval_index,
)
from privpub.spatial._release import SpatialRelease, TreeLevel

__all__ = ["KDGHT", "assign_roles", "kdg_intervals"]


def kdg_intervals(n_axis: int, epsilon: float, *, kdg_split: str = "users") -> int:
    """The spec's interval count ``m = n = clamp(floor(1 / (2 sigma_f)), 4, 32)``.

    ``sigma_f = sqrt(V_a / n_a)`` is the std of one marginal bin's frequency with ``n_a`` users
    reporting the axis (``V_a = V1(eps)`` in users mode, ``V1(eps/2)`` in budget mode).

    Examples
    --------
    >>> [kdg_intervals(25_000, e) for e in (0.1, 0.3, 0.5)]
    [4, 11, 19]
    """
    if n_axis <= 0:
        return 4
    va = oue_v1(epsilon) if kdg_split == "users" else oue_v1(epsilon / 2.0)
    sigma = math.sqrt(va / n_axis)
    return min(max(math.floor(1.0 / (2.0 * sigma)), 4), 32)


@dataclass(frozen=True, kw_only=True)
class KDGHT(Publisher):
    """KDG-HT: local-DP adaptive KD/quadtree partition of 2-D points for range-count queries.

    A random 5% of the users (``eta``) reports one coordinate interval each (OUE); the server
    estimates both marginals, marks sparse intervals, merges adjacent ones (rgdd) and cuts the
    domain KD-style into dense and sparse regions (KDG). The other users are split into ``h + 1``
    disjoint groups; group ``l`` reports (OUE) which leaf of the current tree holds its point,
    and MTR splits each leaf in four (noisy count > theta), in two (> theta / 2) or keeps it.
    The levels are combined by constrained inference and the leaves Norm-Sub'ed to ``N``.

    Parameters
    ----------
    eta : float
        Probability that a user joins the KDG sample U' (0.05).
    kdg_split : {"users", "budget"}
        ``"users"``: U' is halved, each half reports one axis at full epsilon (the privacy fix of
        the paper's double spending); ``"budget"``: each U' user reports both axes at epsilon/2.
    m, n : int or None
        Number of x and y intervals (default: the noise rule of :func:`kdg_intervals`).
    lam : float
        Sparse threshold on the normalised density, in (0, 1] (0.6).
    rgdd_tau : float
        Merge adjacent sparse intervals whose relative density difference is below this (1.0).
    h : int or None
        Tree height (default Eq. 2 on the largest dense KDG leaf, clamped to 1..10).
    kappa : float
        Split threshold ``theta = kappa * sigma`` of the next level's noise (4).
    theta : float or None
        An absolute split threshold overriding ``kappa``.
    combine : {"ci", "last"}
        ``"ci"``: constrained inference over all levels; ``"last"``: the paper's leaf counts from
        the last group only.
    postprocess : {"normsub", "none"}
        Norm-Sub of the leaves to total N, or raw values.
    clip : bool
        Clamp points outside the bounds to the boundary instead of raising ``DomainError``.

    Notes
    -----
    **Privacy:** epsilon-LDP per user (replace-one neighbouring on a user's location). Every user
    gets one role by a data-independent random draw and sends exactly one OUE report at epsilon
    (in ``kdg_split="budget"`` mode a U' user sends two reports at epsilon/2 each: sequential
    composition within the user). The public state a user encodes against (intervals, current
    tree) depends only on other users' noisy reports: post-processing. The ledger records one
    parallel step over the disjoint roles; ``release.roles`` lists them.
    ``mode="simulate"`` reads the points centrally to draw the aggregated reports with the
    exact law of the per-user protocol (binomials): an experiment shortcut, not a deployment.

    References
    ----------
    Jin, Ni, Zhu, Chen, Chen. Spatial data adaptive partition algorithm based on local
    differential privacy. Computer Engineering 48(5):136-144, 2022.
    doi:10.19678/j.issn.1000-3428.0062382. Wang et al., OUE, USENIX Security 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from privpub.spatial import KDGHT, synthetic_checkin
    >>> pts = synthetic_checkin(50_000, rng=1)
    >>> rel = KDGHT().publish(pts, bounds=(0, 0, 1, 1), epsilon=1.0, rng=0)
    >>> round(float(rel.range_count([[0, 0, 1, 1]])[0]))
    50000
    >>> rel.ledger.total
    1.0
    """

    eta: float = 0.05
    kdg_split: str = "users"
    m: int | None = None
    n: int | None = None
    lam: float = 0.6
    rgdd_tau: float = 1.0
    h: int | None = None
    kappa: float = 4.0
    theta: float | None = None
    combine: str = "ci"
    postprocess: str = "normsub"
    clip: bool = False

    def __post_init__(self) -> None:
        check_probability(self.eta, "eta")
        if self.kdg_split not in ("users", "budget"):
            raise ParameterError(f"kdg_split must be 'users' or 'budget', got {self.kdg_split!r}")
        for name in ("m", "n"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name, minimum=1)
        check_probability(self.lam, "lam", closed="right")
        if check_real(self.rgdd_tau, "rgdd_tau") <= 0:
            raise ParameterError(f"rgdd_tau must be > 0, got {self.rgdd_tau}")
        if self.h is not None:
            check_positive_int(self.h, "h", minimum=1)
        if check_real(self.kappa, "kappa") <= 0:
            raise ParameterError(f"kappa must be > 0, got {self.kappa}")
        if self.theta is not None and check_real(self.theta, "theta") <= 0:
            raise ParameterError(f"theta must be > 0, got {self.theta}")
        if self.combine not in ("ci", "last"):
            raise ParameterError(f"combine must be 'ci' or 'last', got {self.combine!r}")
        if self.postprocess not in ("normsub", "none"):
            raise ParameterError(f"postprocess must be 'normsub' or 'none', got {self.postprocess!r}")

    def publish(  # type: ignore[override]
        self, points: ArrayLike, *, bounds: Any, epsilon: float, rng: RNGLike = None, mode: str = "simulate"
    ) -> SpatialRelease:
        """Collect one report per user and return the adaptive partition with noisy leaf counts.

        Parameters
        ----------
        points : array_like, shape (N, 2)
            One location per user, inside ``bounds``.
        bounds : (x0, y0, x1, y1)
            The public domain, fixed in advance (never computed from the points).
        epsilon : float
            Per-user LDP budget.
        rng : int, Generator or None
            Randomness; equal seeds give identical releases (in either mode).
        mode : {"simulate", "per_user"}
            Exact aggregated simulation or the per-user client randomiser.

        Raises
        ------
        ParameterError
            On bad epsilon, bounds, mode or shapes. DomainError on NaN or points outside bounds.
        """
        eps = check_epsilon(epsilon)
        box = check_bounds(bounds)
        pts = check_points(points, box, clip=self.clip)
        if mode not in MODES:
            raise ParameterError(f"mode must be one of {MODES}, got {mode!r}")
        n_users = pts.shape[0]
        if n_users < 2:
            raise ParameterError(f"points must hold at least 2 users, got {n_users}")
        gen = as_generator(rng)
        role_gen, noise_gen = gen.spawn(2)
        return _run_kdght(self, pts, box, eps, mode, role_gen, noise_gen)


def assign_roles(
    n_users: int, eta: float, kdg_split: str, role_gen: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Data-independent roles: ``(U'_x ids, U'_y ids, permuted rest R)`` (spec 2.2).

    Each user joins U' with probability ``eta``; a random permutation splits U' into halves
    (``kdg_split="users"``; in budget mode both axes are the whole U'); R is permuted at random
    and later cut in order into the ``h + 1`` level groups.
    """
    in_sample = role_gen.random(n_users) < eta
    sample = role_gen.permutation(np.flatnonzero(in_sample))
    rest = role_gen.permutation(np.flatnonzero(~in_sample))
    if rest.size == 0:  # every user sampled: keep one for the tree
        rest, sample = sample[:1], sample[1:]
    if kdg_split == "users":
        half = (sample.size + 1) // 2
        return sample[:half], sample[half:], rest
    return sample, sample, rest


def _run_kdght(
    pub: KDGHT, pts: NDArray[np.float64], box: Bounds, eps: float, mode: str,
    role_gen: np.random.Generator, noise_gen: np.random.Generator,
) -> SpatialRelease:
    n_users = pts.shape[0]
    bx0, by0, bx1, by1 = box
    width, height = bx1 - bx0, by1 - by0
    v1 = oue_v1(eps)
    # ---- roles (drawn before any report) -------------------------------------------------------
    ux, uy, rest = assign_roles(n_users, pub.eta, pub.kdg_split, role_gen)
    sample = ux if pub.kdg_split == "budget" else np.concatenate([ux, uy])
    if pub.kdg_split == "users":
        eps_axis = eps
        n_axis = sample.size // 2
    else:
        eps_axis = eps / 2.0
        n_axis = sample.size
    roles: list[Role] = []
    # ---- phase B: KDG -------------------------------------------------------------------------
    m = pub.m if pub.m is not None else kdg_intervals(n_axis, eps, kdg_split=pub.kdg_split)
    nn = pub.n if pub.n is not None else kdg_intervals(n_axis, eps, kdg_split=pub.kdg_split)
    ex = grid_edges(bx0, bx1, m)
    ey = grid_edges(by0, by1, nn)
    skip_kdg = ux.size == 0 or uy.size == 0
    if skip_kdg:
        blocks_x = [Block(0, m, 1.0, 1.0, False)]
        blocks_y = [Block(0, nn, 1.0, 1.0, False)]
        rest = np.concatenate([sample, rest])  # the few sampled users join the tree groups
        sample = sample[:0]
    else:
        cx = collect(interval_index(ex, pts[ux, 0]), m, epsilon=eps_axis, mode=mode, rng=noise_gen)
        cy = collect(interval_index(ey, pts[uy, 1]), nn, epsilon=eps_axis, mode=mode, rng=noise_gen)
        fx = norm_sub(cx / ux.size, 1.0)
        fy = norm_sub(cy / uy.size, 1.0)
        blocks_x = merge_sparse(fx, np.diff(ex) / width, pub.lam, pub.rgdd_tau)
        blocks_y = merge_sparse(fy, np.diff(ey) / height, pub.lam, pub.rgdd_tau)
        if pub.kdg_split == "users":
            roles += [Role("U'_x", int(ux.size), "OUE", eps), Role("U'_y", int(uy.size), "OUE", eps)]
        else:
            roles.append(Role("U'", int(sample.size), "OUE", eps / 2.0, reports=2))
    leaves0 = kd_partition(blocks_x, blocks_y)
    # block edges in coordinates; interval -> block maps
    bxe = np.array([ex[b.lo] for b in blocks_x] + [ex[-1]])
    bye = np.array([ey[b.lo] for b in blocks_y] + [ey[-1]])
    lx0 = np.array([bxe[t[0]] for t in leaves0])
    lx1 = np.array([bxe[t[1]] for t in leaves0])
    ly0 = np.array([bye[t[2]] for t in leaves0])
    ly1 = np.array([bye[t[3]] for t in leaves0])
    kinds = tuple(t[4] for t in leaves0)
    table = np.empty((len(blocks_x), len(blocks_y)), dtype=np.int64)
    for k, (a, b, c, e, _) in enumerate(leaves0):
        table[a:b, c:e] = k
    # ---- tree height (Eq. 2) -------------------------------------------------------------------
    fbx = np.array([b.f for b in blocks_x])
    fby = np.array([b.f for b in blocks_y])
    if skip_kdg:
        n_hat = float(n_users)
    else:
        est = np.array([n_users * fbx[t[0]:t[1]].sum() * fby[t[2]:t[3]].sum() for t in leaves0])
        dense = np.array([k == "dense" for k in kinds])
        n_hat = float(est[dense].max() if dense.any() else est.max())
    h = pub.h if pub.h is not None else kdg_height(n_hat, eps)
    h = min(h, rest.size - 1) if rest.size > 1 else 0
    base, extra = divmod(rest.size, h + 1)  # numpy.array_split sizes
    sizes = [base + 1] * extra + [base] * (h + 1 - extra)
    cuts = np.concatenate([[0], np.cumsum(sizes)])
    # ---- phase C: level-by-level collection and MTR --------------------------------------------
    sub = np.take(pts, rest, axis=0)  # much faster than pts[rest, 0] on (N, 2) arrays
    px = np.ascontiguousarray(sub[:, 0])
    py = np.ascontiguousarray(sub[:, 1])
    del sub
    block_of_x = np.repeat(np.arange(len(blocks_x)), [b.hi - b.lo for b in blocks_x])
    block_of_y = np.repeat(np.arange(len(blocks_y)), [b.hi - b.lo for b in blocks_y])
    cell = block_of_x[uniform_interval_index(ex, px)] * len(blocks_y)
    cell += block_of_y[uniform_interval_index(ey, py)]
    leaf = table.ravel()[cell]
    x0, x1, y0, y1 = lx0, lx1, ly0, ly1
    parent = np.full(x0.size, -1, dtype=np.int64)
    levels: list[TreeLevel] = []
    ys: list[NDArray[np.float64]] = []
    parents: list[NDArray[np.int64]] = []
    variances: list[float] = []
    for lev in range(h + 1):
        n_l = sizes[lev]
        est_lev = collect(leaf[cuts[lev]:cuts[lev + 1]], x0.size, epsilon=eps, mode=mode, rng=noise_gen)
        y_lev = est_lev * (n_users / n_l)
        roles.append(Role(f"U^{lev}", int(n_l), "OUE", eps))
        levels.append(TreeLevel(x0=x0, x1=x1, y0=y0, y1=y1, parent=parent, noisy=y_lev))
        ys.append(y_lev)
        parents.append(parent)
        variances.append(n_users**2 * v1 / n_l)
        if lev == h:
            break
        if pub.theta is not None:
            theta = float(pub.theta)
        else:
            theta = pub.kappa * n_users * math.sqrt(v1 / sizes[lev + 1])
        kind, cx0, cx1, cy0, cy1, par = mtr_split(x0, x1, y0, y1, y_lev, theta, width, height)
        n_child = np.bincount(par, minlength=x0.size)
        start = np.cumsum(n_child) - n_child
        later = slice(cuts[lev + 1], None)
        leaf[later] = descend(leaf[later], px[later], py[later], kind, x0, x1, y0, y1, start)
        x0, x1, y0, y1, parent = cx0, cx1, cy0, cy1, par
    if pub.combine == "ci":
        values = ci_combine(ys, variances, parents, float(n_users))
    else:
        values = ys[-1].copy()
    if pub.postprocess == "normsub":
        values = norm_sub(values, float(n_users))
    ledger = BudgetLedger(eps)
    ledger.spend(
        "collect", "OUE", eps, composition="parallel", parts=len(roles),
        note="one report per user over disjoint roles: " + "; ".join(
            f"{r.name} {r.size} users x{r.reports} at eps={r.epsilon:g}" for r in roles),
    )
    params = asdict(pub)
    params.update({"m": m, "n": nn, "h": h, "n_hat": n_hat,
                   "blocks_x": [[b.lo, b.hi, b.f, b.sparse] for b in blocks_x],
                   "blocks_y": [[b.lo, b.hi, b.f, b.sparse] for b in blocks_y]})
    return SpatialRelease(
        ledger=ledger, epsilon=eps, method="kdght", params=params, bounds=box,
        x0=x0, x1=x1, y0=y0, y1=y1, values=values, n_users=n_users, levels=tuple(levels),
        roles=tuple(roles), mode=mode, kinds=kinds,
    )
