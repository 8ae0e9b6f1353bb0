"""Exceptions raised by pymscclpp: one base class, one subclass per failure kind."""


class PymscclppError(RuntimeError):
    """Base class of every error raised by pymscclpp."""


class BackendError(PymscclppError):
    """The device backend (gpu or sim) cannot be used as asked."""


class BootstrapError(PymscclppError):
    """A bootstrap operation failed: bad peer, bad message, refused connection."""


class PeerDisconnectedError(BootstrapError):
    """A peer closed its connection or died while we were talking to it."""


class SetupAbortedError(BootstrapError):
    """A receive belongs to a collective set-up that a peer aborted (``Communicator.setup``); names that peer."""

    def __init__(self, message: str, origin: int = -1):
        super().__init__(message)
        self.origin = origin


class CommAbortedError(PymscclppError):
    """The communicator was aborted (``Communicator.abort``): the call in flight then, and every later one, raises
    this; make a new communicator (``shrink``, ``split`` of another, or from a new unique id)."""


class CommTimeoutError(PymscclppError, TimeoutError):
    """A host or device wait ran past its budget; the message names rank, peer and op."""


class InvalidUsageError(PymscclppError, ValueError):
    """Bad input to a public call, detected before anything was launched or written."""


class CallMismatchError(InvalidUsageError):
    """Ranks made different collective calls at the same point (collective, size, dtype, op or root); found on the
    device by the call check before any output was written; the message names both sides."""


class ProxyError(PymscclppError):
    """A proxy service failed: a rejected trigger, a transport fault, a peer that disconnected."""


class RegistrationError(InvalidUsageError):
    """A buffer cannot be registered, or a peer's handle cannot be mapped here."""
