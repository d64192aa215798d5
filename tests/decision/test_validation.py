"""Bad input raises clear privpub errors (issue 6 acceptance) and the public namespace is curated."""

from __future__ import annotations

import numpy as np
import pytest

import privpub.decision as decision
from privpub.decision import MAXGDDP, DiffGen, Schema
from privpub.errors import DomainError, ParameterError


@pytest.mark.parametrize("cls", [MAXGDDP, DiffGen])
def test_bad_input_raises(cls, frame, schema) -> None:
    pub = cls(levels=3)
    with pytest.raises(DomainError, match=r"values outside its declared categories: \['zzz'\]"):
        pub.publish(frame.assign(c1=["zzz", *list(frame["c1"][1:])]), schema=schema, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="no target column 'y'"):
        pub.publish(frame.drop(columns="y"), schema=schema, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="NaN"):
        pub.publish(frame.assign(x=np.where(np.arange(len(frame)) == 3, np.nan, frame["x"])),
                    schema=schema, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="outside its declared range"):
        pub.publish(frame.assign(x=frame["x"] + 100), schema=schema, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="missing the schema's columns \\['z'\\]"):
        pub.publish(frame.drop(columns="z"), schema=schema, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="values outside its declared categories"):
        pub.publish(frame.assign(y="other"), schema=schema, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="must not be empty"):
        pub.publish(frame.iloc[:0], schema=schema, epsilon=1.0, rng=0)
    with pytest.raises(ParameterError, match="epsilon must be"):
        pub.publish(frame, schema=schema, epsilon=0.0, rng=0)
    with pytest.raises(ParameterError, match="epsilon must be"):
        pub.publish(frame, schema=schema, epsilon=float("inf"), rng=0)
    no_target = Schema(list(schema.attributes))
    with pytest.raises(ParameterError, match="schema must declare the target"):
        pub.publish(frame, schema=no_target, epsilon=1.0, rng=0)
    with pytest.raises(ParameterError, match="DataFrame"):
        pub.publish(frame.to_numpy(), schema=schema, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="must be numeric"):
        pub.publish(frame.assign(x="a"), schema=schema, epsilon=1.0, rng=0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"levels": 0}, "levels must be an integer >= 1, got 0"),
    ({"levels": -3}, "levels must be an integer >= 1"),
    ({"levels": 2.5}, "levels must be an integer >= 1"),
    ({"levels": True}, "levels must be an integer >= 1"),
    ({"levels": 3, "noise": "gauss"}, "noise must be 'discrete' or 'laplace'"),
    ({"levels": 3, "fanout": 1}, "fanout must be an integer >= 2"),
    ({"levels": 3, "taxonomies": ["a"]}, "taxonomies must be a mapping"),
])
def test_bad_parameters(kwargs, message) -> None:
    for cls in (MAXGDDP, DiffGen):
        with pytest.raises(ParameterError, match=message):
            cls(**kwargs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"split": 1.0}, "split must be in \\(0, 1\\)"),
    ({"schedule": "linear"}, "schedule must be 'geometric' or 'uniform'"),
    ({"score": "gain"}, "score must be 'max_partition' or 'max'"),
    ({"fanout_ratio": 1.0}, "fanout_ratio must be > 1"),
    ({"max_split_candidates": 0}, "max_split_candidates must be an integer >= 1"),
])
def test_bad_maxgddp_parameters(kwargs, message) -> None:
    with pytest.raises(ParameterError, match=message):
        MAXGDDP(levels=3, **kwargs)


def test_bad_diffgen_parameters() -> None:
    with pytest.raises(ParameterError, match="score must be 'max' or 'infogain'"):
        DiffGen(levels=3, score="max_partition")


def test_generalize_rejects_unknown_values(frame, schema) -> None:
    rel = MAXGDDP(levels=3).publish(frame, schema=schema, epsilon=1.0, rng=0)
    with pytest.raises(DomainError, match="declared categories"):
        rel.generalize(frame.assign(c2="new"))


def test_too_many_noise_rows_is_refused(frame, schema) -> None:
    with pytest.raises(ParameterError, match="max_synthetic_rows"):
        MAXGDDP(levels=6, max_synthetic_rows=10).publish(frame, schema=schema, epsilon=1.0, rng=0)


def test_schema_classes_reexported_from_core() -> None:
    import privpub.core as core

    assert decision.Schema is core.Schema
    assert decision.NumericAttribute is core.NumericAttribute
    assert decision.CategoricalAttribute is core.CategoricalAttribute
    assert list(decision.__all__) == sorted(decision.__all__)
    for name in decision.__all__:
        assert hasattr(decision, name)
    assert {"MAXGDDP", "DiffGen", "Schema", "NumericAttribute", "CategoricalAttribute"} <= set(decision.__all__)
