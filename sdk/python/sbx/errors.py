"""Typed errors: one class per error code of the sbx contract (sbx.v1.ErrorCode), raised for
machinery failures (a FAILED or TIMED_OUT completion) and for gRPC statuses the worker answers
before running anything (authentication, size limits, draining). A program that fails is not
an error: its Result says so (exit_code, outcome).
"""
import builtins


class SbxError(Exception):
    """Base class. `code` is the contract's error code name ("POLICY", ...), `message` the
    worker's text for a person, `completion` the ExecutionCompletion when there was one."""

    code = "UNKNOWN"

    def __init__(self, message, completion=None, grpc_code=None):
        super().__init__(message)
        self.message = message
        self.completion = completion
        self.grpc_code = grpc_code

    def __str__(self):
        return "%s: %s" % (self.code, self.message)


class ConfigError(SbxError):
    """The worker's configuration is wrong (unknown profile, bad file)."""
    code = "CONFIG"


class CapabilityError(SbxError):
    """The profile's provider does not offer this operation or language."""
    code = "CAPABILITY"


class PolicyError(SbxError):
    """The requested policy cannot be enforced (strict) or is refused."""
    code = "POLICY"


class TimeoutError(SbxError, builtins.TimeoutError):
    """A deadline passed in the machinery (also a gRPC DEADLINE_EXCEEDED)."""
    code = "TIMEOUT"


class ProvisionError(SbxError):
    """The sandbox could not be created or reached."""
    code = "PROVISION"


class GoneError(SbxError):
    """The sandbox behind the session no longer exists."""
    code = "GONE"


class SessionNotFoundError(SbxError):
    """No such session."""
    code = "SESSION_NOT_FOUND"


class BrokerError(SbxError):
    """The broker or its transport failed (also: the worker is unreachable or draining)."""
    code = "BROKER"


class PermissionDeniedError(SbxError, builtins.PermissionError):
    """The caller may not use this session, identity or principal."""
    code = "PERMISSION_DENIED"


class InvalidArgumentError(SbxError, builtins.ValueError):
    """The request is malformed."""
    code = "INVALID_ARGUMENT"


class ResourceExhaustedError(SbxError):
    """A queue, quota or size limit is full (retry later, or send less)."""
    code = "RESOURCE_EXHAUSTED"


class InternalError(SbxError):
    """A bug in sbx."""
    code = "INTERNAL"


class UnauthenticatedError(SbxError):
    """The caller could not be authenticated (token or client certificate)."""
    code = "UNAUTHENTICATED"


class WrongNodeError(SbxError):
    """The session's sandbox lives on another node (completion.node names it): send the call
    where that node's worker takes it, or ask for the sandbox to be recreated elsewhere."""
    code = "WRONG_NODE"

    @property
    def node(self):
        return self.completion.node if self.completion is not None else ""


BY_CODE = {cls.code: cls for cls in (
    ConfigError, CapabilityError, PolicyError, TimeoutError, ProvisionError, GoneError,
    SessionNotFoundError, BrokerError, PermissionDeniedError, InvalidArgumentError,
    ResourceExhaustedError, InternalError, UnauthenticatedError, WrongNodeError)}


def from_completion(completion, error_code_name):
    """The error for a FAILED/TIMED_OUT completion (error_code_name: "POLICY", ...)."""
    cls = BY_CODE.get(error_code_name, SbxError)
    if completion.status == 3 and cls is SbxError:  # COMPLETION_STATUS_TIMED_OUT
        cls = TimeoutError
    return cls(completion.error or error_code_name, completion=completion)


# gRPC status names -> the contract code the worker means by them.
_GRPC = {
    "UNAUTHENTICATED": UnauthenticatedError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "RESOURCE_EXHAUSTED": ResourceExhaustedError,
    "DEADLINE_EXCEEDED": TimeoutError,
    "INVALID_ARGUMENT": InvalidArgumentError,
    "NOT_FOUND": ConfigError,
    "UNIMPLEMENTED": CapabilityError,
    "INTERNAL": InternalError,
    "UNAVAILABLE": BrokerError,
    "CANCELLED": BrokerError,
    "UNKNOWN": BrokerError,
}


def from_rpc_error(err):
    """The error for a grpc.RpcError (the call ended without a completion)."""
    name = err.code().name if err.code() is not None else "UNKNOWN"
    cls = _GRPC.get(name, BrokerError)
    return cls(err.details() or name, grpc_code=name)
