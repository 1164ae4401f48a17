"""Issue 14 item 6: who can reach the server. Loopback is all of 127.0.0.0/8 and ::1,
a browser page of another origin is refused unless --cors, text/plain bodies are
refused, the API key is compared as UTF-8 bytes, and empty hosts and keys are refused
at the command line."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.integration.server.live_server import LiveServer, live_server
from tests.integration.server.server_process import (
    DS4,
    free_port,
    scripted_args,
    server_process,
)

CHAT = "/v1/chat/completions"
GOOD = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """No API key: the case where a foreign page could otherwise run generations."""
    with live_server(tmp_path_factory.mktemp("srv"), ["</think>ok"] * 20) as live:
        yield live


def port_of(server: LiveServer) -> str:
    return server.url.rsplit(":", 1)[1]


@pytest.mark.parametrize("host", ["127.0.0.2", "127.1", "localhost", "[::1]", "0x7f.0.0.9"])
def test_every_loopback_host_is_served(open_server: LiveServer, host: str) -> None:
    headers = {"Host": f"{host}:{port_of(open_server)}"}
    assert httpx.get(open_server.url + "/health", headers=headers).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "0.0.0.0", "10.0.0.1"])
def test_foreign_hosts_are_refused(open_server: LiveServer, host: str) -> None:
    response = httpx.get(open_server.url + "/health", headers={"Host": host})
    assert response.status_code == 403
    assert response.json()["error"]["type"] == "permission_error"


def post(server: LiveServer, headers: dict[str, str], body: bytes | None = None) -> httpx.Response:
    content = body if body is not None else b'{"messages":[{"role":"user","content":"hi"}]}'
    return httpx.post(server.url + CHAT, content=content, headers=headers, timeout=30)


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", "Content-Type": "application/json"},
        {"Origin": "null", "Content-Type": "application/json"},
        {"Origin": "http://127.0.0.1:1", "Content-Type": "application/json"},  # other port
        {"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
    ],
)
def test_cross_site_browser_requests_are_refused(
    open_server: LiveServer, headers: dict[str, str]
) -> None:
    response = post(open_server, headers)
    assert response.status_code == 403
    assert "cross-origin" in response.json()["error"]["message"]


def test_cross_site_simple_post_is_refused_in_anthropic_shape(open_server: LiveServer) -> None:
    response = httpx.post(
        open_server.url + "/v1/messages",
        content=b'{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}',
        headers={"Origin": "https://evil.example", "Content-Type": "text/plain"},
    )
    assert response.status_code == 403
    assert response.json()["type"] == "error"


def test_text_plain_body_is_refused_even_without_origin(open_server: LiveServer) -> None:
    response = post(open_server, {"Content-Type": "text/plain;charset=UTF-8"})
    assert response.status_code == 415
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_same_origin_and_non_browser_clients_are_served(open_server: LiveServer) -> None:
    same = {"Origin": open_server.url, "Sec-Fetch-Site": "same-origin"}
    assert post(open_server, {**same, "Content-Type": "application/json"}).status_code == 200
    assert post(open_server, {}).status_code == 200  # no Content-Type at all (requests, curl)
    form = {"Content-Type": "application/x-www-form-urlencoded"}  # curl -d
    assert post(open_server, form).status_code == 200


def test_cors_lets_other_origins_in(tmp_path: Path) -> None:
    with live_server(tmp_path, ["</think>ok"], cors=True) as live:
        response = post(live, {"Origin": "http://app.example", "Content-Type": "text/plain"})
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "*"


def test_non_ascii_key_authenticates_by_its_utf8_bytes(tmp_path: Path) -> None:
    key = "ключ-ü-🔑"
    with live_server(tmp_path, ["</think>ok"], api_key=key) as live:
        good = {b"Authorization": b"Bearer " + key.encode()}
        assert httpx.post(live.url + CHAT, json=GOOD, headers=good, timeout=30).status_code == 200
        latin = {b"x-api-key": key.encode("utf-8").decode("latin-1").encode("utf-8")}
        assert httpx.post(live.url + CHAT, json=GOOD, headers=latin).status_code == 401
        assert httpx.post(live.url + CHAT, json=GOOD).status_code == 401


def test_a_server_bound_to_127_0_0_2_checks_the_host_header(tmp_path: Path) -> None:
    args = [*scripted_args(tmp_path, ["</think>ok"]), "--host", "127.0.0.2"]
    with server_process(args, host="127.0.0.2") as server:
        assert httpx.get(server.url + "/health").status_code == 200
        foreign = httpx.get(server.url + "/health", headers={"Host": "evil.example"})
        assert foreign.status_code == 403


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--host", "", "argument --host: '' is not a host name or address"),
        ("--api-key", "", "argument --api-key: an empty key would turn authentication off"),
        ("--api-key", " padded", "argument --api-key: the key has surrounding whitespace"),
    ],
)
def test_empty_host_and_key_are_refused(
    tmp_path: Path, flag: str, value: str, message: str
) -> None:
    args = [*DS4, "server", *scripted_args(tmp_path, ["ok"]), "--port", str(free_port())]
    result = subprocess.run([*args, flag, value], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith(f"ds4 server: error: {message}")
    assert result.stderr.count("\n") == 1
