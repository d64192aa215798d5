"""KDG-HT (Jin et al. 2022): KDG density grid from 1-D marginals, then a multi-level adaptive tree."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import (
    PrivacyUnit,
    RNGLike,
    Session,
    accounting,
    as_generator,
    check_positive_int,
    check_probability,
    check_real,
    describe_data,
)
from privpub.errors import ParameterError
from privpub.ldp import norm_sub
from privpub.spatial._collect import (
    Bounds,
    Collection,
    check_bounds,
    check_cells,
    check_local_epsilon,
    check_mode,
    check_points,
    user_groups,
)
from privpub.spatial._kernels import (
    Block,
    ci_combine,
    grid_edges,
    interval_index,
    kd_partition,
    kdg_height,
    merge_sparse,
    oue_v1,
)
from privpub.spatial._release import SpatialPublisher, SpatialRelease
from privpub.spatial._tree import GridCounter, Level0, grow_tree

__all__ = ["KDGHT", "assign_roles", "kdg_intervals"]

#: HDG's constant for the 1-D granularity guideline (Yang et al., VLDB 2021)
ALPHA1 = 0.7
_INTERVAL_RULES = ("histogram", "noise")


#: largest number of KDG intervals per axis (``m`` and ``n``): the side of the finest grid privpub
#: builds (``MAX_CELLS = 4096 x 4096``, GT-R's and AHEAD's height 12). A finer axis is no use: the
#: sparse test compares an interval's density share ``lam / m`` with the noise of its estimated
#: frequency, ``sqrt(V1(eps) / n_a)``, which at m = 4096 needs n_a > V1 (m / lam)^2, about 1.7e8
#: users reporting the axis at eps = 1; and a per-user OUE report of the axis costs m bits.
MAX_INTERVALS = 4096


def kdg_intervals(n_axis: int, epsilon: float, *, kdg_split: str = "users", rule: str = "histogram") -> int:
    """Number of KDG intervals per axis, ``m = n``, from the noise of one marginal bin.

    ``sigma_f = sqrt(V_a / n_a)`` is the std of one marginal bin's frequency with ``n_a`` users
    reporting the axis (``V_a = V1(eps)`` in users mode, ``V1(eps/2)`` in budget mode).

    * ``rule="histogram"`` (default): ``m = clamp(floor((2 alpha1^2 / sigma_f^2)^(1/3)), 4, 32)``
      with ``alpha1 = 0.7``, the bin count that balances the noise of a noisy histogram against
      its bin-width (uniformity) error, as Yang et al.'s 1-D grid guideline does for LDP
      marginals. The sparse test's margin, ``lam / m`` against ``sigma_f``, then improves as
      epsilon grows.
    * ``rule="noise"``: the spec's first rule, ``m = clamp(floor(1 / (2 sigma_f)), 4, 32)``: the
      average bin mass is two noise std at every epsilon, so the sparse test stays at the noise
      level while m doubles with epsilon; the level-0 structure then fragments at random and
      the error can grow with epsilon (see docs/spatial.md).

    Examples
    --------
    >>> [kdg_intervals(25_000, e) for e in (0.1, 0.3, 0.5)]
    [4, 8, 11]
    >>> [kdg_intervals(25_000, e, rule="noise") for e in (0.1, 0.3, 0.5)]
    [4, 11, 19]
    """
    if rule not in _INTERVAL_RULES:
        raise ParameterError(f"interval_rule must be one of {_INTERVAL_RULES}, got {rule!r}", param="interval_rule")
    if n_axis <= 0:
        return 4
    va = oue_v1(epsilon) if kdg_split == "users" else oue_v1(epsilon / 2.0)
    var = va / n_axis
    if rule == "noise":
        m = math.floor(1.0 / (2.0 * math.sqrt(var)))
    else:
        m = math.floor((2.0 * ALPHA1**2 / var) ** (1.0 / 3.0))
    return min(max(m, 4), 32)


@dataclass(frozen=True, kw_only=True)
class KDGHT(SpatialPublisher):
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
        Number of x and y intervals (default :func:`kdg_intervals`).
    interval_rule : {"histogram", "noise"}
        The default rule for ``m`` and ``n`` (see :func:`kdg_intervals`).
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
    tree) depends only on other users' noisy reports: post-processing. The ledger is one
    parallel block over the disjoint groups, each branch charged by the oracle as it draws:
    ``U'_x``, ``U'_y`` (OUE at epsilon; one branch ``U'`` with two OUE charges at epsilon/2 in
    budget mode) and ``U^0 .. U^h`` (OUE at epsilon); ``release.roles`` lists the groups.
    ``mode="simulate"`` reads the points centrally to draw the aggregated reports with the
    exact law of the per-user protocol (binomials, hypergeometric group counts): an experiment
    shortcut, not a deployment.

    References
    ----------
    Jin, Ni, Zhu, Chen, Chen. Spatial data adaptive partition algorithm based on local
    differential privacy. Computer Engineering 48(5):136-144, 2022.
    doi:10.19678/j.issn.1000-3428.0062382. Wang et al., OUE, USENIX Security 2017. Yang et al.,
    Answering multi-dimensional range queries under local differential privacy, VLDB 2021
    (the 1-D granularity guideline).

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
    interval_rule: str = "histogram"
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
            raise ParameterError(f"kdg_split must be 'users' or 'budget', got {self.kdg_split!r}", param="kdg_split")
        for name in ("m", "n"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name, minimum=1)
        if self.m is not None and self.n is not None:
            check_cells(self.m * self.n, "the KDG interval grid m x n", "m or n")
        for name in ("m", "n"):
            if getattr(self, name) is not None and getattr(self, name) > MAX_INTERVALS:
                raise ParameterError(
                    f"{name} must be at most {MAX_INTERVALS} intervals per axis (the side of the finest grid "
                    f"privpub builds, 4096 x 4096 cells; the sparse test of finer intervals compares lam / "
                    f"{name} with a noise that needs over 10^8 users to resolve): lower {name}, got "
                    f"{getattr(self, name)}"
                , param=name)
        if self.interval_rule not in _INTERVAL_RULES:
            raise ParameterError(f"interval_rule must be one of {_INTERVAL_RULES}, got {self.interval_rule!r}", param="interval_rule")
        check_probability(self.lam, "lam", closed="right")
        if check_real(self.rgdd_tau, "rgdd_tau") <= 0:
            raise ParameterError(f"rgdd_tau must be > 0, got {self.rgdd_tau}", param="rgdd_tau")
        if self.h is not None:
            check_positive_int(self.h, "h", minimum=1)
        if check_real(self.kappa, "kappa") <= 0:
            raise ParameterError(f"kappa must be > 0, got {self.kappa}", param="kappa")
        if self.theta is not None and check_real(self.theta, "theta") <= 0:
            raise ParameterError(f"theta must be > 0, got {self.theta}", param="theta")
        if self.combine not in ("ci", "last"):
            raise ParameterError(f"combine must be 'ci' or 'last', got {self.combine!r}", param="combine")
        if self.postprocess not in ("normsub", "none"):
            raise ParameterError(f"postprocess must be 'normsub' or 'none', got {self.postprocess!r}", param="postprocess")

    def publish(
        self, points: ArrayLike, *, bounds: Any, epsilon: float, rng: RNGLike = None, mode: str = "simulate",
        session: Session | None = None,
    ) -> SpatialRelease:
        """Collect one report per user and return the adaptive partition with noisy leaf counts.

        Parameters
        ----------
        points : array_like, shape (N, 2)
            One location per user, inside ``bounds``.
        bounds : (x0, y0, x1, y1)
            The public domain, fixed in advance (never computed from the points).
        epsilon : float
            Per-user LDP budget (at most 40: the randomiser's exact dyadic probabilities cannot
            represent more).
        rng : int, Generator or None
            Randomness; equal seeds give identical releases (in either mode).
        mode : {"simulate", "per_user"}
            Exact aggregated simulation or the per-user client randomiser.
        session : Session, optional
            Budget session that must pay ``epsilon`` first (nothing is drawn if it cannot).

        Raises
        ------
        ParameterError
            On bad epsilon, bounds, mode or shapes, or a tree larger than privpub allows.
            DomainError on NaN or points outside bounds. BudgetExceededError if the session
            cannot pay.
        """
        eps = check_local_epsilon(epsilon, "OUE", per_report=0.5 if self.kdg_split == "budget" else 1.0)
        box = check_bounds(bounds)
        pts = check_points(points, box, clip=self.clip)
        mode = check_mode(mode)
        n_users = pts.shape[0]
        if n_users < 2:
            raise ParameterError(f"points must hold at least 2 users, got {n_users}", param="points")
        gen = as_generator(rng)
        role_gen, noise_gen = gen.spawn(2)
        with accounting(eps, method="kdght", session=session, data=describe_data(pts),
                        unit=PrivacyUnit.participant()) as acc:
            with user_groups(acc, mode, noise_gen) as coll:
                fields = _run_kdght(self, pts, box, eps, coll, role_gen)
            return SpatialRelease(ledger=acc.seal(), epsilon=eps, method="kdght", bounds=box,
                                  n_users=n_users, roles=tuple(coll.roles), mode=mode, **fields)


    def _axis_epsilon(self, epsilon: float) -> float:
        """The budget of one KDG axis report, as :meth:`publish` spends it: ``epsilon`` (``kdg_split=
        "users"``: a sampled user reports one axis) or ``epsilon / 2`` (``"budget"``: both axes,
        sequential composition). The audit cases ``spatial.KDGHT.client_report[...]`` take it from here."""
        return epsilon if self.kdg_split == "users" else epsilon / 2.0

    def _kdg_round(self, coll: Collection, ix: NDArray[np.int64], iy: NDArray[np.int64], m: int, nn: int,
                   epsilon: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Phase B's collection round exactly as :meth:`publish` runs it: the sampled users' interval
        indices ``ix`` (x axis, ``m`` intervals) and ``iy`` (y axis, ``nn`` intervals) reported at
        :meth:`_axis_epsilon` through ``coll`` (OUE; per user in ``"per_user"`` mode, the exact
        aggregated law in ``"simulate"``). Returns the estimated interval counts of both axes. The
        audit cases ``spatial.KDGHT.client_report[...]`` call it with a per-user collection that
        keeps the reports (``Collection.kept``), so the audited reports are the drawn ones."""
        eps_axis = self._axis_epsilon(epsilon)
        if self.kdg_split == "users":
            (cx,) = coll.round("U'_x", cells=[ix], counts=[np.bincount(ix, minlength=m)], domains=[m],
                               epsilon=eps_axis)
            (cy,) = coll.round("U'_y", cells=[iy], counts=[np.bincount(iy, minlength=nn)], domains=[nn],
                               epsilon=eps_axis)
        else:
            cx, cy = coll.round("U'", cells=[ix, iy], domains=[m, nn], epsilon=eps_axis,
                                counts=[np.bincount(ix, minlength=m), np.bincount(iy, minlength=nn)])
        return cx, cy


