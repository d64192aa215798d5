"""The spatial release: disjoint leaves with noisy counts, JSON round trip and plotting."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.core import BudgetLedger, Release, check_array
from privpub.errors import DataNotFoundError, ParameterError
from privpub.spatial._collect import Bounds, Role, check_bounds, check_points, check_rects
from privpub.spatial._kernels import grid_answer, leaf_lookup, locate_in_leaves, overlap_answer

__all__ = ["SpatialRelease", "TreeLevel"]

FORMAT = "privpub.spatial/1"


@dataclass(frozen=True)
class TreeLevel:
    """One level of a hierarchical release: node rectangles, parent index, noisy level estimate.

    ``parent[i]`` indexes the previous level (``-1`` for nodes under the virtual root);
    ``noisy`` is the level's unbiased population estimate (diagnostic; never a true count).
    """

    x0: NDArray[np.float64]
    x1: NDArray[np.float64]
    y0: NDArray[np.float64]
    y1: NDArray[np.float64]
    parent: NDArray[np.int64]
    noisy: NDArray[np.float64]

    def __post_init__(self) -> None:
        for name in ("x0", "x1", "y0", "y1", "parent", "noisy"):
            arr = np.array(getattr(self, name), copy=True)
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)

    @property
    def size(self) -> int:
        return int(self.x0.size)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k).tolist() for k in ("x0", "x1", "y0", "y1", "parent", "noisy")}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TreeLevel:
        return cls(
            x0=np.asarray(d["x0"], dtype=np.float64), x1=np.asarray(d["x1"], dtype=np.float64),
            y0=np.asarray(d["y0"], dtype=np.float64), y1=np.asarray(d["y1"], dtype=np.float64),
            parent=np.asarray(d["parent"], dtype=np.int64), noisy=np.asarray(d["noisy"], dtype=np.float64),
        )


@dataclass(frozen=True, kw_only=True)
class SpatialRelease(Release):
    """A published spatial synopsis: disjoint axis-aligned leaves, each with a noisy count.

    Attributes
    ----------
    bounds : tuple
        The public domain ``(x0, y0, x1, y1)``.
    x0, x1, y0, y1 : ndarray
        Leaf rectangles (they partition the domain).
    values : ndarray
        The published (noisy, post-processed) count of every leaf.
    n_users : int
        Number of reports (public).
    levels : tuple of TreeLevel
        The hierarchy the leaves came from (empty for flat grids).
    grid_shape : tuple or None
        ``(gx, gy)`` when the leaves form a uniform grid (leaf ``i * gy + j``).
    roles : tuple of Role
        The disjoint user groups, their sizes and what each user sent.
    mode : str
        ``"simulate"`` or ``"per_user"``.
    kinds : tuple of str
        KDG leaf kinds of level 0 (KDG-HT only).
    """

    bounds: Bounds
    x0: NDArray[np.float64]
    x1: NDArray[np.float64]
    y0: NDArray[np.float64]
    y1: NDArray[np.float64]
    values: NDArray[np.float64]
    n_users: int
    levels: tuple[TreeLevel, ...] = ()
    grid_shape: tuple[int, int] | None = None
    roles: tuple[Role, ...] = ()
    mode: str = "simulate"
    kinds: tuple[str, ...] = ()
    _lookup: Any = field(default=None, repr=False, compare=False)

    # -- geometry --------------------------------------------------------------------------------
    @property
    def n_leaves(self) -> int:
        return int(self.values.size)

    @property
    def areas(self) -> NDArray[np.float64]:
        return (self.x1 - self.x0) * (self.y1 - self.y0)

    def locate(self, points: ArrayLike) -> NDArray[np.int64]:
        """Index of the leaf holding each point (half-open cells, the domain's top/right edge closed).

        Raises ``DomainError`` for NaN or infinite coordinates and for points outside the bounds
        (no leaf holds them).
        """
        arr = check_array(points, "points", finite=False)
        pts = check_points(arr.reshape(-1, 2) if arr.ndim == 1 else arr, self.bounds)
        if self._lookup is None:
            object.__setattr__(self, "_lookup", leaf_lookup(self.x0, self.x1, self.y0, self.y1))
        return locate_in_leaves(self._lookup, pts[:, 0], pts[:, 1])

    # -- queries ---------------------------------------------------------------------------------
    def range_count(self, rects: ArrayLike) -> NDArray[np.float64]:
        """Estimated number of users in each closed query rectangle ``[x0, y0, x1, y1]``.

        Rectangles are clipped to the domain; leaves partly inside a query count pro rata to the
        overlapping area (uniformity inside leaves). Vectorised over leaves and queries.
        """
        return self.answer_with(self.values, rects)

    def answer_with(self, values: ArrayLike, rects: ArrayLike) -> NDArray[np.float64]:
        """Answer queries on this partition with other leaf values (e.g. exact counts for NE)."""
        vals = np.asarray(values, dtype=np.float64)
        if vals.shape != (self.n_leaves,):
            raise ParameterError(f"values must have shape ({self.n_leaves},), got {vals.shape}", param="values")
        r = check_rects(rects, self.bounds)
        if r.shape[0] == 0:
            return np.zeros(0)
        if self.grid_shape is not None:
            return grid_answer(vals.reshape(self.grid_shape), self.bounds, r)
        return overlap_answer(self.x0, self.x1, self.y0, self.y1, vals, r)

    def to_frame(self) -> Any:
        """The leaves as a DataFrame with columns x0, y0, x1, y1, value."""
        import pandas as pd

        return pd.DataFrame(
            {"x0": self.x0, "y0": self.y0, "x1": self.x1, "y1": self.y1, "value": self.values}
        )

    # -- persistence -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary of the release (noisy values only, never true counts)."""
        return {
            "format": FORMAT,
            "method": self.method,
            "epsilon": self.epsilon,
            "private": self.private,
            "params": self.params or {},
            "bounds": list(self.bounds),
            "n_users": self.n_users,
            "mode": self.mode,
            "grid_shape": list(self.grid_shape) if self.grid_shape else None,
            "leaves": {"x0": self.x0.tolist(), "y0": self.y0.tolist(), "x1": self.x1.tolist(),
                       "y1": self.y1.tolist(), "value": self.values.tolist()},
            "kinds": list(self.kinds),
            "levels": [lev.to_dict() for lev in self.levels],
            "roles": [r.as_dict() for r in self.roles],
            "ledger": self.ledger.to_records(),
        }

    def to_json(self, path: str | Path) -> Path:
        """Write the release as JSON and return the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict()))
        return p

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpatialRelease:
        if d.get("format") != FORMAT:
            raise ParameterError(f"release format must be {FORMAT!r}, got {d.get('format')!r}")
        try:
            ledger = BudgetLedger.from_records(float(d["epsilon"]), d["ledger"], private=bool(d["private"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"the release's ledger record is damaged: {exc}") from exc
        leaves = d["leaves"]
        return cls(
            ledger=ledger, epsilon=float(d["epsilon"]), method=d["method"], private=bool(d["private"]),
            params=d["params"], bounds=check_bounds(d["bounds"]),
            x0=np.asarray(leaves["x0"], dtype=np.float64), x1=np.asarray(leaves["x1"], dtype=np.float64),
            y0=np.asarray(leaves["y0"], dtype=np.float64), y1=np.asarray(leaves["y1"], dtype=np.float64),
            values=np.asarray(leaves["value"], dtype=np.float64), n_users=int(d["n_users"]),
            levels=tuple(TreeLevel.from_dict(lev) for lev in d["levels"]),
            grid_shape=tuple(d["grid_shape"]) if d["grid_shape"] else None,
            roles=tuple(Role(**r) for r in d["roles"]), mode=d["mode"], kinds=tuple(d["kinds"]),
        )

    @classmethod
    def from_json(cls, path: str | Path) -> SpatialRelease:
        """Read a release written by :meth:`to_json`."""
        p = Path(path)
        if not p.exists():
            raise DataNotFoundError(f"release file {str(p)!r} does not exist")
        return cls.from_dict(json.loads(p.read_text()))

    # -- plotting --------------------------------------------------------------------------------
    def plot(self, ax: Any = None, *, points: ArrayLike | None = None, bins: int = 256,
             path: str | Path | None = None) -> Any:
        """Draw the leaves over a density background and return the matplotlib axes.

        Without ``points`` the background is the released (noisy) density, values / area: the
        figure is private. With ``points`` it is the 2-D histogram of those raw points (log
        scale), a curator's diagnostic that must not be published.
        """
        import matplotlib

        if ax is None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.collections import PatchCollection
        from matplotlib.colors import LogNorm
        from matplotlib.patches import Rectangle

        fig = None
        if ax is None:
            fig, ax = plt.subplots(figsize=(7, 7))
        bx0, by0, bx1, by1 = self.bounds
        rects = [Rectangle((a, c), b - a, e - c) for a, b, c, e in zip(self.x0, self.x1, self.y0, self.y1)]
        if points is not None:
            pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
            hist, _, _ = np.histogram2d(pts[:, 0], pts[:, 1], bins=bins, range=[[bx0, bx1], [by0, by1]])
            img = ax.imshow(hist.T + 0.5, origin="lower", extent=(bx0, bx1, by0, by1), cmap="viridis",
                            norm=LogNorm(), aspect="auto")
            ax.add_collection(PatchCollection(rects, facecolor="none", edgecolor="white", linewidth=0.4))
            label = "points per bin (raw data: not private)"
        else:
            dens = np.clip(self.values, 0, None) / self.areas
            coll = PatchCollection(rects, cmap="viridis", edgecolor="white", linewidth=0.4,
                                   norm=LogNorm(vmin=max(dens[dens > 0].min(initial=1.0), 1e-12)))
            coll.set_array(np.where(dens > 0, dens, np.nan))
            img = ax.add_collection(coll)
            label = "released density (users per unit area)"
        ax.set_xlim(bx0, bx1)
        ax.set_ylim(by0, by1)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.set_title(f"{self.method}, epsilon={self.epsilon:g}: {self.n_leaves} leaves")
        ax.figure.colorbar(img, ax=ax, label=label, shrink=0.8)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            ax.figure.savefig(path, dpi=120, bbox_inches="tight")
            if fig is not None:
                plt.close(fig)
        return ax
