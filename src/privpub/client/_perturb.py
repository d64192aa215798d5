"""Client-side perturbation for a campaign's public configuration, with the library's randomisers.

Everything here runs on the participant's device (or a simulator); only the returned payloads
ever leave it. Frequency campaigns use :mod:`privpub.ldp` oracles, synthetic-data campaigns
:func:`privpub.ldp_synth.perturb_codes` (RAPPOR blocks), spatial campaigns locate the point in the
public partition of the participant's group with the :mod:`privpub.spatial` kernels and report the
cell with OUE.

Importing this module loads NumPy and the frequency-oracle and spatial-location code only
(issue 27: the SDK runs on small devices); the synthetic-data path imports pandas and
:mod:`privpub.ldp_synth` when a synth campaign is first perturbed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from privpub.client._randomness import device_rng
from privpub.core import RNGLike, check_bounds_2d
from privpub.errors import DomainError, ParameterError
from privpub.ldp import OUE, SUE
from privpub.ldp.wire import encode_payloads, frequency_oracle
from privpub.spatial.protocol import check_points, grid_edges, interval_index, leaf_lookup, locate_in_leaves

__all__ = ["cell_domain_size", "frequency_oracle", "locate_cells", "perturb_values"]


def cell_domain_size(partition: Mapping[str, Any]) -> int:
    """Number of cells of a spatial group's public partition (the OUE domain is at least 2)."""
    kind = partition["type"]
    if kind == "grid":
        return int(partition["g"]) ** 2
    if kind == "intervals":
        return len(partition["edges"]) - 1
    if kind == "leaves":
        return len(partition["x0"])
    raise ParameterError(f"unknown partition type {kind!r}")


def locate_cells(partition: Mapping[str, Any], points: NDArray[np.float64]) -> NDArray[np.int64]:
    """Cell index of each point in a public partition (half-open cells, top/right edge closed)."""
    kind = partition["type"]
    if kind == "grid":
        g = int(partition["g"])
        x0, y0, x1, y1 = partition["bounds"]
        ix = interval_index(grid_edges(x0, x1, g), points[:, 0])
        iy = interval_index(grid_edges(y0, y1, g), points[:, 1])
        return ix * g + iy
    if kind == "intervals":
        return interval_index(np.asarray(partition["edges"], dtype=np.float64), points[:, int(partition["axis"])])
    if kind == "leaves":
        arrs = [np.asarray(partition[k], dtype=np.float64) for k in ("x0", "x1", "y0", "y1")]
        cells = locate_in_leaves(leaf_lookup(*arrs), points[:, 0], points[:, 1])
        if np.any(cells < 0):  # pragma: no cover - the leaves partition the domain
            raise DomainError("a point fell outside every leaf of the partition")
        return cells
    raise ParameterError(f"unknown partition type {kind!r}")


def _frequency(config: Mapping[str, Any], values: Sequence[Any], gen: np.random.Generator) -> NDArray[np.uint8]:
    index = {c: i for i, c in enumerate(config["categories"])}
    try:
        codes = np.fromiter((index[str(v)] for v in values), dtype=np.int64, count=len(values))
    except KeyError:
        raise DomainError(
            "a value is not one of the campaign's declared categories (see its public configuration)"
        ) from None
    oracle = frequency_oracle(config)
    eps = float(config["epsilon"])
    if isinstance(oracle, OUE | SUE):
        reports = oracle.perturb(codes, epsilon=eps, rng=gen, packed=True)
    else:
        reports = oracle.perturb(codes, epsilon=eps, rng=gen)
    return encode_payloads(config["payload"]["layout"], reports, len(index))


def _synth(config: Mapping[str, Any], values: Any, gen: np.random.Generator) -> NDArray[np.uint8]:
    import pandas as pd  # the synth path only: frequency and spatial devices never load pandas

    from privpub.core import Schema
    from privpub.ldp_synth import perturb_codes

    schema = Schema.from_dict(config["schema"])
    frame = values if isinstance(values, pd.DataFrame) else pd.DataFrame(list(values))
    extra = [str(c) for c in frame.columns if c not in schema.names]
    if extra:
        raise DomainError(f"values have fields the campaign does not declare: {extra}")
    codes = schema.encode(frame)
    reports = perturb_codes(codes, schema.sizes, flip_prob=float(config["flip_prob"]), rng=gen)
    return encode_payloads("bits", reports.bits, int(sum(schema.sizes)))


def _spatial(config: Mapping[str, Any], points: ArrayLike, partition: Mapping[str, Any],
             gen: np.random.Generator) -> NDArray[np.uint8]:
    box = check_bounds_2d(config["bounds"])
    pts = check_points(points, box)
    d = max(cell_domain_size(partition), 2)
    cells = locate_cells(partition, pts)
    reports = OUE(domain_size=d).perturb(cells, epsilon=float(config["epsilon"]), rng=gen, packed=True)
    return encode_payloads("bits", reports, d)


def perturb_values(
    config: Mapping[str, Any],
    values: Any,
    *,
    partition: Mapping[str, Any] | None = None,
    rng: RNGLike = "secure",
) -> NDArray[np.uint8]:
    """Perturb one participant's value per row and return the ``(n, width)`` payloads.

    Parameters
    ----------
    config : mapping
        The campaign's public configuration (``GET /campaigns/{id}``).
    values : sequence
        Frequency: category names. Synth: a DataFrame or a list of records (dicts) over the
        declared attributes. Spatial: an ``(n, 2)`` array of points inside the public bounds.
    partition : mapping, optional
        Spatial only: the public partition of the participants' group (from the configuration
        for UG, from the assignment for KDG-HT).
    rng : int, Generator, "secure" or None
        The randomisers' randomness. ``"secure"`` (the default, what a device must use): a
        fresh ChaCha20 stream keyed from the operating system's CSPRNG for this call
        (:func:`privpub.client.device_generator`). An int or a Generator gives a seeded,
        reproducible PCG64 stream: for tests and simulations only, never on a device.

    Notes
    -----
    **Privacy:** each row is one participant's report, epsilon-LDP at the campaign's declared
    epsilon; the raw value is used only here, on the client.
    """
    gen = device_rng(rng)
    kind = config["kind"]
    if kind == "frequency":
        return _frequency(config, list(values), gen)
    if kind == "synth":
        return _synth(config, values, gen)
    if kind == "spatial":
        if partition is None:
            raise ParameterError("partition must be given for a spatial campaign", param="partition")
        return _spatial(config, values, partition, gen)
    raise ParameterError(f"unknown campaign kind {kind!r}")
