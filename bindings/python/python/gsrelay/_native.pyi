"""The extension module (Rust, pyo3). Use the ``gsrelay`` package rather than this."""

from typing import List, Optional, Tuple, Union

MAX_PAYLOAD: int
MAX_QUEUED: int
SNAPSHOT_WAIT: float

RawEvent = Tuple[int, int, int, int, Union[bytes, str, None]]

def encode(objects_json: str, dialect: str) -> bytes: ...
def decode(payload: bytes, dialect: str) -> str: ...
def validate(payload: bytes, dialect: str) -> int: ...
def mint_token(
    secret: str,
    room: str,
    identity: str,
    publish: bool,
    subscribe: bool,
    admin: bool,
    ttl: int,
    now: Optional[int] = None,
) -> str: ...
def join(
    http_base: str,
    token: str,
    room: str,
    *,
    transport: str = "srtp",
    dialect: str = "draft01",
    interest: Optional[str] = None,
    ssrc: Optional[int] = None,
    require_ssrc: bool = False,
    room_stream: bool = False,
    plain_rtp: bool = False,
    silence: Optional[float] = None,
    snapshot: bool = True,
    timeout: float = 15.0,
) -> Session: ...

class Session:
    def recv_batch(self, max: int = 4096, timeout: float = 0.0) -> List[RawEvent]: ...
    def publish(self, payload: bytes) -> None: ...
    def snapshot(self) -> None: ...
    def set_interest(self, interest_json: str) -> None: ...
    def leave(self, timeout: float = 5.0) -> str: ...
    def info(self) -> Tuple[int, int, int, str]: ...
    def is_over(self) -> bool: ...
    def wake_fd(self) -> Optional[int]: ...
