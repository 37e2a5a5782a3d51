"""``hub_reachable`` asks through huggingface_hub's HTTP client, so an HTTPS proxy is honoured (no raw socket)."""

from __future__ import annotations

import socket
import threading

import pytest
from huggingface_hub import close_session, constants

from cachecraft_lib.ruler import dataset


@pytest.fixture()
def online(monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    for var in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)

    real = socket.create_connection
    monkeypatch.connections = []  # every TCP connection opened, wherever it goes

    def recording(address, *args, **kwargs):
        monkeypatch.connections.append(address)
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording)
    close_session()  # the hub's client reads the proxy environment when it is created
    yield monkeypatch
    close_session()


class _Response:
    def __init__(self, status: int) -> None:
        self.status_code = status


class _Session:
    def __init__(self, status: int | None = 200) -> None:
        self.status, self.calls = status, []

    def head(self, url, **kwargs):
        self.calls.append((url, kwargs))
        if self.status is None:
            import httpx

            raise httpx.ProxyError("407 Proxy Authentication Required")
        return _Response(self.status)


def test_probe_goes_through_huggingface_hub_http_layer(online):
    import huggingface_hub.utils

    online.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # a closed port: a raw socket would never try it
    session = _Session(200)
    online.setattr(huggingface_hub.utils, "get_session", lambda: session)
    assert dataset.hub_reachable(timeout=1.5) is True
    assert session.calls == [(constants.ENDPOINT, {"timeout": 1.5, "follow_redirects": False})]
    assert online.connections == []  # the hub's client did the asking; no socket of its own
    online.setattr(huggingface_hub.utils, "get_session", lambda: _Session(None))
    assert dataset.hub_reachable() is False  # a proxy error is "no hub"
    online.setattr(huggingface_hub.utils, "get_session", lambda: _Session(503))
    assert dataset.hub_reachable() is False


def test_probe_honours_https_proxy(online):
    """A local proxy that records the CONNECT it receives and refuses it: the probe must have asked it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    seen: list[bytes] = []

    def proxy() -> None:
        conn, _ = server.accept()
        with conn:
            seen.append(conn.recv(4096))
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=proxy, daemon=True)
    thread.start()
    online.setenv("HTTPS_PROXY", f"http://127.0.0.1:{server.getsockname()[1]}")
    try:
        assert dataset.hub_reachable(timeout=5) is False  # the proxy refused: no hub, and no hang
    finally:
        thread.join(timeout=5)
        server.close()
    host = constants.ENDPOINT.split("://", 1)[1].split("/")[0]
    assert seen and seen[0].startswith(f"CONNECT {host}:443".encode())
    assert all(addr[0] == "127.0.0.1" for addr in online.connections)  # only to the proxy, never to the hub


def test_offline_flags_skip_the_probe(online):
    import huggingface_hub.utils

    online.setattr(huggingface_hub.utils, "get_session", lambda: pytest.fail("probed while offline"))
    online.setenv("HF_DATASETS_OFFLINE", "1")
    assert dataset.hub_reachable() is False
