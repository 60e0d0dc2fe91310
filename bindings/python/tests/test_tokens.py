"""Tokens minted here are what the relay accepts; bad claims are refused before they go."""

from __future__ import annotations

import base64
import json
import time

import pytest

import gsrelay
from conftest import Relay


def claims(token: str) -> dict:  # type: ignore[type-arg]
    body = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))


def test_a_minted_token_has_the_relays_claims() -> None:
    t = gsrelay.mint_token("0123456789abcdef", "arena", "bob", subscribe=False, ttl=60, now=1000)
    header = json.loads(base64.urlsafe_b64decode(t.split(".")[0] + "=="))
    assert header["alg"] == "HS256"
    assert claims(t) == {
        "room": "arena", "sub": "bob", "publish": True, "subscribe": False,
        "admin": False, "exp": 1060, "iat": 1000,
    }


def test_a_minted_token_joins_and_a_bad_one_is_refused(relay: Relay, room: str) -> None:
    good = gsrelay.mint_token(relay.secret, room, "alice")
    with gsrelay.Client.join(relay.base, good, room) as c:
        assert c.ssrc != 0
    forged = gsrelay.mint_token("not-the-relays-secret!", room, "mallory")
    with pytest.raises(gsrelay.JoinError) as e:
        gsrelay.Client.join(relay.base, forged, room)
    assert e.value.status == 401 and e.value.code
    assert "401" in str(e.value)
    other_room = gsrelay.mint_token(relay.secret, room + "-x", "alice")
    with pytest.raises(gsrelay.JoinError) as e:
        gsrelay.Client.join(relay.base, other_room, room)
    assert e.value.status == 403
    expired = gsrelay.mint_token(relay.secret, room, "alice", ttl=1, now=int(time.time()) - 3600)
    with pytest.raises(gsrelay.JoinError) as e:
        gsrelay.Client.join(relay.base, expired, room)
    assert e.value.status == 401
    with pytest.raises(gsrelay.JoinError) as e:
        gsrelay.Client.join(relay.base, "garbage", room)
    assert e.value.status == 401


def test_bad_claims_are_refused() -> None:
    with pytest.raises(gsrelay.TokenError) as e:
        gsrelay.mint_token("short", "r", "i")
    assert e.value.code == "weak_secret"
    with pytest.raises(gsrelay.TokenError) as e:
        gsrelay.mint_token("0123456789abcdef", "", "i")
    assert e.value.code == "bad_room"
    with pytest.raises(gsrelay.TokenError):
        gsrelay.mint_token("0123456789abcdef", "r", "x" * 129)
    with pytest.raises(gsrelay.TokenError) as e:
        gsrelay.mint_token("0123456789abcdef", "r", "i", ttl=0)
    assert e.value.code == "bad_ttl"
    with pytest.raises(TypeError):
        gsrelay.mint_token("0123456789abcdef", "r", "i", ttl="1h")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        gsrelay.mint_token(None, "r", "i")  # type: ignore[arg-type]
