"""Spatial campaigns: UG (one phase) and KDG-HT's multi-phase protocol over the network.

KDG-HT (Jin et al. 2022, paper 002) as a service: the server assigns each arriving participant
to a group and hands it that group's *public* partition; the participant locates its own point
in it and sends one OUE report of its cell (:func:`privpub.client.perturb_values`).

1. Groups ``U'_x`` and ``U'_y`` (``eta`` of the expected participants, halved) report which of
   the ``m`` x (y) intervals holds their point.
2. When both quotas are in, the server estimates the marginals, merges sparse intervals and cuts
   the KDG partition (the library's kernels :func:`merge_sparse`, :func:`kd_partition`,
   :func:`kdg_height`): tree level 0.
3. Level ``l`` participants report their leaf; when its quota is in, MTR splits the leaves by
   their noisy counts (:func:`mtr_split`) into level ``l + 1``. The last level takes everyone
   else.
4. A release combines the levels by constrained inference (:func:`ci_combine`) and Norm-Sub.

**Privacy:** every participant sends exactly one OUE report at the campaign's epsilon, in one
group; the groups are disjoint and the assignment does not depend on any value, so the
per-participant guarantee is epsilon-LDP for the whole campaign (the ledger is one parallel block
over the groups). The partitions are computed from earlier participants' reports only:
post-processing.

This module adapts the library's KDG-HT kernels (:mod:`privpub.spatial._kernels`, private in
this version of privpub) to the arrival-driven protocol; :class:`privpub.spatial.KDGHT` runs the
same phases on a whole dataset at once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from privpub.core import Accountant, BudgetLedger
from privpub.ldp import OUE, norm_sub
from privpub.service._kinds import (
    Group,
    Kind,
    ReleaseInput,
    SpecError,
    campaign_unit,
    participants_words,
    reports_each,
)
from privpub.spatial import kdg_intervals, ug_granularity
from privpub.spatial.protocol import (
    ci_combine,
    grid_edges,
    kd_partition,
    kdg_height,
    merge_sparse,
    mtr_split,
    oue_v1,
)

__all__ = ["SpatialKind"]

#: group ids: 0 = U'_x, 1 = U'_y, 2 + l = tree level l (KDG-HT); 0 = the grid (UG)
LEVEL0 = 2


class SpatialKind(Kind):
    kind = "spatial"
    layout = "bits"

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__(spec)
        self.method = spec["method"]
        self.bounds = tuple(float(b) for b in spec["bounds"])
        self.assigned = self.method == "kdght"

    @classmethod
    def normalise(cls, spec: dict[str, Any]) -> dict[str, Any]:
        # bounds (checked box), expected_participants and the phase rules are the model's (SpatialSpec)
        method = spec.get("method") or "kdght"
        box = [float(b) for b in spec["bounds"]]
        n_plan = int(spec["expected_participants"])
        eps = float(spec["epsilon"])
        out = dict(spec, method=method, bounds=box)
        if method == "ug":
            out["g"] = int(spec.get("g") or ug_granularity(int(n_plan), eps))
        else:
            sample = max(2, round(float(spec["eta"]) * n_plan))
            qx = (sample + 1) // 2
            out["quota_x"], out["quota_y"] = qx, sample - qx
            out["intervals"] = int(spec.get("intervals") or kdg_intervals(sample // 2, eps))
        return out

    # -- groups and configuration ----------------------------------------------------------------
    def initial_groups(self) -> list[Group]:
        if self.method == "ug":
            g = int(self.spec["g"])
            return [Group(0, "U", g * g, None, {"type": "grid", "bounds": list(self.bounds), "g": g})]
        m = int(self.spec["intervals"])
        x0, y0, x1, y1 = self.bounds
        return [Group(0, "U'_x", m, int(self.spec["quota_x"]),
                      {"type": "intervals", "axis": 0, "edges": grid_edges(x0, x1, m).tolist()}),
                Group(1, "U'_y", m, int(self.spec["quota_y"]),
                      {"type": "intervals", "axis": 1, "edges": grid_edges(y0, y1, m).tolist()})]

    def width(self, group: Group) -> int:
        return (max(group.domain_size, 2) + 7) // 8

    def public_config(self, groups: list[Group]) -> dict[str, Any]:
        cfg: dict[str, Any] = {"method": self.method, "bounds": list(self.bounds), "assigned": self.assigned,
                               "oracle": "OUE", "payload": {"layout": "bits"}}
        if self.method == "ug":
            cfg["partition"] = groups[0].public
            cfg["payload"]["bytes"] = self.width(groups[0])
        else:
            cfg["phases"] = [{"group": g.group_id, "name": g.name, "cells": g.domain_size, "quota": g.quota}
                             for g in groups]
            cfg["allow_unenrolled_phases"] = bool(self.spec.get("allow_unenrolled_phases", False))
        return cfg

    def privacy_words(self) -> str:
        e = self.epsilon
        base = (f"Each participant's device finds the cell of the public partition that holds its location and "
                f"sends one OUE report of it at epsilon = {e:g}: any report is at most e^{e:g} ≈ {math.exp(e):.3g} "
                "times more likely from one location than from any other. " + participants_words(self.spec) + ".")
        if self.method == "kdght":
            base += (" KDG-HT runs in phases: the server assigns each participant to exactly one group (without "
                     "looking at any value) and later phases use partitions estimated from earlier reports, so "
                     f"each participant's guarantee for the whole campaign is epsilon = {e:g}.")
        return base

    # -- phases (KDG-HT) --------------------------------------------------------------------------
    def planned_level_quota(self, h: int) -> int:
        rest = int(self.spec["expected_participants"]) - int(self.spec["quota_x"]) - int(self.spec["quota_y"])
        return max(1, math.ceil(max(rest, h + 1) / (h + 1)))

    def _oue(self, d: int) -> OUE:
        return OUE(domain_size=max(d, 2))

    def _estimate(self, group: Group, support: np.ndarray, n: int) -> np.ndarray:
        d = group.domain_size
        sup = np.zeros(max(d, 2), dtype=np.int64)
        sup[: support.size] = support
        return self._oue(d).estimate_from_support(sup, n, epsilon=self.epsilon)[:d]

    def level0(self, gx: Group, gy: Group, n: dict[int, int], support: dict[int, np.ndarray]) -> Group:
        """The KDG partition from the U'_x / U'_y reports: tree level 0."""
        x0, y0, x1, y1 = self.bounds
        width, height = x1 - x0, y1 - y0
        ex = np.asarray(gx.public["edges"])
        ey = np.asarray(gy.public["edges"])
        fx = norm_sub(self._estimate(gx, support[0], n[0]) / n[0], 1.0)
        fy = norm_sub(self._estimate(gy, support[1], n[1]) / n[1], 1.0)
        lam, tau = float(self.spec["lam"]), float(self.spec["rgdd_tau"])
        bx = merge_sparse(fx, np.diff(ex) / width, lam, tau)
        by = merge_sparse(fy, np.diff(ey) / height, lam, tau)
        leaves = kd_partition(bx, by)
        bxe = np.array([ex[b.lo] for b in bx] + [ex[-1]])
        bye = np.array([ey[b.lo] for b in by] + [ey[-1]])
        n_plan = float(self.spec["expected_participants"])
        fbx = np.array([b.f for b in bx])
        fby = np.array([b.f for b in by])
        est = np.array([n_plan * fbx[t[0]:t[1]].sum() * fby[t[2]:t[3]].sum() for t in leaves])
        dense = np.array([t[4] == "dense" for t in leaves])
        n_hat = float(est[dense].max() if dense.any() else est.max())
        h = int(self.spec["h"]) if self.spec.get("h") else kdg_height(n_hat, self.epsilon)
        public = {"type": "leaves", "level": 0, "h": h,
                  "x0": [float(bxe[t[0]]) for t in leaves], "x1": [float(bxe[t[1]]) for t in leaves],
                  "y0": [float(bye[t[2]]) for t in leaves], "y1": [float(bye[t[3]]) for t in leaves],
                  "parent": [-1] * len(leaves), "kinds": [t[4] for t in leaves], "n_hat": n_hat}
        quota = None if h == 0 else self.planned_level_quota(h)
        return Group(LEVEL0, "U^0", len(leaves), quota, public)

    def next_level(self, group: Group, n: int, support: np.ndarray) -> Group:
        """MTR: split level ``l``'s leaves by their noisy counts into level ``l + 1``."""
        pub = group.public
        level, h = int(pub["level"]), int(pub["h"])
        n_plan = float(self.spec["expected_participants"])
        y = self._estimate(group, support, n) * (n_plan / n)
        v1 = oue_v1(self.epsilon)
        theta = float(self.spec["kappa"]) * n_plan * math.sqrt(v1 / self.planned_level_quota(h))
        x0, y0, x1, y1 = self.bounds
        lx0, lx1, ly0, ly1 = (np.asarray(pub[k], dtype=np.float64) for k in ("x0", "x1", "y0", "y1"))
        _, cx0, cx1, cy0, cy1, par = mtr_split(lx0, lx1, ly0, ly1, y, theta, x1 - x0, y1 - y0)
        public = {"type": "leaves", "level": level + 1, "h": h, "x0": cx0.tolist(), "x1": cx1.tolist(),
                  "y0": cy0.tolist(), "y1": cy1.tolist(), "parent": par.tolist(), "theta": theta}
        quota = None if level + 1 >= h else self.planned_level_quota(h)
        return Group(group.group_id + 1, f"U^{level + 1}", int(cx0.size), quota, public)

    # -- releases ---------------------------------------------------------------------------------
    def release(self, data: ReleaseInput) -> tuple[dict[str, Any], dict[str, Any], BudgetLedger]:
        n_total = sum(data.n.values())
        by_id = {g.group_id: g for g in data.groups}
        acc = Accountant(self.epsilon, label=f"campaign {data.campaign_id}", unit=campaign_unit(self.spec))
        with acc.step("local perturbation"), acc.parallel("disjoint groups of participants") as block:
            for g in data.groups:
                if data.n.get(g.group_id, 0) > 0:
                    with block.branch(g.name):
                        acc.charge("OUE", self.epsilon,
                                   note=f"{data.n[g.group_id]} reports, {reports_each(self.spec)}, over "
                                        f"{g.domain_size} cells, randomised on their devices (declared)")
        ledger = acc.seal()
        if self.method == "ug":
            g0 = by_id[0]
            est = self._estimate(g0, data.support[0], data.n[0])
            values = norm_sub(est, float(data.n[0]))
            gsz = int(g0.public["g"])
            ex = grid_edges(self.bounds[0], self.bounds[2], gsz)
            ey = grid_edges(self.bounds[1], self.bounds[3], gsz)
            ii, jj = np.divmod(np.arange(gsz * gsz), gsz)
            leaves = {"x0": ex[ii].tolist(), "y0": ey[jj].tolist(), "x1": ex[ii + 1].tolist(),
                      "y1": ey[jj + 1].tolist(), "value": values.tolist()}
            params = {"method": "ug", "g": gsz, "raw": est.tolist()}
            return {"bounds": list(self.bounds), "grid_shape": [gsz, gsz], "leaves": leaves,
                    "n_users": n_total}, params, ledger
        levels = []
        gid = LEVEL0
        while gid in by_id and data.n.get(gid, 0) > 0:
            levels.append(by_id[gid])
            gid += 1
        if not levels:
            raise SpecError("stage", "no tree level has reports yet: KDG-HT needs at least level 0")
        v1 = oue_v1(self.epsilon)
        ys = [self._estimate(g, data.support[g.group_id], data.n[g.group_id]) * (n_total / data.n[g.group_id])
              for g in levels]
        variances = [n_total**2 * v1 / data.n[g.group_id] for g in levels]
        parents = [np.asarray(g.public["parent"], dtype=np.int64) for g in levels]
        values = norm_sub(ci_combine(ys, variances, parents, float(n_total)), float(n_total))
        last = levels[-1].public
        leaves = {k: list(last[k]) for k in ("x0", "y0", "x1", "y1")}
        leaves["value"] = values.tolist()
        params = {"method": "kdght", "levels": [{"group": g.group_id, "cells": g.domain_size,
                                                 "reports": data.n[g.group_id]} for g in levels],
                  "kdg_reports": [data.n.get(0, 0), data.n.get(1, 0)], "h": int(levels[0].public["h"])}
        return {"bounds": list(self.bounds), "grid_shape": None, "leaves": leaves, "n_users": n_total}, params, ledger

    def csv_rows(self, result: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
        lv = result["leaves"]
        return ["x0", "y0", "x1", "y1", "value"], [list(r) for r in zip(lv["x0"], lv["y0"], lv["x1"], lv["y1"],
                                                                         lv["value"])]
