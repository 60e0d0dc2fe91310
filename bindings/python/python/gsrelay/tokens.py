"""Access tokens as the relay checks them: HS256 JWTs scoped to one room
(``docs/security.md``), minted by the extension (Rust's ``jsonwebtoken``)."""

from __future__ import annotations

from typing import Optional, Union

from . import _native


def mint_token(
    secret: Union[str, bytes],
    room: str,
    identity: str,
    *,
    publish: bool = True,
    subscribe: bool = True,
    admin: bool = False,
    ttl: int = 3600,
    now: Optional[int] = None,
) -> str:
    """A token for ``identity`` in ``room`` with these rights, valid ``ttl`` seconds from
    ``now`` (unix seconds, the clock's by default), signed with the relay's secret (its
    ``--token-secret``, or the dev secret ``gsrelay serve`` prints).

    Raises :class:`~gsrelay.errors.TokenError` for a secret shorter than 16 bytes, an
    empty or too long room or identity, or a ttl below 1 s. The relay refuses a token
    that lives longer than its ``max_token_ttl`` (a day by default).
    """
    if isinstance(secret, bytes):
        secret = secret.decode("utf-8")
    for name, value in (("secret", secret), ("room", room), ("identity", identity)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    for name, flag in (("publish", publish), ("subscribe", subscribe), ("admin", admin)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        raise TypeError(f"ttl must be an int of seconds, not {type(ttl).__name__}")
    if ttl < 1:
        from .errors import TokenError

        raise TokenError(f"a token's ttl is at least 1 second, not {ttl}", "bad_ttl")
    return _native.mint_token(secret, room, identity, publish, subscribe, admin, ttl, now)
