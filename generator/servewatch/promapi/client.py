"""One client for a Prometheus-compatible HTTP API, on prometheus-api-client's PrometheusConnect.

The session carries the credentials (headers only), TLS verification, one quick retry on a refused
connection or a gateway hiccup, and a response hook that turns every non-2xx answer into a Failure
read from the API's JSON body; the methods turn it, and transport errors, into one clear sentence.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit

from .auth import Auth
from .errors import HttpFailure, PromApiError, http_error, raise_for_failure, transport_error

TimeLike = float | int | datetime


def timestamp(t: TimeLike) -> str:
    """A time as the API reads it, exactly: Unix seconds, without a needless fraction."""
    if isinstance(t, datetime):
        t = t.timestamp()
    return str(int(t)) if float(t).is_integer() else repr(float(t))


def redact(url: str) -> str:
    """The URL without any user:password part."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return parts._replace(netloc=host).geturl()
    return url


class Client:
    """Queries, series, rules and alerts of one Prometheus, with errors turned into one clear sentence."""

    def __init__(
        self,
        url: str,
        auth: Auth | None = None,
        *,
        timeout: float = 30.0,
        ca_file: str | None = None,
        insecure: bool = False,
        compressed: bool = True,
    ):
        """``compressed=False`` asks for answers as they are (the bench: gzip is Prometheus' own
        work, not a query's)."""
        if not re.match(r"^https?://", url or ""):
            raise PromApiError(f"--prometheus must be an http:// or https:// URL, not {url!r}")
        self.url = url.rstrip("/")
        self.shown = redact(self.url)
        self.timeout = timeout
        self.auth = auth or Auth()
        # imported here: every command imports this module, only those that ask a server need HTTP
        import requests
        from prometheus_api_client import PrometheusConnect
        from urllib3.util.retry import Retry

        self._session = requests.Session()
        if ca_file:
            if not os.path.isfile(ca_file):
                raise PromApiError(f"--ca-file {ca_file} does not exist")
            self._session.verify = ca_file
        else:
            self._session.verify = not insecure
            if insecure:  # asked for explicitly: do not repeat urllib3's warning on every request
                import urllib3

                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self._session.hooks["response"].append(raise_for_failure)
        self._headers = {"Accept": "application/json"}
        if not compressed:
            self._headers["Accept-Encoding"] = "identity"
        if self.auth.token:
            self._headers["Authorization"] = f"Bearer {self.auth.token}"
        self._basic = (self.auth.user, self.auth.password) if self.auth.user else None
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
            auth=self._basic,
            retry=retry,
            session=self._session,
            timeout=timeout,
        )

    def close(self) -> None:
        self._prom.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @contextmanager
    def _asking(self, what: str) -> Iterator[None]:
        """Turn whatever asking for `what` raises into a PromApiError sentence."""
        import requests  # loaded by __init__ already

        try:
            yield
        except HttpFailure as exc:
            raise http_error(exc.failure, self.shown, what, self.auth.refused_hint()) from None
        except requests.exceptions.JSONDecodeError:  # a RequestException too, but an answer, not a failure
            raise self._not_the_api() from None
        except requests.RequestException as exc:
            raise transport_error(exc, self.shown, self.timeout) from None
        except (ValueError, KeyError, TypeError):
            raise self._not_the_api() from None

    def _not_the_api(self) -> PromApiError:
        return PromApiError(
            f"{self.shown} did not answer like a Prometheus query API; "
            "check the --prometheus URL (it should be the server's base URL)"
        )

    def _params(self, **extra: Any) -> dict[str, Any]:
        # plain seconds: Prometheus reads a float, but rejects a fractional duration like "0.3s"
        return {"timeout": f"{self.timeout:g}", **{k: v for k, v in extra.items() if v is not None}}

    # -- queries (prometheus-api-client) ---------------------------------------------------------
    def query(self, expr: str, at: TimeLike | None = None) -> list:
        """An instant query's ``data.result``: ``[{metric, value: [t, "v"]}]`` (a scalar: ``[t, "v"]``)."""
        params = self._params(time=None if at is None else timestamp(at))
        with self._asking("query"):
            return self._prom.custom_query(expr, params=params)

    def query_range(self, expr: str, start: TimeLike, end: TimeLike, step: float | str) -> list:
        """A range query's ``data.result``: ``[{metric, values: [[t, "v"], ...]}]``."""
        # start/end in params too: custom_query_range rounds its datetimes to whole seconds, params win
        params = self._params(start=timestamp(start), end=timestamp(end))
        first, last = (datetime.fromtimestamp(float(timestamp(t)), timezone.utc) for t in (start, end))
        with self._asking("range query"):
            return self._prom.custom_query_range(expr, first, last, str(step), params=params)

    def label_values(
        self,
        label: str,
        match: Sequence[str] = (),
        start: TimeLike | None = None,
        end: TimeLike | None = None,
    ) -> list[str]:
        """``/api/v1/label/<label>/values``, as Grafana's label_values() asks for a variable."""
        params = {
            "match[]": list(match),
            "start": None if start is None else timestamp(start),
            "end": None if end is None else timestamp(end),
        }
        with self._asking("label values request"):
            return self._prom.get_label_values(label, params={k: v for k, v in params.items() if v})

    # -- other endpoints (the same session) ------------------------------------------------------
    def get(self, path: str, params: dict[str, Any] | None = None, what: str = "request") -> Any:
        """GET any ``/api/v1/...`` endpoint; returns its ``data``."""
        with self._asking(what):
            resp = self._session.get(
                self.url + path, params=params, headers=self._headers, auth=self._basic, timeout=self.timeout
            )
            return resp.json()["data"]

    def series(
        self, match: str | Sequence[str], start: TimeLike | None = None, end: TimeLike | None = None
    ) -> list[dict]:
        """``/api/v1/series``: the label sets matching the selector(s)."""
        params: dict[str, Any] = {"match[]": [match] if isinstance(match, str) else list(match)}
        if start is not None:
            params["start"] = timestamp(start)
        if end is not None:
            params["end"] = timestamp(end)
        return self.get("/api/v1/series", params, "series request")

    def rules(self) -> list[dict]:
        """The loaded rule groups (``/api/v1/rules``)."""
        return self.get("/api/v1/rules", what="rules request")["groups"]

    def firing_alerts(self, at: TimeLike | None = None) -> tuple[list[dict], str]:
        """Firing alerts as [{'labels': {...}}] and where they came from.

        Now: the server's /api/v1/alerts (rule state as evaluated). At an earlier time, or when the
        endpoint does not exist (a bare query frontend): the ALERTS series at that time.
        """
        if at is None:
            try:
                alerts = self.get("/api/v1/alerts", what="alerts request")["alerts"]
                firing = [{"labels": a.get("labels", {})} for a in alerts if a.get("state") == "firing"]
                return firing, "/api/v1/alerts"
            except PromApiError as exc:
                if exc.status in (401, 403) or exc.status is None:
                    raise
        rows = self.query('ALERTS{alertstate="firing"}', at)
        out = []
        for row in rows:
            labels = {k: v for k, v in row.get("metric", {}).items() if k not in ("__name__", "alertstate")}
            out.append({"labels": labels})
        return out, 'ALERTS{alertstate="firing"}'
