"""sbx - a Python client for sbx workers (the execution plane for AI agents).

    import sbx
    with sbx.Client("127.0.0.1:7443") as client, client.sandbox() as box:
        print(box.code("print(6 * 7)").text)

Client (one gRPC channel), Sandbox (one session: run, code, stream, files, install, close),
Result, Output, and typed errors mirroring the contract's error codes (sbx.errors).
"""
from . import errors
from .client import (DEFAULT_MAX_MESSAGE_BYTES, Client, Execution, Files, Output, Result,
                     Sandbox, pb)
from .errors import (BrokerError, CapabilityError, ConfigError, GoneError, InternalError,
                     InvalidArgumentError, PermissionDeniedError, PolicyError, ProvisionError,
                     ResourceExhaustedError, SbxError, SessionNotFoundError, TimeoutError,
                     UnauthenticatedError, WrongNodeError)

__all__ = [
    "Client", "Sandbox", "Result", "Output", "Execution", "Files", "DEFAULT_MAX_MESSAGE_BYTES",
    "pb", "errors", "SbxError", "ConfigError", "CapabilityError", "PolicyError", "TimeoutError",
    "ProvisionError", "GoneError", "SessionNotFoundError", "BrokerError",
    "PermissionDeniedError", "InvalidArgumentError", "ResourceExhaustedError", "InternalError",
    "UnauthenticatedError", "WrongNodeError",
]
