"""sagad_client: the Python client of sagad, standard library only.

See Client, Run and the errors; docs/agents.md in the sagad repository
explains runs, calls and what happens on a crash."""
from .client import SETTLED_CALL, Client, Run, derive_call_id
from .errors import (BadRequest, Conflict, Forbidden, NotFound, SagadError, TransportError,
                     Unauthorized, Unavailable, Unprocessable)

__all__ = ["Client", "Run", "derive_call_id", "SETTLED_CALL", "SagadError", "BadRequest",
           "Unauthorized", "Forbidden", "NotFound", "Conflict", "Unprocessable", "Unavailable",
           "TransportError"]
__version__ = "0.4.0"
