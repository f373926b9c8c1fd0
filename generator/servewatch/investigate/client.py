"""investigate asks Prometheus through servewatch.promapi; these are the names it (and detect) use.

InvestigateError: Prometheus could not be asked (unreachable, refused, timed out, a rejected request);
QueryFailed: Prometheus answered but rejected one query, which a runbook step reports and moves past.
"""

from ..promapi import ENV_PASSWORD, ENV_TOKEN, ENV_USER, Auth, Client
from ..promapi import PromApiError as InvestigateError
from ..promapi import QueryRejected as QueryFailed

__all__ = ["ENV_PASSWORD", "ENV_TOKEN", "ENV_USER", "Auth", "Client", "InvestigateError", "QueryFailed"]
