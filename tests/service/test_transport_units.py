"""Units of the transport layer (issue 27): a response's head and body leave in one write."""

from __future__ import annotations

import asyncio
from typing import Any

from privpub.service._transport import _Corked


class _Transport:
    """What a transport was asked to write, write by write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None


HEAD = b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n"


def test_head_and_body_leave_in_one_write() -> None:
    async def main() -> list[bytes]:
        t = _Transport()
        corked = _Corked(t, asyncio.get_running_loop())  # type: ignore[arg-type]
        corked.write(HEAD)
        assert t.writes == []  # held until its body
        corked.write(b"{}")
        await asyncio.sleep(0)  # the fallback flush finds nothing left
        return t.writes

    assert asyncio.run(main()) == [HEAD + b"{}"]


def test_a_head_without_a_body_leaves_in_the_next_round_and_at_close() -> None:
    async def main() -> tuple[list[bytes], list[bytes], bool]:
        loop = asyncio.get_running_loop()
        t, u = _Transport(), _Transport()
        a, b = _Corked(t, loop), _Corked(u, loop)  # type: ignore[arg-type]
        a.write(HEAD)  # e.g. a HEAD response: no body is ever written
        await asyncio.sleep(0)
        b.write(HEAD)
        b.close()  # closing writes what is held first
        return t.writes, u.writes, u.closed

    assert asyncio.run(main()) == ([HEAD], [HEAD], True)


def test_interim_and_other_writes_are_not_held() -> None:
    async def main() -> list[bytes]:
        t = _Transport()
        corked = _Corked(t, asyncio.get_running_loop())  # type: ignore[arg-type]
        corked.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # the client waits for it to send the body
        corked.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close")  # not a whole head
        corked.write(b"raw bytes")
        assert corked.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest: the transport's own
        return t.writes

    assert asyncio.run(main()) == [b"HTTP/1.1 100 Continue\r\n\r\n",
                                   b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close",
                                   b"raw bytes"]
