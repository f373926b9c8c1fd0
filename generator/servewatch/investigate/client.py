"""Talking to a Prometheus (or a compatible query API) through prometheus-api-client.

Credentials come from the environment and are only ever put into request headers: no message,
report or exception text here contains them. TLS certificates are verified unless told otherwise.
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from ..errors import ServewatchError

ENV_TOKEN = "SERVEWATCH_PROMETHEUS_TOKEN"
ENV_USER = "SERVEWATCH_PROMETHEUS_USER"
ENV_PASSWORD = "SERVEWATCH_PROMETHEUS_PASSWORD"
STATUS_RE = re.compile(r"HTTP Status Code (\d+) \((.*)\)\s*$", re.S)


class InvestigateError(ServewatchError):
    """Prometheus could not be asked: unreachable, refused, timed out, or it rejected a query."""


class QueryFailed(InvestigateError):
    """Prometheus answered but rejected one query (bad PromQL, execution error)."""


@dataclass(frozen=True)
class Auth:
    token: str | None = None
    user: str | None = None
    password: str | None = None

    @classmethod
    def from_env(cls, env=None) -> "Auth":
        env = os.environ if env is None else env
        token = env.get(ENV_TOKEN) or None
        user = env.get(ENV_USER) or None
        password = env.get(ENV_PASSWORD)
        if token and user:
            raise InvestigateError(
                f"both {ENV_TOKEN} and {ENV_USER} are set; use a bearer token or basic auth, not both"
            )
        if user and password is None:
            raise InvestigateError(f"{ENV_USER} is set but {ENV_PASSWORD} is not")
        return cls(token, user, password if user else None)

    @property
    def kind(self) -> str:
        return "bearer token" if self.token else "basic auth" if self.user else "none"

    def __repr__(self) -> str:  # never show secrets, not even in a debugger or a traceback
        return f"Auth({self.kind})"


def _redact(url: str) -> str:
    """The URL without any user:password part."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return parts._replace(netloc=host).geturl()
    return url


