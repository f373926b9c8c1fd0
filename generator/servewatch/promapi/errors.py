"""What can go wrong asking a Prometheus, as sentences built from the HTTP status and the API's JSON body.

Prometheus answers a failed API call with ``{"status": "error", "errorType": ..., "error": ...}`` and a
status code (400 bad_data, 422 execution, 503 timeout, ...); proxies in front of it answer with text or
HTML. The body is read as JSON where it is JSON, never parsed out of an exception's text.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ServewatchError

if TYPE_CHECKING:  # imported where a request failed: most commands never ask a server
    import requests


class PromApiError(ServewatchError):
    """Prometheus could not be asked: unreachable, refused, timed out, or it rejected a request."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class QueryRejected(PromApiError):
    """Prometheus answered but rejected one query (bad PromQL, an execution error, a server-side timeout)."""

    def __init__(self, message: str, status: int, error_type: str, error: str):
        super().__init__(message, status)
        self.error_type = error_type
        self.error = error


@dataclass(frozen=True)
class Failure:
    """A non-2xx answer: its status, and errorType/error from a Prometheus JSON body (else its text)."""

    status: int
    error_type: str
    error: str

    @classmethod
    def of(cls, response: requests.Response) -> "Failure":
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and ("errorType" in body or "error" in body):
            return cls(response.status_code, str(body.get("errorType", "")), str(body.get("error", "")))
        text = " ".join(response.content.decode("utf-8", "replace").split())[:200]
        return cls(response.status_code, "", text)

    @property
    def detail(self) -> str:
        return f"{self.error_type}: {self.error}".strip(": ")


class HttpFailure(Exception):
    """Raised by the session's response hook on a non-2xx answer; the client turns it into a sentence."""

    def __init__(self, failure: Failure):
        super().__init__(failure.status)
        self.failure = failure


def raise_for_failure(response: requests.Response, *args, **kwargs) -> None:
    """A requests response hook: every non-2xx answer becomes HttpFailure before anyone reads it."""
    if not 200 <= response.status_code < 300:
        raise HttpFailure(Failure.of(response))


def http_error(failure: Failure, shown: str, what: str, refused_hint: str) -> PromApiError:
    """One sentence for a failed request to `shown` (the URL without credentials) asking for `what`."""
    status, detail = failure.status, failure.detail
    if status in (401, 403):
        word = "unauthorized" if status == 401 else "forbidden"
        return PromApiError(f"{shown} refused the request (HTTP {status} {word}): {refused_hint}", status)
    if status in (400, 422):
        return QueryRejected(
            f"Prometheus rejected the {what} (HTTP {status}): {detail}",
            status,
            failure.error_type,
            failure.error,
        )
    if status == 404:
        return PromApiError(f"{shown} has no query API (HTTP 404); check the --prometheus URL", status)
    if status == 503 and failure.error_type == "timeout":
        return QueryRejected(
            f"the {what} timed out on the server (HTTP 503): {detail}",
            status,
            failure.error_type,
            failure.error,
        )
    return PromApiError(f"{shown} answered HTTP {status}: {detail}".rstrip(": "), status)


def _causes(exc: BaseException):
    """The exception, what it wraps (urllib3 keeps the cause in .reason), and their causes, in order."""
    seen = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        wrapped = [a for a in e.args if isinstance(a, BaseException)]
        todo += [getattr(e, "reason", None), e.__cause__, e.__context__, *wrapped]


def _reason(exc: BaseException) -> str:
    """Why a connection failed: the OS-level error at the root of requests' wrapping, else urllib3's."""
    import http.client  # here, not at import: it loads ssl, which no command needs before a request

    import urllib3

    causes = list(_causes(exc))
    for e in causes:
        if isinstance(e, socket.gaierror):
            return "unknown host"
        if isinstance(e, ConnectionRefusedError):
            return "connection refused"
        if isinstance(e, ConnectionResetError):
            return "connection reset"
        if isinstance(e, http.client.RemoteDisconnected):
            return "connection closed by the server"
        if isinstance(e, OSError) and e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
            return "no route to host" if e.errno == errno.EHOSTUNREACH else "network unreachable"
        if isinstance(e, TimeoutError):
            return "timed out"
    for e in causes:
        if isinstance(e, urllib3.exceptions.ResponseError):
            return "the server keeps answering 5xx"
        # NewConnectionError is a ConnectTimeoutError too; its OS error was handled above
        if isinstance(e, urllib3.exceptions.TimeoutError) and not isinstance(
            e, urllib3.exceptions.NewConnectionError
        ):
            return "timed out"
    return exc.__class__.__name__


def transport_error(exc: requests.RequestException, shown: str, timeout: float) -> PromApiError:
    import requests

    if isinstance(exc, requests.exceptions.SSLError):
        return PromApiError(
            f"TLS verification failed for {shown}; pass --ca-file with the server's CA, "
            "or --insecure-skip-verify for a test server"
        )
    reason = _reason(exc)
    if isinstance(exc, requests.exceptions.Timeout) or reason == "timed out":
        return PromApiError(f"{shown} did not answer within {timeout:g} s (--timeout)")
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.RetryError)):
        return PromApiError(f"cannot reach Prometheus at {shown}: {reason}")
    return PromApiError(f"request to {shown} failed: {exc.__class__.__name__}")
