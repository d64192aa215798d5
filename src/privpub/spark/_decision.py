"""The Spark backend of the decision publishers' aggregation seam (MAXGDDP, DiffGen).

Answers :class:`privpub.decision._aggregate.DecisionCounts` from a ``pyspark.sql.DataFrame``:
the records are encoded to fine codes inside Spark with the same public arithmetic as the
in-memory encoder (``rint((x - lo) / q)``, the public grid, the declared categories), and every
request is ONE Spark job whose result is bounded by the public domain of the current cut:

* validation: one aggregation (row count, NaN/out-of-range/unknown counts per column), before
  anything is reserved or drawn; violations raise the in-memory encoder's DomainError;
* a MAXGDDP level: one aggregation over the rows exploded once per scored attribute
  (``(attribute, partition key, fine code, class) -> count``);
* DiffGen's selection: one aggregation of the class counts per fine code of every attribute;
* the leaf cells: one aggregation per cell id of the final cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from privpub.core import PrivacyUnit, Schema
from privpub.decision.model import Attr, Cut, LevelTable, partition_attributes, row_content
from privpub.errors import DomainError, ParameterError
from privpub.spark._bound import bound_frame, check_id_column
from privpub.spark._frame import (
    categorical_stats_exprs,
    category_code,
    check_frame,
    collect_arrays,
    is_numeric_column,
    numeric_stats_exprs,
    raise_categorical,
    raise_numeric,
    require_pyspark,
    searchsorted_expr,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["SparkDecisionCounts", "encode_columns"]

I64 = NDArray[np.int64]


def _fine_expr(attr: Attr) -> Column:
    """Fine code of column ``attr.name`` (already validated), as :meth:`Attr.fine` computes it."""
    F = require_pyspark()
    if attr.kind == "cat":
        return category_code(attr.name, attr.source.categories, attr.cat_to_fine)
    x = F.col(attr.name).cast("double")
    tick: Column = F.least(F.greatest(F.rint((x - F.lit(float(attr.lo))) / F.lit(float(attr.q))), F.lit(0.0)),
                   F.lit(float(attr.n_ticks - 1))).cast("long")
    if attr.kind == "ticks":
        return tick
    return searchsorted_expr(tick, attr.edges)


def validate(attrs: tuple[Attr, ...], schema: Schema, df: DataFrame) -> None:
    """The checks of :func:`privpub.decision._model.encode_frame`, in the same order, in one Spark job."""
    F = require_pyspark()
    cls = schema.class_name
    if cls not in df.columns:
        raise DomainError(f"data has no target column {cls!r} (the schema's class_name)")
    missing = [a.name for a in attrs if a.name not in df.columns]
    if missing:
        raise DomainError(f"data is missing the schema's columns {missing}")
    # a column of the wrong type stops the checks there (the in-memory order: attribute by attribute)
    upto = len(attrs)
    for j, a in enumerate(attrs):
        if a.numeric and not is_numeric_column(df, a.name):
            upto = j
            break
    exprs: list[Column] = [F.count(F.lit(1)).alias("n")]
    for j, a in enumerate(attrs[:upto]):
        if a.numeric:
            exprs += numeric_stats_exprs(a.name, f"a{j}")
        else:
            exprs += categorical_stats_exprs(df, a.source, f"a{j}")
    cattr = schema.class_attribute
    assert cattr is not None
    if upto == len(attrs):
        exprs += categorical_stats_exprs(df, cattr, "cls")
    stats = df.agg(*exprs).collect()[0].asDict()
    if int(stats["n"]) == 0:
        raise DomainError("data must not be empty, got 0 rows")
    for j, a in enumerate(attrs[:upto]):
        if a.numeric:
            raise_numeric(a.source, stats, f"a{j}")
        else:
            raise_categorical(df, a.source, stats, f"a{j}")
    if upto < len(attrs):
        a = attrs[upto]
        raise DomainError(f"column {a.name!r} must be numeric, got dtype {df.schema[a.name].dataType.simpleString()}")
    raise_categorical(df, cattr, stats, "cls")


def encode_columns(attrs: tuple[Attr, ...], schema: Schema, df: DataFrame, id_column: str | None = None) -> DataFrame:
    """``df`` encoded to long columns ``f0..f{d-1}`` (fine codes) and ``y`` (class code), plus
    ``pid`` (the privacy id) when ``id_column`` is given; lazy."""
    F = require_pyspark()
    cattr = schema.class_attribute
    assert cattr is not None
    cols = [_fine_expr(a).alias(f"f{j}") for j, a in enumerate(attrs)]
    cols.append(category_code(cattr.name, cattr.categories).alias("y"))
    if id_column is not None:
        cols.append(F.col(id_column).alias("pid"))
    return df.select(*cols)


def _content(n_attrs: int) -> Any:
    """The content of encoded rows for contribution bounding: :func:`privpub.decision.model.row_content`
    of their fine codes and class, exactly what the in-memory path hashes."""
    fcols = [f"f{j}" for j in range(n_attrs)]

    def content(rows: Any) -> Any:
        return row_content(rows[fcols].to_numpy(dtype=np.int64), rows["y"].to_numpy(dtype=np.int64))
    return content


class SparkDecisionCounts:
    """:class:`~privpub.decision._aggregate.DecisionCounts` computed by Spark jobs.

    Construction validates ``df`` against the public schema (one job). The encoded frame is
    lazy: each request re-reads ``df`` (persist it yourself, e.g. ``df.cache()``, to read it
    once; it must be a fixed snapshot, the same records for every job).

    With a person ``privacy_unit`` (and the bounding ``key``), the privacy-id column is checked
    (one job: present, no missing id) and the rows are bounded to at most ``k`` per person inside
    Spark once (one job; :func:`privpub.spark._bound.bound_frame`: the rows the pandas path keeps
    for the same key), kept as a local checkpoint that every request reads; the id column is
    dropped after the bounding.
    """

    def __init__(self, attrs: tuple[Attr, ...], schema: Schema, df: Any, *,
                 privacy_unit: PrivacyUnit | None = None, key: str | None = None) -> None:
        df = check_frame(df, "data")
        validate(attrs, schema, df)
        self.attrs = attrs
        self.n_classes = len(schema.classes or ())
        self.jobs = 1  # the validation job
        if privacy_unit is not None and privacy_unit.kind == "person":
            assert privacy_unit.column is not None and privacy_unit.max_contributions is not None
            if key is None:
                raise ParameterError("a person-level release needs the key of its contribution bounding", param="key")
            check_id_column(df, privacy_unit.column)
            bounded = bound_frame(encode_columns(attrs, schema, df, privacy_unit.column), "pid",
                                  privacy_unit.max_contributions, key, _content(len(attrs)))
            # the bounding (a shuffle and a Python function per person) runs once, in its own job:
            # every request then reads the kept rows from the executors' storage instead of bounding
            # again (a local checkpoint: no lineage back to df; freed when this object is)
            self.encoded = bounded.localCheckpoint(eager=True)
            self.jobs += 2
        else:
            self.encoded = encode_columns(attrs, schema, df)

    def _cut_index(self, cut: Cut, j: int) -> Column:
        F = require_pyspark()
        if len(cut.starts) == 1:
            zero: Column = F.lit(0).cast("long")
            return zero
        return searchsorted_expr(F.col(f"f{j}"), [*cut.starts, cut.attr.n_fine])

    def _mixed_radix(self, cuts: list[Cut], group: list[int]) -> Column:
        F = require_pyspark()
        key: Column = F.lit(0).cast("long")
        for j in group:
            key = key * F.lit(len(cuts[j].starts)).cast("long") + self._cut_index(cuts[j], j)
        return key

    def level_tables(self, cuts: list[Cut], attributes: list[int], pooled: bool) -> dict[int, LevelTable]:
        """One Spark job: ``(attribute, partition key, fine code, class) -> count`` for all ``attributes``."""
        F = require_pyspark()
        if not attributes:
            return {}
        rows = F.array(*[
            F.struct(F.lit(a).cast("long").alias("a"),
                     self._mixed_radix(cuts, partition_attributes(cuts, a, pooled)).alias("p"),
                     F.col(f"f{a}").alias("f"))
            for a in attributes
        ])
        agg = (self.encoded.select(F.explode(rows).alias("r"), "y")
               .groupBy(F.col("r.a").alias("a"), F.col("r.p").alias("p"), F.col("r.f").alias("f"), "y")
               .agg(F.count(F.lit(1)).alias("n")))
        got = collect_arrays(agg, ["a", "p", "f", "y", "n"])
        self.jobs += 1
        out: dict[int, LevelTable] = {}
        for a in attributes:
            sel = got["a"] == a
            uniq, pid = np.unique(got["p"][sel], return_inverse=True)
            out[a] = LevelTable(pid.reshape(-1).astype(np.int64), max(1, uniq.size), got["f"][sel], got["y"][sel],
                                got["n"][sel])
        return out

    def marginals(self) -> dict[int, tuple[I64, NDArray[np.int64]]]:
        """One Spark job: ``(attribute, fine code, class) -> count`` for every attribute."""
        F = require_pyspark()
        k = self.n_classes
        rows = F.array(*[F.struct(F.lit(a).cast("long").alias("a"), F.col(f"f{a}").alias("f"))
                         for a in range(len(self.attrs))])
        agg = (self.encoded.select(F.explode(rows).alias("r"), "y")
               .groupBy(F.col("r.a").alias("a"), F.col("r.f").alias("f"), "y")
               .agg(F.count(F.lit(1)).alias("n")))
        got = collect_arrays(agg, ["a", "f", "y", "n"])
        self.jobs += 1
        out: dict[int, tuple[I64, NDArray[np.int64]]] = {}
        for a in range(len(self.attrs)):
            sel = got["a"] == a
            vals, inv = np.unique(got["f"][sel], return_inverse=True)
            counts = np.zeros((vals.size, k), dtype=np.int64)
            np.add.at(counts, (inv.reshape(-1), got["y"][sel]), got["n"][sel])
            out[a] = (vals.astype(np.int64), counts)
        return out

    def cell_counts(self, cuts: list[Cut]) -> tuple[I64, I64]:
        """One Spark job: the count of every non-empty (leaf partition, class) cell, ids ascending."""
        F = require_pyspark()
        key = self._mixed_radix(cuts, list(range(len(cuts)))) * F.lit(self.n_classes).cast("long") + F.col("y")
        agg = self.encoded.select(key.alias("c")).groupBy("c").agg(F.count(F.lit(1)).alias("n"))
        got = collect_arrays(agg, ["c", "n"])
        self.jobs += 1
        order = np.argsort(got["c"], kind="stable")
        return got["c"][order], got["n"][order]