class Client:
    """Instant queries and the firing-alert list, with errors turned into one clear sentence."""

    def __init__(
        self,
        url: str,
        auth: Auth | None = None,
        *,
        timeout: float = 30.0,
        ca_file: str | None = None,
        insecure: bool = False,
    ):
        if not re.match(r"^https?://", url or ""):
            raise InvestigateError(f"--prometheus must be an http:// or https:// URL, not {url!r}")
        self.url = url.rstrip("/")
        self.shown = _redact(self.url)
        self.timeout = timeout
        auth = auth or Auth()
        self._session = requests.Session()
        if ca_file:
            if not os.path.isfile(ca_file):
                raise InvestigateError(f"--ca-file {ca_file} does not exist")
            self._session.verify = ca_file
        else:
            self._session.verify = not insecure
            if insecure:  # asked for explicitly: do not repeat urllib3's warning on every request
                import urllib3

                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self._headers = {"Accept": "application/json"}
        if auth.token:
            self._headers["Authorization"] = f"Bearer {auth.token}"
        basic = (auth.user, auth.password) if auth.user else None
        # one quick retry on a refused connection or a gateway hiccup; never a long backoff
        retry = Retry(
            total=2,
            connect=1,
            read=0,
            status=1,
            backoff_factor=0.1,
            status_forcelist=(502, 503, 504),
            raise_on_status=False,
            allowed_methods=None,
        )
        self._prom = PrometheusConnect(
            url=self.url,
            headers=self._headers,
            auth=basic,
            retry=retry,
            session=self._session,
            timeout=timeout,
        )
        self._basic = basic

    def close(self) -> None:
        self._prom.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- calls ----------------------------------------------------------------------------
    def query(self, expr: str, at: float | None = None) -> list[dict]:
        # plain seconds: Prometheus reads a float, but rejects a fractional duration like "0.3s"
        params = {"timeout": f"{self.timeout:g}"}
        if at is not None:
            params["time"] = f"{at:.3f}"
        try:
            return self._prom.custom_query(expr, params=params)
        except PrometheusApiClientException as exc:
            raise self._http_error(exc, "query") from None
        except requests.RequestException as exc:
            raise self._transport_error(exc) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise InvestigateError(
                f"{self.shown} did not answer like a Prometheus query API ({exc.__class__.__name__}); "
                "check the --prometheus URL (it should be the server's base URL)"
            ) from None

    def firing_alerts(self, at: float | None = None) -> tuple[list[dict], str]:
        """Firing alerts as [{'labels': {...}}] and where they came from.

        Now: the server's /api/v1/alerts (rule state as evaluated). At an earlier time, or when the
        endpoint does not exist (a bare query frontend): the ALERTS series at that time.
        """
        if at is None:
            try:
                resp = self._session.get(
                    f"{self.url}/api/v1/alerts", headers=self._headers, auth=self._basic, timeout=self.timeout
                )
            except requests.RequestException as exc:
                raise self._transport_error(exc) from None
            if resp.status_code in (401, 403):
                raise self._auth_error(resp.status_code)
            if resp.status_code == 200:
                try:
                    alerts = resp.json()["data"]["alerts"]
                except (ValueError, KeyError, TypeError):
                    raise InvestigateError(
                        f"{self.shown}/api/v1/alerts did not answer like Prometheus"
                    ) from None
                return [
                    {"labels": a.get("labels", {})} for a in alerts if a.get("state") == "firing"
                ], "/api/v1/alerts"
        rows = self.query('ALERTS{alertstate="firing"}', at)
        out = []
        for row in rows:
            labels = {k: v for k, v in row.get("metric", {}).items() if k not in ("__name__", "alertstate")}
            out.append({"labels": labels})
        return out, 'ALERTS{alertstate="firing"}'

    # -- errors ---------------------------------------------------------------------------
    def _auth_error(self, status: int) -> InvestigateError:
        how = {
            "bearer token": f"the bearer token in {ENV_TOKEN}",
            "basic auth": f"the basic-auth credentials in {ENV_USER}/{ENV_PASSWORD}",
        }
        auth = "bearer token" if "Authorization" in self._headers else "basic auth" if self._basic else "none"
        if auth == "none":
            hint = f"it needs credentials: set {ENV_TOKEN} (bearer) or {ENV_USER} and {ENV_PASSWORD} (basic)"
        else:
            hint = f"{how[auth]} was not accepted"
        word = "unauthorized" if status == 401 else "forbidden"
        return InvestigateError(f"{self.shown} refused the request (HTTP {status} {word}): {hint}")

    def _http_error(self, exc: PrometheusApiClientException, what: str) -> InvestigateError:
        m = STATUS_RE.match(str(exc))
        if not m:
            return InvestigateError(f"{self.shown}: {what} failed: {exc}")
        status = int(m.group(1))
        if status in (401, 403):
            return self._auth_error(status)
        body = m.group(2)
        detail = ""
        try:
            raw = ast.literal_eval(body)
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
            try:
                data = json.loads(text)
                detail = f"{data.get('errorType', '')}: {data.get('error', '')}".strip(": ")
            except ValueError:
                detail = " ".join(text.split())[:200]
        except (ValueError, SyntaxError):
            detail = body[:200]
        if status in (400, 422):
            return QueryFailed(f"Prometheus rejected the {what} (HTTP {status}): {detail}")
        if status == 404:
            return InvestigateError(f"{self.shown} has no query API (HTTP 404); check the --prometheus URL")
        if status == 503 and "timeout" in detail.lower():
            return QueryFailed(f"the {what} timed out on the server (HTTP 503): {detail}")
        return InvestigateError(f"{self.shown} answered HTTP {status}: {detail}".rstrip(": "))

    def _transport_error(self, exc: requests.RequestException) -> InvestigateError:
        if isinstance(exc, requests.exceptions.SSLError):
            return InvestigateError(
                f"TLS verification failed for {self.shown}; pass --ca-file with the server's CA, "
                "or --insecure-skip-verify for a test server"
            )
        if isinstance(exc, requests.exceptions.Timeout) or "timed out" in str(exc):
            return InvestigateError(f"{self.shown} did not answer within {self.timeout:g} s (--timeout)")
        if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.RetryError)):
            reason = _root_reason(exc)
            return InvestigateError(f"cannot reach Prometheus at {self.shown}: {reason}")
        return InvestigateError(f"request to {self.shown} failed: {exc.__class__.__name__}")


def _root_reason(exc: BaseException) -> str:
    text = str(exc)
    for pattern, reason in (
        ("Connection refused", "connection refused"),
        ("Name or service not known", "unknown host"),
        ("nodename nor servname", "unknown host"),
        ("timed out", "timed out"),
        ("No route to host", "no route to host"),
        ("Network is unreachable", "network unreachable"),
        ("Connection reset", "connection reset"),
        ("RemoteDisconnected", "connection closed by the server"),
        ("too many 50", "the server keeps answering 5xx"),
    ):
        if pattern in text:
            return reason
    return exc.__class__.__name__
