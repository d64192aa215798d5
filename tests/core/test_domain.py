from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from privpub.core import CategoricalAttribute, NumericAttribute, Schema, infer_schema
from privpub.errors import DomainError, ParameterError, PrivacyWarning


@pytest.fixture
def schema() -> Schema:
    return Schema(
        [NumericAttribute("age", lo=17, hi=91, resolution=10), CategoricalAttribute("sex", ["Female", "Male"])],
        class_name="income",
        classes=["<=50K", ">50K"],
    )


def test_encode_decode_roundtrip(schema: Schema) -> None:
    df = pd.DataFrame({"age": [17, 30.5, 91], "sex": ["Male", "Female", "Male"], "income": ["<=50K", ">50K", ">50K"]})
    codes = schema.encode(df, require_class=True)
    np.testing.assert_array_equal(codes, [[0, 1, 0], [1, 0, 1], [7, 1, 1]])
    back = schema.decode(codes)
    assert list(back["sex"]) == ["Male", "Female", "Male"]
    assert list(back["income"]) == ["<=50K", ">50K", ">50K"]
    assert back["age"].between(17, 91).all()
    assert schema.sizes == (8, 2)


def test_json_roundtrip(schema: Schema) -> None:
    again = Schema.from_dict(json.loads(json.dumps(schema.to_dict())))
    assert again.names == schema.names and again.classes == schema.classes
    assert again["age"] == schema["age"]


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"age": [200], "sex": ["Male"]}), "outside its declared range"),
        (pd.DataFrame({"age": [np.nan], "sex": ["Male"]}), "NaN"),
        (pd.DataFrame({"age": [20], "sex": ["Other"]}), "outside its declared categories"),
        (pd.DataFrame({"age": [20], "sex": [None]}), "missing values"),
        (pd.DataFrame({"age": [20]}), "missing declared columns"),
        (pd.DataFrame({"age": [], "sex": []}), "must not be empty"),
    ],
)
def test_out_of_domain_data_is_refused(schema: Schema, frame: pd.DataFrame, message: str) -> None:
    with pytest.raises(DomainError, match=message):
        schema.encode(frame)


def test_bad_schemas() -> None:
    with pytest.raises(ParameterError, match="distinct"):
        CategoricalAttribute("a", ["x", "x"])
    with pytest.raises(ParameterError, match="must be > lo"):
        NumericAttribute("a", lo=1, hi=1)
    with pytest.raises(ParameterError, match="resolution"):
        NumericAttribute("a", lo=0, hi=1, resolution=0)
    with pytest.raises(ParameterError, match="together"):
        Schema([CategoricalAttribute("a", ["x"])], class_name="y")
    with pytest.raises(ParameterError, match="no attribute named"):
        Schema([CategoricalAttribute("a", ["x"])])["b"]


def test_infer_schema_warns() -> None:
    df = pd.DataFrame({"a": ["x", "y"], "b": [1, 2]})
    with pytest.warns(PrivacyWarning, match="not differentially private"):
        s = infer_schema(df)
    assert s.names == ("a", "b")
