"""Incremental persistence of stream publishers: a state cut into a small head and time-indexed parts.

A stream persisted after every write should cost what the write changed, not the whole window.
:meth:`StreamPublisher.state(since=t0) <privpub.stream._base.StreamPublisher.state>` returns a
*delta*: the time-indexed arrays (released node values, noisy prefix sums, and for the Fenwick
publishers the open tree's local prefixes) only for the times that may have changed after
``t0``, and only the trees opened after ``t0``. :func:`split_state` cuts a state (full or delta)
into its **head** (parameters, ``t``, ledger, open tree, predictor: small) and its **part** (the
time-indexed arrays and the new trees). A store keeps the latest head and every part that still
meets the window; :func:`join_state` rebuilds the full state, which
:meth:`~privpub.stream._base.StreamPublisher.from_state` restores. Released values are never
recomputed: every node's noise comes back exactly as it was released.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privpub.errors import ParameterError

__all__ = ["join_state", "split_state", "state_needs_from"]

#: the state keys of time-indexed arrays (time on the last axis)
TIME_KEYS = ("Y", "NP", "LP", "R", "Z", "H")


def split_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Cut a publisher state (full, or a delta from ``state(since=...)``) into ``(head, part)``.

    The part holds ``arrays_from`` (first time of its arrays), ``t`` and the time-indexed arrays,
    plus, for the Fenwick publishers, the trees it lists. The head holds everything else.
    """
    if not isinstance(state, dict) or "store_from" not in state or "t" not in state:
        raise ParameterError("state must be a dict made by a stream publisher's state()", param="state")
    head = {k: v for k, v in state.items() if k not in TIME_KEYS and k not in ("trees", "since", "arrays_from")}
    part: dict[str, Any] = {"t": int(state["t"]), "arrays_from": int(state.get("arrays_from", state["store_from"]))}
    for k in TIME_KEYS:
        if k in state:
            part[k] = np.asarray(state[k])
    fenwick = "NP" in state and "trees" in state
    if "NP" in state and not fenwick and isinstance(state.get("open_block"), dict):
        # the matrix-factorisation publishers: the open block's noise (drawn once, when the block
        # opened) goes into the part of the write that opened the block, never into the head that
        # every write replaces; the head keeps that part (``trees_from``: the block's first time)
        ob = dict(state["open_block"])
        z = ob.pop("z", None)
        x = ob.pop("x", None)
        head["open_block"] = ob
        start = int(state["t"]) - int(ob["items"]) + 1
        if z is not None:
            part["block_z"], part["block_start"] = np.asarray(z), start
        if x is not None:  # the open block's items written by this write (its last times)
            part["block_x"] = np.asarray(x, dtype=np.int64)
            part["block_x_from"] = int(state["t"]) - part["block_x"].shape[0] + 1
        if int(ob["items"]) < int(state["params"]["horizon"]):
            head["trees_from"] = min(start, int(state["store_from"]))
    if fenwick:
        part["trees"] = state["trees"]
        ot = state.get("open_tree")
        if "LP" not in state:  # a full state: its open tree's local prefixes as a time-indexed array
            a, t = part["arrays_from"], part["t"]
            lp = np.zeros(t - a + 1, dtype=part["NP"].dtype)
            if ot is not None:
                s, u = int(ot["start"]), int(ot["items"])
                lp[s - a : s - a + u] = np.asarray(ot["local_prefix"][1 : u + 1], dtype=lp.dtype)
            part["LP"] = lp
            trees = state["trees"]["start"]
            head["trees_from"] = int(trees[0]) if len(trees) else 1
        if ot is not None:
            head["open_tree"] = {**ot, "local_prefix": None}
    return head, part


def state_needs_from(head: dict[str, Any]) -> int:
    """The first time whose part the head still needs: parts ending before it may be dropped."""
    lo = int(head["store_from"])
    return min(lo, int(head.get("trees_from", lo)))


def join_state(head: dict[str, Any], parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The full state from the latest ``head`` and the ``parts`` in the order written (later
    parts win where they overlap); every part ending before :func:`state_needs_from` may be
    left out. Refuses (``ParameterError``) parts that do not cover the head's window."""
    if not parts:
        raise ParameterError("state is damaged: no parts to join", param="state")
    lo, t = int(head["store_from"]), int(head["t"])
    n = t - lo + 1
    out = {k: v for k, v in head.items() if k not in ("trees_from", "head")}
    keys = [k for k in TIME_KEYS if k in parts[-1]]
    for k in keys:
        last = np.asarray(parts[-1][k])
        arr = np.zeros((*last.shape[:-1], n), dtype=last.dtype)
        covered = np.zeros(n, dtype=bool)
        for p in parts:
            v = np.asarray(p[k])
            a = int(p["arrays_from"])
            i0, i1 = max(a, lo), min(a + v.shape[-1] - 1, t)
            if i1 < i0:
                continue
            arr[..., i0 - lo : i1 - lo + 1] = v[..., i0 - a : i1 - a + 1]
            covered[i0 - lo : i1 - lo + 1] = True
        if not covered.all():
            raise ParameterError(f"state is damaged: the stored parts do not cover times {lo}..{t} "
                                 f"(first gap at {lo + int(np.argmin(covered))})", param="state")
        out[k] = arr
    if "NP" in out and "LP" not in out and isinstance(out.get("open_block"), dict):
        # matrix factorisation: the open block's noise from the part that opened the block
        ob = dict(out["open_block"])
        start = int(head["t"]) - int(ob["items"]) + 1
        is_open = int(ob["items"]) < int(head["params"]["horizon"])  # a complete block's noise is all released
        ob["z"] = next((p["block_z"] for p in reversed(parts) if "block_z" in p and int(p["block_start"]) == start),
                       None) if is_open else None
        items = int(ob["items"])
        if is_open and any("block_x" in p for p in parts):
            # the open block's items from the parts written since it opened (later parts win)
            x = np.zeros(items, dtype=np.int64)
            got = np.zeros(items, dtype=bool)
            for p in parts:
                if "block_x" not in p:
                    continue
                v = np.asarray(p["block_x"], dtype=np.int64)
                a = int(p["block_x_from"]) - start
                i0, i1 = max(a, 0), min(a + v.shape[0], items)
                if i1 > i0:
                    x[i0:i1] = v[i0 - a : i1 - a]
                    got[i0:i1] = True
            if not got.all():
                raise ParameterError(f"state is damaged: the stored parts do not hold the open block's items from "
                                     f"time {start} on", param="state")
            ob["x"] = x
        out["open_block"] = ob
    if "LP" in out:  # Fenwick: the trees and the open tree's local prefixes
        lp = out.pop("LP")
        first = int(head.get("trees_from", 1))
        table: dict[int, tuple[int, float]] = {}
        for p in parts:
            tr = p["trees"]
            for s, k, length in zip(tr["start"], tr["height"], tr["length"]):
                table[int(s)] = (int(k), float(length))
        starts = sorted(s for s in table if s >= first)
        out["trees"] = {"start": starts, "height": [table[s][0] for s in starts],
                        "length": [table[s][1] for s in starts]}
        ot = head.get("open_tree")
        if ot is not None:
            s, u = int(ot["start"]), int(ot["items"])
            out["open_tree"] = {**ot, "local_prefix": [0, *lp[s - lo : s - lo + u].tolist()]}
    return out
