"""Errors as data (issue 24) on a real ``privpub serve``: every error body is FastAPI's shape
(``detail``: ``loc``, ``msg``, ``type``) beside privpub's ``error``, a request's problems all come
back at once, and a field named by a library error comes from its ``param``."""

from __future__ import annotations

import httpx
import pytest

from privpub.cli._service import check_response
from privpub.errors import PrivpubError

STREAM = {"name": "e", "publisher": "rtp", "epsilon": 1.0, "window": 8}


def _detail(resp: httpx.Response, status: int) -> list[dict[str, object]]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    detail = body["detail"]
    assert isinstance(detail, list) and detail
    for item in detail:
        assert set(item) == {"loc", "msg", "type"}, item
        assert isinstance(item["loc"], list) and item["msg"] and item["type"]
        assert not item["loc"] or item["loc"][0] in ("body", "path", "query", "header"), item
    return detail  # type: ignore[no-any-return]


def test_two_invalid_fields_come_back_in_one_422(admin: httpx.Client) -> None:
    n = len(admin.get("/streams").json()["streams"])
    resp = admin.post("/streams", json={**STREAM, "epsilon": -1, "window": 0})
    detail = _detail(resp, 422)
    # both problems in one answer (in the spec model's field order: the budget fields follow the
    # publisher's since streams take epsilon or rho)
    assert sorted(d["loc"] for d in detail) == [["body", "epsilon"], ["body", "window"]]
    assert {d["type"] for d in detail} == {"greater_than", "greater_than_equal"}
    err = resp.json()["error"]                  # privpub's envelope (the clients) lists both too
    assert err["field"] == detail[0]["loc"][1] and [e["field"] for e in err["errors"]] == [d["loc"][1] for d in detail]
    assert sorted(e["field"] for e in err["errors"]) == ["epsilon", "window"]
    assert len(admin.get("/streams").json()["streams"]) == n   # nothing was stored
    # the CLI's rendering of the refusal names both fields
    with pytest.raises(PrivpubError) as info:
        check_response(resp)
    assert "epsilon: " in str(info.value) and "window: " in str(info.value)


def test_three_problems_of_a_campaign_come_back_at_once(admin: httpx.Client) -> None:
    resp = admin.post("/campaigns", json={"name": "", "kind": "frequency", "epsilon": "lots", "unknown": 1,
                                          "categories": ["a", "b"]})
    detail = _detail(resp, 422)
    assert [d["loc"] for d in detail] == [["body", "name"], ["body", "epsilon"], ["body", "unknown"]]
    assert [d["type"] for d in detail] == ["string_too_short", "float_parsing", "extra_forbidden"]


def test_a_library_error_names_its_param(admin: httpx.Client) -> None:
    """``history`` is refused by the publisher (rtp is not adaptive), not by the request model: the
    field is the error's ``param``."""
    detail = _detail(admin.post("/streams", json={**STREAM, "history": [3, 4]}), 422)
    assert detail == [{"loc": ["body", "history"], "msg": detail[0]["msg"], "type": "value_error"}]


def test_a_library_fix_is_spelled_as_json(admin: httpx.Client) -> None:
    """A real-valued stream needs Laplace noise: the message's remedy is the JSON field, not Python."""
    resp = admin.post("/streams", json={**STREAM, "real": True})
    (item,) = _detail(resp, 422)
    assert item["loc"] == ["body", "noise"]
    assert str(item["msg"]).endswith('; send "noise": "laplace"') and "noise='" not in str(item["msg"])


def test_errors_outside_the_body_say_where(admin: httpx.Client) -> None:
    (item,) = _detail(admin.get("/streams/0123456789abcdef"), 404)
    assert item["type"] == "not_found"
    (auth,) = _detail(httpx.post(f"{admin.base_url}/streams", json=STREAM), 401)
    assert auth["type"] == "unauthorized"
    # the stream fast path validates its own body: the same shape, every problem, under "body"
    sid = admin.post("/streams", json=STREAM).json()["id"]
    counts = admin.post(f"/streams/{sid}/counts", json={"counts": [], "batch_id": 5})
    assert [d["loc"] for d in _detail(counts, 422)] == [["body", "counts"], ["body", "batch_id"]]
