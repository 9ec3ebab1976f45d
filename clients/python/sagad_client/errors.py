"""The errors of the sagad client: one class per kind of refusal, each
carrying the problem document sagad answered (RFC 9457)."""
from typing import Any, Dict, List, Optional


class SagadError(Exception):
    """sagad refused a request; `problem` is its problem document."""

    def __init__(self, status: int, problem: Optional[Dict[str, Any]] = None,
                 message: Optional[str] = None) -> None:
        self.status = status
        self.problem: Dict[str, Any] = problem or {}
        self.detail: str = message or str(self.problem.get("detail") or
                                          self.problem.get("title") or "HTTP %d" % status)
        super().__init__("%d: %s" % (status, self.detail))


class BadRequest(SagadError):
    """400: the request itself is malformed."""


class Unauthorized(SagadError):
    """401: no token, or an unknown one."""


class Forbidden(SagadError):
    """403: the token's role is too small (an agent's token cannot approve)."""


class NotFound(SagadError):
    """404: no such saga, toolbox or instance."""


class Conflict(SagadError):
    """409: not allowed now (a call_id used for another call, a run that
    takes no more calls, an abort after an irreversible call)."""


class Unprocessable(SagadError):
    """422: the request cannot be carried out; `errors` lists each schema
    error ({"path", "message"}) when the input or arguments were refused."""

    @property
    def errors(self) -> List[Dict[str, str]]:
        return list(self.problem.get("errors") or [])


class TooManyRequests(SagadError):
    """429: a limit holds the call back (a guard of the toolbox, named in
    the detail; too many open runs). Nothing was recorded."""


class Unavailable(SagadError):
    """503 (draining, or the store cannot take writes) after every retry."""


class TransportError(SagadError):
    """sagad could not be reached, or the connection broke, after every
    retry (status 0). Asking again with the same key or call_id is safe."""

    def __init__(self, message: str) -> None:
        super().__init__(0, None, message)


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
              409: Conflict, 422: Unprocessable, 429: TooManyRequests, 503: Unavailable}


def error_for(status: int, problem: Optional[Dict[str, Any]]) -> SagadError:
    """The exception for an HTTP status and its problem document."""
    return _BY_STATUS.get(status, SagadError)(status, problem)
