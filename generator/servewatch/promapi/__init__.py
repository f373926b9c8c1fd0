"""The one Prometheus HTTP layer: `investigate`, `detect` and the test servers all ask through it.

client.py: Client (prometheus-api-client underneath); auth.py: the URL and credentials from the environment;
errors.py: failures as sentences, from the HTTP status and the API's JSON body.
"""

from .auth import ENV_PASSWORD, ENV_TOKEN, ENV_URL, ENV_USER, ENVIRONMENT, Auth
from .client import Client, TimeLike, redact, timestamp
from .errors import Failure, PromApiError, QueryRejected, http_error

__all__ = [
    "ENV_PASSWORD",
    "ENV_TOKEN",
    "ENV_URL",
    "ENV_USER",
    "ENVIRONMENT",
    "Auth",
    "Client",
    "Failure",
    "PromApiError",
    "QueryRejected",
    "TimeLike",
    "http_error",
    "redact",
    "timestamp",
]