def assign_roles(
    n_users: int, eta: float, kdg_split: str, role_gen: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Data-independent roles: ``(U'_x ids, U'_y ids, rest R)`` (spec 2.2).

    Each user joins U' with probability ``eta``; a random permutation of U' splits it into
    halves (``kdg_split="users"``; in budget mode both axes are the whole U'). R (in id order)
    is later split at random into the ``h + 1`` level groups.
    """
    ux, uy, sampled = _sample_roles(n_users, eta, kdg_split, role_gen)
    keep = np.ones(n_users, dtype=bool)
    keep[sampled] = False
    return ux, uy, np.flatnonzero(keep)


#: users per block of the role draw (its uniforms never make one array of N floats)
_ROLE_BLOCK = 1 << 16


def _sample_roles(
    n_users: int, eta: float, kdg_split: str, role_gen: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """:func:`assign_roles` without materialising R: ``(U'_x, U'_y, U' sorted)``; R is the rest.

    The uniforms are drawn in blocks of ``_ROLE_BLOCK`` (the same stream as one draw of N).
    """
    parts = [np.flatnonzero(role_gen.random(min(_ROLE_BLOCK, n_users - s)) < eta) + s
             for s in range(0, n_users, _ROLE_BLOCK)]
    in_order = np.concatenate(parts).astype(np.int64, copy=False) if parts else np.zeros(0, dtype=np.int64)
    sample = in_order[role_gen.permutation(in_order.size)]
    if sample.size == n_users:  # every user sampled: keep one for the tree
        sample = sample[1:]
        in_order = np.sort(sample)
    if kdg_split == "users":
        half = (sample.size + 1) // 2
        return sample[:half], sample[half:], in_order
    return sample, sample, in_order


def _level_sizes(n_rest: int, h: int) -> list[int]:
    base, extra = divmod(n_rest, h + 1)  # numpy.array_split sizes
    return [base + 1] * extra + [base] * (h + 1 - extra)


def _run_kdght(pub: KDGHT, pts: NDArray[np.float64], box: Bounds, eps: float, coll: Collection,
               role_gen: np.random.Generator) -> dict[str, Any]:
    n_users = pts.shape[0]
    bx0, by0, bx1, by1 = box
    width, height = bx1 - bx0, by1 - by0
    v1 = oue_v1(eps)
    per_user = coll.mode == "per_user"
    # ---- roles (drawn before any report) -------------------------------------------------------
    # R, the tree users, is the complement of U' (``sampled``); only the per-user path lists it
    ux, uy, sampled = _sample_roles(n_users, pub.eta, pub.kdg_split, role_gen)
    n_rest = n_users - sampled.size
    n_axis = min(ux.size, uy.size) if pub.kdg_split == "users" else ux.size
    # ---- phase B: KDG -------------------------------------------------------------------------
    m = pub.m if pub.m is not None else kdg_intervals(n_axis, eps, kdg_split=pub.kdg_split, rule=pub.interval_rule)
    nn = pub.n if pub.n is not None else kdg_intervals(n_axis, eps, kdg_split=pub.kdg_split, rule=pub.interval_rule)
    check_cells(m * nn, "the KDG interval grid m x n", "m or n")
    ex = grid_edges(bx0, bx1, m)
    ey = grid_edges(by0, by1, nn)
    skip_kdg = ux.size == 0 or uy.size == 0
    if skip_kdg:
        blocks_x = [Block(0, m, 1.0, 1.0, False)]
        blocks_y = [Block(0, nn, 1.0, 1.0, False)]
        sampled, n_rest = np.zeros(0, dtype=np.int64), n_users  # the few sampled users join the tree groups
    else:
        ix = interval_index(ex, pts[ux, 0])
        iy = interval_index(ey, pts[uy, 1])
        cx, cy = pub._kdg_round(coll, ix, iy, m, nn, eps)
        fx = norm_sub(cx / ux.size, 1.0)
        fy = norm_sub(cy / uy.size, 1.0)
        blocks_x = merge_sparse(fx, np.diff(ex) / width, pub.lam, pub.rgdd_tau)
        blocks_y = merge_sparse(fy, np.diff(ey) / height, pub.lam, pub.rgdd_tau)
    leaves0 = kd_partition(blocks_x, blocks_y)
    bxe = np.array([ex[b.lo] for b in blocks_x] + [ex[-1]])
    bye = np.array([ey[b.lo] for b in blocks_y] + [ey[-1]])
    t0 = np.array([t[:4] for t in leaves0], dtype=np.int64)
    lx0, lx1, ly0, ly1 = bxe[t0[:, 0]], bxe[t0[:, 1]], bye[t0[:, 2]], bye[t0[:, 3]]
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
        est = n_users * np.array([fbx[a:b].sum() * fby[c:e].sum() for a, b, c, e in t0])
        dense = np.array([k == "dense" for k in kinds])
        n_hat = float(est[dense].max() if dense.any() else est.max())
    h = pub.h if pub.h is not None else kdg_height(n_hat, eps)
    h = min(h, n_rest - 1) if n_rest > 1 else 0
    sizes = _level_sizes(n_rest, h)
    # ---- phase C: level-by-level collection and MTR --------------------------------------------
    block_of_x = np.repeat(np.arange(len(blocks_x)), [b.hi - b.lo for b in blocks_x])
    block_of_y = np.repeat(np.arange(len(blocks_y)), [b.hi - b.lo for b in blocks_y])
    level0 = Level0(ex, ey, block_of_x, block_of_y, table)
    if per_user:  # the per-user path needs each user's group: a random order of R, cut in order
        keep = np.ones(n_users, dtype=bool)
        keep[sampled] = False
        rest = np.flatnonzero(keep)
        rest = rest[role_gen.permutation(rest.size)]
        rx, ry = pts[rest, 0], pts[rest, 1]
        px: NDArray[np.float64] | None = rx
        py: NDArray[np.float64] | None = ry
        leaf: NDArray[np.int64] | None = level0.leaves_of(rx, ry)
        counter: GridCounter | None = None
        leaf_counts = None
    else:  # the users per node of every level from one pass over the points
        px = py = leaf = None
        weights = np.ones(len(leaves0)) if skip_kdg else est
        counter = GridCounter(pts, sampled, level0, (lx0, lx1, ly0, ly1), h, weights)
        leaf_counts = counter.leaf_counts()

    def theta(lev: int) -> float:
        if pub.theta is not None:
            return float(pub.theta)
        return float(pub.kappa * n_users * math.sqrt(v1 / max(sizes[lev + 1], 1)))

    tree = grow_tree(coll, (lx0, lx1, ly0, ly1), px, py, leaf, sizes, n_total=n_users, epsilon=eps, v1=v1,
                     theta=theta, width=width, height=height, role_gen=role_gen, option="h",
                     leaf_counts=leaf_counts, counter=counter)
    if pub.combine == "ci":
        values = ci_combine(tree.ys, tree.variances, tree.parents, float(n_users))
    else:
        values = tree.ys[-1].copy()
    if pub.postprocess == "normsub":
        values = norm_sub(values, float(n_users))
    params = asdict(pub)
    params.update({"m": m, "n": nn, "h": h, "n_hat": n_hat,
                   "blocks_x": [[b.lo, b.hi, b.f, b.sparse] for b in blocks_x],
                   "blocks_y": [[b.lo, b.hi, b.f, b.sparse] for b in blocks_y]})
    x0, x1, y0, y1 = tree.leaves
    return {"params": params, "x0": x0, "x1": x1, "y0": y0, "y1": y1, "values": values,
            "levels": tuple(tree.levels), "kinds": kinds}

