"""The exceptions of the gsrelay package: one base class, each with a stable ``code``.

Refusals of bad arguments, payloads and token claims are also ``ValueError``\\ s, so code
that already catches those keeps working.
"""

from __future__ import annotations

from typing import Optional


class GsrelayError(Exception):
    """Base of every gsrelay error.

    ``code`` is a stable short string to branch on (``"bad_token"``, ``"transport"``,
    ``"too_large"``...); ``status`` is the relay's HTTP status when the relay refused.
    """

    def __init__(self, message: str, code: str = "error", status: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status

    def __repr__(self) -> str:
        status = "" if self.status is None else f", status={self.status}"
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}{status})"


class ArgumentError(GsrelayError, ValueError):
    """An argument is not what it must be (an unknown transport, dialect, a bad interest)."""


class CodecError(GsrelayError, ValueError):
    """The codec refused a payload or an object (bad bytes, bad hex, too large)."""


class TokenError(GsrelayError, ValueError):
    """A token cannot be minted with these claims or this secret."""


class JoinError(GsrelayError):
    """The join failed: ``status`` and ``code`` are the relay's for a refusal
    (401 ``bad_token``, 403 ``forbidden``...), or the network failed (``status`` None)."""


class ClosedError(GsrelayError):
    """The session is over: it left, or the relay ended it."""


class BusyError(GsrelayError):
    """Too many commands are waiting for the network: publish less often."""
