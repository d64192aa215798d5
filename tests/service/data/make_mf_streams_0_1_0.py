"""Write ``mf_streams_0_1_0.json``: the database rows of matrix-factorisation streams exactly as the
flawed privpub (version 0.1.0, commit 3246757, before the issue-34 fix) stored them.

Not a test: run once against a checkout of that commit, which starts its own ``privpub serve``::

    git archive 3246757 src | tar -x -C /tmp/privpub-3246757
    PYTHONPATH=/tmp/privpub-3246757/src python tests/service/data/make_mf_streams_0_1_0.py

It creates one stream of each flawed method (``mf_sqrt``, ``blt``, ``mf_range``), posts the counts
3, 1, 4, 1, 5 and 9, 2 in two batches (7 items of an 8-item block: the open block's noise is in the
part of the write that opened it), and a clocked ``mf_sqrt`` stream (hourly steps, two closed by the
clock, three events in the open step); asks a few ranges (the query log), then dumps the ``streams`` and ``stream_parts`` rows and the
``stream_queries`` log (blobs base64) with the tokens the service returned at creation.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import sqlalchemy as sa


def main() -> None:
    import privpub
    from privpub.stream import _mf

    assert not hasattr(_mf, "MF_FORMAT"), "run this against the flawed code (commit 3246757), not a fixed one"
    tmp = Path(tempfile.mkdtemp())
    db = f"sqlite:///{tmp / 'old.db'}"
    admin = "old-admin-" + secrets.token_hex(16)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PRIVPUB_ADMIN_TOKEN=admin)
    proc = subprocess.Popen([sys.executable, "-c", "from privpub.cli import main; main()", "serve", "--db", db,
                             "--host", "127.0.0.1", "--port", str(port)], env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    out: dict[str, object] = {"privpub_version": privpub.__version__, "commit": "3246757", "streams": []}
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"}, timeout=60) as c:
            now = time.time()
            specs = [{"publisher": "mf_sqrt", "rho": 0.5, "window": 8, "block_length": 8},
                     {"publisher": "blt", "rho": 0.5, "window": 8},
                     {"publisher": "mf_range", "rho": 0.5, "window": 8},
                     # clocked: two hourly steps closed by the clock, three events in the open step
                     {"publisher": "mf_sqrt", "rho": 0.5, "window": 8, "step_seconds": 3600.0,
                      "origin": now - 2 * 3600 - 1800}]
            for spec in specs:
                r = c.post("/streams", json={"name": f"old {spec['publisher']}", **spec})
                r.raise_for_status()
                s = r.json()
                if "step_seconds" in spec:
                    c.post(f"/streams/{s['id']}/events", json={"times": [now] * 3, "batch_id": "e0"}).raise_for_status()
                    q = [[1, 1], [1, 2]]
                else:  # 7 of the block's 8 items: its noise is open, in the part of the write that opened it
                    for i, counts in enumerate(([3, 1, 4, 1, 5], [9, 2])):
                        c.post(f"/streams/{s['id']}/counts",
                               json={"counts": counts, "batch_id": f"b{i}"}).raise_for_status()
                    q = [[1, 1], [1, 2], [2, 7]]
                est = c.post(f"/streams/{s['id']}/ranges", json={"ranges": q}).json()
                out["streams"].append({"id": s["id"], "producer_token": s["producer_token"],  # type: ignore[union-attr]
                                       "reader_token": s["reader_token"], "answers": est["estimates"]})
        proc.terminate()
        proc.wait(30)
        engine = sa.create_engine(db)
        with engine.connect() as conn:
            for entry in out["streams"]:  # type: ignore[union-attr]
                sid = entry["id"]

                def rows(table: str, sid: str = sid) -> list[dict[str, object]]:
                    got = conn.execute(sa.text(f"SELECT * FROM {table} WHERE stream_id = :s" if table != "streams"
                                               else "SELECT * FROM streams WHERE id = :s"), {"s": sid}).mappings().all()
                    return [{k: ({"base64": base64.b64encode(v).decode()} if isinstance(v, bytes) else v)
                             for k, v in r.items()} for r in got]

                entry["row"] = rows("streams")[0]
                entry["parts"] = rows("stream_parts")
                entry["queries"] = rows("stream_queries")
            rev = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one()
        out["revision"] = rev
        engine.dispose()
    finally:
        if proc.poll() is None:
            proc.kill()
    path = Path(__file__).with_name("mf_streams_0_1_0.json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path} (revision {out['revision']})")


if __name__ == "__main__":
    main()
