"""Credentials for a Prometheus: from the environment only, and only ever put into request headers."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import PromApiError

ENV_URL = "SERVEWATCH_PROMETHEUS_URL"  # the default of every command's --prometheus
ENV_TOKEN = "SERVEWATCH_PROMETHEUS_TOKEN"
ENV_USER = "SERVEWATCH_PROMETHEUS_USER"
ENV_PASSWORD = "SERVEWATCH_PROMETHEUS_PASSWORD"
# everything read from the environment to reach a Prometheus
ENVIRONMENT = (ENV_URL, ENV_TOKEN, ENV_USER, ENV_PASSWORD)


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
            raise PromApiError(
                f"both {ENV_TOKEN} and {ENV_USER} are set; use a bearer token or basic auth, not both"
            )
        if user and password is None:
            raise PromApiError(f"{ENV_USER} is set but {ENV_PASSWORD} is not")
        return cls(token, user, password if user else None)

    @property
    def kind(self) -> str:
        return "bearer token" if self.token else "basic auth" if self.user else "none"

    def refused_hint(self) -> str:
        """What to do when the server answers 401/403 to these credentials."""
        if self.token:
            return f"the bearer token in {ENV_TOKEN} was not accepted"
        if self.user:
            return f"the basic-auth credentials in {ENV_USER}/{ENV_PASSWORD} were not accepted"
        return f"it needs credentials: set {ENV_TOKEN} (bearer) or {ENV_USER} and {ENV_PASSWORD} (basic)"

    def __repr__(self) -> str:  # never show secrets, not even in a debugger or a traceback
        return f"Auth({self.kind})"
