"""TreeNoise: charges per tree configuration, draws only for opened trees, chunk-independent noise."""

from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest
from scipy import stats

from privpub.core import Accountant, TreeNoise, discrete_laplace_pmf
from privpub.errors import BudgetExceededError, ParameterError, PrivpubError
from privpub.stream._kernels import fenwick_uppath


def _noise(eps=1.0, sens=1.0, **kw):
    acc = Accountant(eps)
    return acc, TreeNoise(epsilon=eps, sensitivity=sens, accountant=acc, rng=kw.pop("rng", 0), **kw)


@pytest.mark.parametrize("noise", ["discrete", "laplace"])
def test_uniform_fenwick_plan_charges_one_entry_per_level(noise):
    acc, tn = _noise(0.7, 2.0, noise=noise)
    plan = tn.plan(4)
    assert (plan.T, plan.size, plan.rows, plan.uniform) == (8, 8, 1, True)
    np.testing.assert_allclose(plan.budgets, 0.7 / 4)
    # the noise scale is sensitivity * height / epsilon (exact rational for discrete noise)
    assert plan.scales[0, 0] == pytest.approx(2.0 * 4 / 0.7)
    tn.open(plan, 3)
    tn.open(plan, 2)
    tn.flush()
    ledger = acc.snapshot()
    assert [e.step for e in ledger] == ["level 0", "level 1", "level 2", "level 3"]
    assert all(e.parts == 5 and e.composition == "parallel" and e.sensitivity == 2.0 for e in ledger)
    assert all(e.mechanism == ("discrete_laplace" if noise == "discrete" else "laplace") for e in ledger)
    assert [e.epsilon for e in ledger] == [0.7 / 4] * 4
    assert ledger.total == pytest.approx(0.7, rel=1e-15)
    assert "the root (8 items)" in ledger.entries[3].note


def test_binary_plan_every_item_meets_every_level():
    acc, tn = _noise(1.0, structure="binary")
    plan = tn.plan(3)
    assert (plan.T, plan.size) == (4, 7)
    tn.open(plan, 10)
    tn.flush()
    assert [(e.step, e.parts) for e in acc.snapshot()] == [("level 0", 10), ("level 1", 10), ("level 2", 10)]
    assert acc.total == pytest.approx(1.0)
    assert "4 disjoint nodes of 1 items" in acc.snapshot().entries[0].note


