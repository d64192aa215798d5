"""privpub.datasets.load against the verified counts of the data READMEs; errors when files are missing."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import privpub.datasets as D
from privpub.datasets._schemas import CENSUS_CATEGORIES, adult_schema
from privpub.errors import DataNotFoundError, DomainError, ParameterError

REQUIRED = (
    "adult", "iris", "nltcs", "census_income_kdd", "nettrace", "search_logs", "social_network",
    "gowalla", "worldcup98",
)


def _load(name: str, data_dir: Path) -> D.Dataset:
    if name not in D.available(data_dir):
        pytest.skip(f"{D.info(name).files} not found under {data_dir}")
    return D.load(name, data_dir)


def test_registry_names() -> None:
    names = D.list_datasets()
    assert set(REQUIRED) <= set(names)
    assert {n for n in names if n.startswith("dpbench_1d/")} == {
        "dpbench_1d/HEPTH", "dpbench_1d/ADULTFRANK", "dpbench_1d/NETTRACE", "dpbench_1d/SEARCHLOGS",
        "dpbench_1d/LC-REQ", "dpbench_1d/MD-SAL",
    }
    assert len([n for n in names if n.startswith("dpbench_2d/")]) == 4
    assert D.__all__ == sorted(D.__all__)
    # aliases and case
    assert D.info("SEARCH_LOG").name == "search_logs"
    assert D.info("dpbench_1d/hepth").name == "dpbench_1d/HEPTH"
    assert D.info("dpbench_2d/BeijingTaxiS_256_256").name == "dpbench_2d/BJ-CABS-S"


def test_unknown_name() -> None:
    with pytest.raises(ParameterError, match=re.escape("name must be one of the registered datasets")):
        D.load("waitakere")
    with pytest.raises(ParameterError, match="name must be a dataset name"):
        D.info(3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# missing data
# --------------------------------------------------------------------------------------------
def test_missing_file_message(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError) as info:
        D.load("nettrace", tmp_path)
    msg = str(info.value)
    assert "'nettrace.txt'" in msg
    assert str(tmp_path / "hay2010_histograms" / "nettrace.txt") in msg
    assert "https://github.com/michaelghay/vldb2010data" in msg
    assert isinstance(info.value, FileNotFoundError)
    assert D.available(tmp_path) == ()


def test_missing_second_file_of_adult(tmp_path: Path, data_dir: Path) -> None:
    (tmp_path / "adult").mkdir()
    shutil.copy(data_dir / "adult" / "adult.data", tmp_path / "adult" / "adult.data")
    with pytest.raises(DataNotFoundError, match=re.escape("needs the file 'adult.test'")):
        D.load("adult", tmp_path)
    assert "adult" not in D.available(tmp_path)


def test_no_data_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(D.DATA_ENV, raising=False)
    assert D.available() == ()
    assert D.data_directory() is None
    with pytest.raises(DataNotFoundError, match=r"no data directory was given: pass data_dir or set PRIVPUB_DATA"):
        D.load("adult")


def test_environment_variable(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    monkeypatch.setenv(D.DATA_ENV, str(data_dir))
    assert D.data_directory() == data_dir
    if "iris" not in D.available():
        pytest.skip("iris not present")
    assert D.load("iris").frame.shape == (150, 5)


def test_partial_directory_and_corrupt_file(tmp_path: Path, data_dir: Path) -> None:
    src = data_dir / "iris" / "iris.data"
    if not src.is_file():
        pytest.skip("iris not present")
    (tmp_path / "iris").mkdir()
    text = src.read_text()
    (tmp_path / "iris" / "iris.data").write_text(text)
    assert D.available(tmp_path) == ("iris",)
    assert D.load("iris", tmp_path).paths == (tmp_path / "iris" / "iris.data",)
    # a value outside the declared public domain is reported, never silently kept
    (tmp_path / "iris" / "iris.data").write_text(text.replace("Iris-setosa", "Iris-unknown", 1))
    with pytest.raises(DomainError, match="outside its declared categories"):
        D.load("iris", tmp_path)


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
def test_adult(data_dir: Path) -> None:
    ds = _load("adult", data_dir)
    assert isinstance(ds, D.TableDataset)
    assert ds.frame.shape == (45_222, 15)
    assert len(ds.train) == 30_162 and len(ds.test) == 15_060  # type: ignore[arg-type]
    assert not (ds.frame == "?").any().any()
    assert ds.frame["income"].value_counts().to_dict() == {"<=50K": 34_014, ">50K": 11_208}
    assert ds.schema == adult_schema()  # declared, not inferred
    assert ds.schema["workclass"].categories[:2] == ("Private", "Self-emp-not-inc")  # adult.names order
    codes = ds.schema.encode(ds.frame, require_class=True)
    assert codes.shape == (45_222, 15)
    assert ds.frame["age"].dtype.kind == "i"


def test_census(data_dir: Path) -> None:
    ds = _load("census_income_kdd", data_dir)
    assert isinstance(ds, D.TableDataset)
    assert ds.frame.shape == (47_391, 42)
    assert ds.frame["income class"].value_counts()["50000+"] == 2_683
    assert set(ds.frame["year"]) == {94}
    assert len(ds.schema) == 40 and ds.schema.class_name == "income class"
    assert sum(len(v) for v in CENSUS_CATEGORIES.values()) == 494 and len(CENSUS_CATEGORIES) == 33
    assert "NA" in ds.schema["hispanic origin"].categories  # a real category, not a missing value
    assert ds.train is None


def test_iris_and_nltcs(data_dir: Path) -> None:
    iris = _load("iris", data_dir)
    assert isinstance(iris, D.TableDataset)
    assert iris.frame["class"].value_counts().tolist() == [50, 50, 50]
    assert iris.frame.iloc[34, :4].tolist() == [4.9, 3.1, 1.5, 0.1]  # UCI row 35, not Bezdek's
    nltcs = _load("nltcs", data_dir)
    assert isinstance(nltcs, D.TableDataset)
    assert nltcs.frame.shape == (21_574, 16)
    assert len(nltcs.frame.drop_duplicates()) == 3_152
    np.testing.assert_allclose(
        nltcs.frame.mean().round(3).to_numpy(),
        [0.146, 0.211, 0.229, 0.493, 0.106, 0.486, 0.259, 0.354, 0.217, 0.676, 0.248, 0.439,
         0.208, 0.403, 0.276, 0.555],
    )
    assert nltcs.schema.sizes == (2,) * 16


# --------------------------------------------------------------------------------------------
# histograms, grids, streams
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "n", "total", "lo", "hi", "zeros"),
    [
        ("nettrace", 65_536, 25_714, 0, 1_423, 63_318),
        ("search_logs", 32_768, 335_889, 0, 496, 17_082),
        ("social_network", 11_342, 674_708, 1, 1_678, 0),
    ],
)
def test_hay_histograms(data_dir: Path, name: str, n: int, total: int, lo: int, hi: int, zeros: int) -> None:
    ds = _load(name, data_dir)
    assert isinstance(ds, D.CountsDataset) and ds.kind == "histogram"
    c = ds.counts
    assert c.dtype == np.int64 and c.shape == (n,)
    assert (int(c.sum()), int(c.min()), int(c.max()), int((c == 0).sum())) == (total, lo, hi, zeros)
    assert not c.flags.writeable
    if name == "social_network":
        assert ds.series is None
    else:  # replayable as a stream, in file order
        assert ds.series is not None and np.array_equal(ds.series, c)


@pytest.mark.parametrize(
    ("name", "total", "nonzero"),
    [
        ("dpbench_1d/HEPTH", 347_414, 3_229),
        ("dpbench_1d/ADULTFRANK", 17_665, 82),
        ("dpbench_1d/NETTRACE", 25_714, 139),
        ("dpbench_1d/SEARCHLOGS", 335_889, 2_006),
        ("dpbench_1d/LC-REQ", 3_999_425, 1_632),
        ("dpbench_1d/MD-SAL", 135_727, 691),
        ("dpbench_2d/BJ-CABS-S", 4_268_780, 10_565),
        ("dpbench_2d/BJ-CABS-E", 4_268_780, 12_389),
        ("dpbench_2d/ADULT-2D", 32_561, 104),
        ("dpbench_2d/LC-2D", 550_559, 2_535),
        ("gowalla", 6_442_863, 3_500),
    ],
)
def test_dpbench_counts(data_dir: Path, name: str, total: int, nonzero: int) -> None:
    ds = _load(name, data_dir)
    assert isinstance(ds, D.CountsDataset)
    shape = (4096,) if name.startswith("dpbench_1d") else (256, 256)
    assert ds.counts.shape == shape and ds.counts.dtype == np.int64
    assert ds.kind == ("histogram" if len(shape) == 1 else "grid")
    assert (ds.total, int(np.count_nonzero(ds.counts))) == (total, nonzero)
    if name == "gowalla":
        assert int(ds.counts.max()) == 378_065


def test_dpbench_is_coarsened_hay(data_dir: Path) -> None:
    hay, dp = _load("nettrace", data_dir), _load("dpbench_1d/NETTRACE", data_dir)
    assert isinstance(hay, D.CountsDataset) and isinstance(dp, D.CountsDataset)
    assert np.array_equal(hay.counts.reshape(4096, 16).sum(axis=1), dp.counts)
    hay, dp = _load("search_logs", data_dir), _load("dpbench_1d/SEARCHLOGS", data_dir)
    assert isinstance(hay, D.CountsDataset) and isinstance(dp, D.CountsDataset)
    assert np.array_equal(hay.counts.reshape(4096, 8).sum(axis=1), dp.counts)


def test_worldcup98(data_dir: Path) -> None:
    ds = _load("worldcup98", data_dir)
    assert isinstance(ds, D.SeriesDataset) and ds.kind == "stream"
    s = ds.series
    assert s.shape == (125_310,) and s.dtype == np.int64
    assert ds.total == 1_352_804_107
    assert int((s == 0).sum()) == 10  # the 10 missing minutes, filled with 0
    assert int(s.max()) == 229_426 and int(s[s > 0].min()) == 1
    idx = ds.index
    assert str(idx[0]) == "1998-04-30 21:30:00" and str(idx[-1]) == "1998-07-26 21:59:00"
    assert str(idx[s == 0][0]) == "1998-05-08 03:22:00"


# --------------------------------------------------------------------------------------------
# load_counts: user-supplied files
# --------------------------------------------------------------------------------------------
def test_load_counts_formats(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("3\n0\n5\n")
    assert D.load_counts(tmp_path / "a.txt").tolist() == [3, 0, 5]
    np.save(tmp_path / "g.npy", np.array([[1.0, 2.0], [0.0, 4.0]]))
    g = D.load_counts(tmp_path / "g.npy")
    assert g.dtype == np.int64 and g.tolist() == [[1, 2], [0, 4]]
    (tmp_path / "s.csv").write_text(
        "period,count\n2000-01-01 00:00:00,4\n2000-01-01 00:01:00,2\n2000-01-01 00:04:00,7\n"
    )
    assert D.load_counts(tmp_path / "s.csv").tolist() == [4, 2, 0, 0, 7]  # dense, gaps are 0
    (tmp_path / "c.csv").write_text("bin,count\n0,1\n1,9\n")
    assert D.load_counts(tmp_path / "c.csv").tolist() == [1, 9]


def test_load_counts_errors(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="path must name an existing count file"):
        D.load_counts(tmp_path / "nope.txt")
    (tmp_path / "neg.txt").write_text("3\n-1\n")
    with pytest.raises(DomainError, match=re.escape("neg.txt must be non-negative, got minimum -1")):
        D.load_counts(tmp_path / "neg.txt")
    (tmp_path / "frac.txt").write_text("1.5\n2\n")
    with pytest.raises(DomainError, match="must hold integers"):
        D.load_counts(tmp_path / "frac.txt")
    (tmp_path / "h.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ParameterError, match="has a header but no 'count' column"):
        D.load_counts(tmp_path / "h.csv")


def test_load_counts_agrees_with_load(data_dir: Path) -> None:
    for name in ("worldcup98", "search_logs", "gowalla"):
        if name not in D.available(data_dir):
            continue
        ds = D.load(name, data_dir)
        arr = ds.series if isinstance(ds, D.SeriesDataset) else ds.counts  # type: ignore[attr-defined]
        assert np.array_equal(D.load_counts(ds.paths[0]), arr)
