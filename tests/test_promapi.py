"""servewatch.promapi over real HTTP: a small local server answers the way Prometheus and proxies in
front of it answer, and every failure becomes one sentence built from the status and the JSON body.
The same client against a real Prometheus is exercised by test_localprom.py and the investigate tests."""

from __future__ import annotations

import json
import urllib.parse
from http.server import BaseHTTPRequestHandler

import pytest

from servewatch.promapi import Auth, Client, PromApiError, QueryRejected
from servewatch_testkit.servers import HttpStub, free_port

VECTOR = {"resultType": "vector", "result": [{"metric": {"job": "a"}, "value": [1700000000, "1"]}]}
# query text -> (status, content type, body): what Prometheus (or a proxy) answers
ANSWERS = {
    "up": (200, "application/json", {"status": "success", "data": VECTOR}),
    "sum(": (
        400,
        "application/json",
        {"status": "error", "errorType": "bad_data", "error": "1:5: parse error"},
    ),
    "slow": (
        503,
        "application/json",
        {"status": "error", "errorType": "timeout", "error": "query timed out"},
    ),
    "proxy": (500, "text/html", "<html>\n  oops\n</html>"),
    "not-json": (200, "text/plain", "hello"),
}


class CannedPrometheus:
    """Answers /api/v1/query from ANSWERS, 404s everything else, and demands `token` when one is given."""

    def __init__(self, token: str | None = None):
        self.requests: list[str] = []
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                canned.requests.append(self.path)
                url = urllib.parse.urlsplit(self.path)
                if token and self.headers.get("Authorization") != f"Bearer {token}":
                    return self.reply(403, "text/plain", "denied")
                if url.path != "/api/v1/query":
                    return self.reply(404, "text/plain", "404 page not found")
                query = urllib.parse.parse_qs(url.query)["query"][0]
                if query.startswith("ALERTS"):
                    return self.reply(*ANSWERS["up"])
                return self.reply(*ANSWERS[query])

            def reply(self, status, ctype, body):
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.stub = HttpStub(Handler)
        self.url = self.stub.url

    def close(self):
        self.stub.close()


@pytest.fixture
def canned():
    made = []

    def make(**kw) -> CannedPrometheus:
        made.append(CannedPrometheus(**kw))
        return made[-1]

    yield make
    for c in made:
        c.close()


def ask(server: CannedPrometheus, expr: str, auth: Auth | None = None):
    with Client(server.url, auth) as client:
        return client.query(expr, at=1700000000.25)


def test_a_query_answers_its_result_and_sends_the_exact_time(canned):
    server = canned()
    assert ask(server, "up") == VECTOR["result"]
    sent = urllib.parse.parse_qs(urllib.parse.urlsplit(server.requests[-1]).query)
    assert sent["time"] == ["1700000000.25"] and sent["timeout"] == ["30"]


def test_a_rejected_query_carries_the_apis_error_type(canned):
    with pytest.raises(QueryRejected) as e:
        ask(canned(), "sum(")
    assert str(e.value) == "Prometheus rejected the query (HTTP 400): bad_data: 1:5: parse error"
    assert (e.value.status, e.value.error_type, e.value.error) == (400, "bad_data", "1:5: parse error")


def test_a_server_side_timeout_is_a_rejected_query(canned):
    with pytest.raises(
        QueryRejected, match=r"^the query timed out on the server \(HTTP 503\): timeout: query"
    ):
        ask(canned(), "slow")


def test_a_proxy_page_is_shown_as_its_text(canned):
    server = canned()
    with pytest.raises(PromApiError) as e:
        ask(server, "proxy")
    assert not isinstance(e.value, QueryRejected)
    assert str(e.value) == f"{server.url} answered HTTP 500: <html> oops </html>" and e.value.status == 500


def test_a_body_that_is_not_the_api_says_check_the_url(canned):
    with pytest.raises(PromApiError, match="did not answer like a Prometheus query API"):
        ask(canned(), "not-json")


def test_refused_credentials_say_which_and_never_show_them(canned):
    server = canned(token="right-token")
    with pytest.raises(PromApiError) as e:
        ask(server, "up", Auth(token="Zx9-secret"))
    assert str(e.value) == (
        f"{server.url} refused the request (HTTP 403 forbidden): "
        "the bearer token in SERVEWATCH_PROMETHEUS_TOKEN was not accepted"
    )
    assert ask(server, "up", Auth(token="right-token")) == VECTOR["result"]


def test_no_alerts_endpoint_falls_back_to_the_alerts_series(canned):
    server = canned()
    with Client(server.url) as client:
        firing, source = client.firing_alerts()
        assert source == 'ALERTS{alertstate="firing"}' and firing == [{"labels": {"job": "a"}}]
    with pytest.raises(PromApiError, match=r"has no query API \(HTTP 404\)") as e:
        Client(server.url).get("/api/v1/status/config")
    assert e.value.status == 404


def test_nothing_listening_is_connection_refused():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(PromApiError) as e:
        Client(url).query("up")
    assert str(e.value) == f"cannot reach Prometheus at {url}: connection refused"


def test_credentials_in_the_url_are_not_shown():
    assert Client("http://user:secret@127.0.0.1:9/", Auth()).shown == "http://127.0.0.1:9"