def test_weighted_plan_charges_the_largest_item_total():
    rng = np.random.default_rng(1)
    w = rng.uniform(0.05, 0.3, size=(3, 8))
    for structure, size, nodes_of in (("fenwick", 8, lambda m: [v - 1 for v in fenwick_uppath(m, 8)]),
                                      ("binary", 15, lambda m: [m - 1, 8 + (m - 1) // 2, 12 + (m - 1) // 4, 14])):
        acc, tn = _noise(2.0, noise="laplace", structure=structure)
        ww = rng.uniform(0.05, 0.3, size=(3, size)) if structure == "binary" else w
        plan = tn.plan(4, ww)
        totals = np.array([[sum(2.0 * ww[r, v] for v in nodes_of(m)) for m in range(1, 9)] for r in range(3)])
        np.testing.assert_allclose(plan.totals, totals.max(axis=1))
        # scaled to a largest total of 0.9 epsilon: charged; to 1.1 epsilon: refused
        ok = tn.plan(4, ww * (0.9 / totals.max()) * 2.0)
        tn.open(ok)
        assert acc.total == pytest.approx(0.9 * 2.0)
        bad = tn.plan(4, ww * (1.1 / totals.max()) * 2.0)
        with pytest.raises(BudgetExceededError):
            tn.open(bad)


def test_mm_style_budgets_are_one_charge_of_epsilon_per_height():
    from privpub.stream import mm_budgets

    acc, tn = _noise(1.0)
    rows = np.stack([mm_budgets(4, L, 1.0) for L in (20.0, 33.5, 8.0)])
    plan = tn.plan(4, rows)
    tn.open(plan)
    tn.open(plan.take(slice(1, 2)), 5)
    tn.flush()
    (entry,) = acc.snapshot().entries
    assert (entry.epsilon, entry.parts, entry.step) == (1.0, 8, "tree nodes")
    assert "per-node budgets" in entry.branch


def test_doubled_weights_are_refused_before_drawing():
    from privpub.stream import mm_budgets

    acc, tn = _noise(1.0)
    plan = tn.plan(3, 2 * mm_budgets(3, 4.0, 1.0))
    with pytest.raises(BudgetExceededError, match="nothing was drawn"):
        tn.open(plan)
    with pytest.raises(PrivpubError, match="open \\(charge\\) a tree before drawing"):
        tn.draw(plan, 1, np.array([0]))
    assert acc.total == 0.0


def test_draws_need_opened_trees():
    _, tn = _noise(1.0)
    plan = tn.plan(2)
    with pytest.raises(PrivpubError, match="more nodes than the trees opened"):
        tn.draw_one(plan, 0)
    tn.open(plan)
    tn.draw(plan, 2)
    with pytest.raises(PrivpubError, match="more nodes than the trees opened"):
        tn.draw(plan, 1)


@pytest.mark.parametrize("noise", ["discrete", "laplace"])
@pytest.mark.parametrize("weighted", [False, True])
def test_noise_does_not_depend_on_how_draws_are_split(noise, weighted):
    from privpub.stream import mm_budgets

    w = mm_budgets(5, 12.0, 1.0) if weighted else None
    _a_acc, a = _noise(1.0, rng=7, noise=noise)
    _b_acc, b = _noise(1.0, rng=7, noise=noise)
    pa, pb = a.plan(5, w), b.plan(5, w)
    a.open(pa, 200)
    b.open(pb, 200)
    nodes = np.arange(16 * 200) % 16
    whole = a.draw(pa, nodes.size, nodes)
    pieces, i = [], 0
    sizes = np.random.default_rng(3).integers(1, 300, size=100)
    for size in sizes:
        if i >= nodes.size:
            break
        if size < 5:
            pieces.extend(b.draw_one(pb, int(n)) for n in nodes[i : i + size])
        else:
            pieces.extend(b.draw(pb, len(nodes[i : i + size]), nodes[i : i + size]).tolist())
        i += size
    np.testing.assert_array_equal(whole[: len(pieces)], np.array(pieces))


@pytest.mark.parametrize("noise", ["discrete", "laplace"])
def test_draw_span_equals_node_by_node_draws(noise):
    from privpub.stream import mm_budgets

    rows = np.stack([mm_budgets(4, L, 1.0) for L in (5.0, 8.0)])
    _a_acc, a = _noise(1.0, rng=3, noise=noise)
    _b_acc, b = _noise(1.0, rng=3, noise=noise)
    pa, pb = a.plan(4, rows), b.plan(4, rows)
    a.open(pa, 400)
    b.open(pb, 400)
    start, got, want = 5, [], []
    for count in (2, 1, 30, 8, 3, 100, 1, 700, 41):  # spans crossing tree boundaries, partial rows
        got.append(a.draw_span(pa, start % 8, count, row=1))
        want.extend(b.draw_one(pb, int(v), 1) for v in (start + np.arange(count)) % 8)
        start += count
    np.testing.assert_array_equal(np.concatenate(got), np.array(want))


def test_weighted_discrete_scales_are_rounded_up_at_most_one_64th():
    _acc, tn = _noise(1.0, 3.0)
    w = np.random.default_rng(2).uniform(0.01, 0.2, size=(4, 16))
    plan = tn.plan(5, w)
    want = 3.0 / w
    assert np.all(plan.scales >= want)
    assert np.all(plan.scales <= want * (1 + 1 / 64))
    assert len(np.unique(plan.scales)) < w.size


@pytest.mark.statistical
def test_pooled_discrete_noise_has_the_discrete_laplace_law():
    from privpub.stream import mm_budgets

    _, tn = _noise(1.0)
    plan = tn.plan(4, mm_budgets(4, 8.0, 1.0))
    n = 20_000
    tn.open(plan, n)
    nodes = np.tile(np.arange(8), n)
    z = tn.draw(plan, nodes.size, nodes).reshape(n, 8)
    for v in (0, 3, 7):  # three nodes with three different scales
        scale = plan.scales[0, v]
        support = np.arange(-60, 61)
        probs = discrete_laplace_pmf(support, epsilon=1.0, sensitivity=scale)
        observed = np.array([(z[:, v] == s).sum() for s in support])
        expected = probs / probs.sum() * observed.sum()
        keep = expected > 5
        p = stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue
        assert p > 1e-4, (v, p)
        assert np.var(z[:, v]) == pytest.approx(plan.variances[0, v], rel=0.06)


@pytest.mark.parametrize("noise", ["discrete", "laplace"])
def test_checkpoint_and_restore_continue_identically(noise):
    from privpub.stream import mm_budgets

    gen = np.random.default_rng(11)
    acc, tn = _noise(1.0, rng=gen, noise=noise)
    plan = tn.plan(4, mm_budgets(4, 6.0, 1.0))
    tn.open(plan, 4)
    tn.draw(plan, 10, np.arange(10) % 8)
    tn.checkpoint()
    record = tn.record()
    acc2 = Accountant(1.0)
    tn2 = TreeNoise(epsilon=1.0, accountant=acc2, rng=copy.deepcopy(gen), noise=noise)
    tn2.restore(record)
    plan2 = tn2.plan(4, mm_budgets(4, 6.0, 1.0))
    nodes = np.arange(10, 32) % 8
    np.testing.assert_array_equal(tn.draw(plan, 22, nodes), tn2.draw(plan2, 22, nodes))
    assert [(e.epsilon, e.parts) for e in acc.snapshot()] == [(e.epsilon, e.parts) for e in acc2.snapshot()]


def test_bad_arguments():
    acc = Accountant(1.0)
    with pytest.raises(ParameterError, match=re.escape("accountant must be a privpub.core.Accountant")):
        TreeNoise(epsilon=1.0, accountant="acc")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="structure must be one of"):
        TreeNoise(epsilon=1.0, accountant=acc, structure="quad")
    with pytest.raises(ParameterError, match="sensitivity must be > 0"):
        TreeNoise(epsilon=1.0, accountant=acc, sensitivity=0)
    tn = TreeNoise(epsilon=1.0, accountant=acc)
    with pytest.raises(ParameterError, match="height must be at most 62"):
        tn.plan(63)
    with pytest.raises(ParameterError, match=re.escape("weights must have shape (4,) or (rows, 4)")):
        tn.plan(3, [0.5, 0.5])
    with pytest.raises(ParameterError, match="weights must be finite and > 0"):
        tn.plan(2, [0.5, math.nan])


# -- noise="laplace" is exact grid noise (issue 34) -------------------------------------------------
@pytest.mark.statistical
def test_laplace_tree_noise_is_discrete_laplace_on_the_grid() -> None:
    """Node noise of ``noise="laplace"`` is ``g Z`` (``g = laplace_grid(epsilon, sensitivity)``,
    ``Z`` integer): never floating-point Laplace. Its variance is the plan's, within 5 standard
    deviations (Laplace kurtosis: ``E Z^4 = 6 Var^2``), for a uniform and a weighted plan."""
    import math

    from privpub.core import laplace_grid

    for real, units in ((False, 2.0 / 2.0**-19), (True, 2.0 / 2.0**-19 + 1)):
        acc = Accountant(1.0)
        tn = TreeNoise(epsilon=1.0, sensitivity=2.0, accountant=acc, rng=5, noise="laplace", real=real)
        g = laplace_grid(1.0, 2.0)
        assert tn.grid == g == 2.0**-19
        uni = tn.plan(4)  # scale 4 * 2 / 1 = 8, rounded up in grid steps: 4 * units
        assert uni.scales[0, 0] * (1 - 1e-12) <= g * 4 * units <= uni.scales[0, 0]
        n_trees = 20_000
        tn.open(uni, n_trees)
        z = tn.draw(uni, n_trees * uni.size)
        assert z.dtype == np.float64 and np.all(np.rint(z / g) * g == z)
        var = float(uni.variances[0, 0])
        assert abs(float(np.mean(z * z)) - var) <= 5 * math.sqrt(5 * var**2 / z.size)
        w = np.linspace(0.1, 0.25, uni.size)
        weighted = tn.plan(4, w)
        tn.open(weighted, 10)
        zw = tn.draw(weighted, 10 * uni.size, np.tile(np.arange(uni.size), 10))
        assert np.all(np.rint(zw / g) * g == zw)
        assert np.all(weighted.scales >= g * units / (1.0 * w))  # never less noise than asked


def test_laplace_tree_noise_same_seed_same_noise_and_real_needs_laplace() -> None:
    def draws() -> np.ndarray:
        tn = TreeNoise(epsilon=0.5, accountant=Accountant(1.0), rng=11, noise="laplace")
        plan = tn.plan(3)
        tn.open(plan, 4)
        return np.concatenate([[tn.draw_one(plan, 0)], tn.draw(plan, 7), tn.draw_span(plan, 0, 8)])

    assert np.array_equal(draws(), draws())
    with pytest.raises(ParameterError) as err:
        TreeNoise(epsilon=0.5, accountant=Accountant(1.0), noise="discrete", real=True)
    assert err.value.param == "real"
