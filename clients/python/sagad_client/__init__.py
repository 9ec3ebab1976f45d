"""sagad_client: the Python client of sagad, standard library only.

See Client, Run and the errors; docs/agents.md in the sagad repository
explains runs, calls and what happens on a crash."""
from .client import DECIDED_CALL, SETTLED_CALL, Client, Run, derive_call_id
from .errors import (BadRequest, Conflict, Forbidden, NotFound, SagadError, TooManyRequests,
                     TransportError, Unauthorized, Unavailable, Unprocessable)

__all__ = ["Client", "Run", "derive_call_id", "SETTLED_CALL", "DECIDED_CALL", "SagadError",
           "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict", "Unprocessable",
           "TooManyRequests", "Unavailable", "TransportError"]
__version__ = "0.5.0"
