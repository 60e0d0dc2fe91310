"""An RTP-over-QUIC peer on aioquic, an independent QUIC stack, for tests/roq_interop.rs.

It follows docs/api.md and docs/transports.md alone: joins over HTTP with
{"transport":"quic"}, connects with ALPN "roq", checks the relay's certificate against the
answer's cert_sha256, presents the session token on a bidirectional stream, and speaks RoQ
framing it parses itself (QUIC varint flow identifier in DATAGRAM frames; flow identifier
then (varint length, packet) frames on unidirectional streams).

  roq_peer.py publish   HTTP_BASE TOKEN ROOM PAYLOAD_HEX COUNT
      sends COUNT RTP packets carrying PAYLOAD_HEX in datagrams; prints "ssrc N".
  roq_peer.py subscribe HTTP_BASE TOKEN ROOM
      sends a FIR for every stream (naming the relay's SSRC) and prints
      "rtp SSRC PAYLOAD_HEX" for each RTP packet, until none has come for QUIET seconds
      after the first.
"""

import asyncio
import hashlib
import json
import ssl
import struct
import sys
import urllib.request

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import DatagramFrameReceived, StreamDataReceived
from cryptography.hazmat.primitives.serialization import Encoding

TIMEOUT = 10.0
QUIET = 1.0


def read_varint(buf, at):
    """QUIC variable-length integer at `at`: (value, next offset), or None if short."""
    if at >= len(buf):
        return None
    length = 1 << (buf[at] >> 6)
    if at + length > len(buf):
        return None
    value = buf[at] & 0x3F
    for b in buf[at + 1 : at + length]:
        value = (value << 8) | b
    return value, at + length


def write_varint(value):
    for length, tag in ((1, 0), (2, 1), (4, 2), (8, 3)):
        if value < 1 << (8 * length - 2):
            return (value | (tag << (8 * length - 2))).to_bytes(length, "big")
    raise ValueError("varint too large")


def join(base, token, room):
    req = urllib.request.Request(
        f"{base}/v1/rooms/{room}/sessions",
        data=json.dumps({"transport": "quic"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
        return json.load(resp)


class RoqProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.flow_id = None
        self.status = asyncio.get_event_loop().create_future()
        self.control_stream = None
        self.control_data = b""
        self.streams = {}  # stream id -> [buffer, flow id or None]
        self.packets = asyncio.Queue()

    def quic_event_received(self, event):
        if isinstance(event, DatagramFrameReceived):
            parsed = read_varint(event.data, 0)
            if parsed and parsed[0] == self.flow_id:
                self.packets.put_nowait(event.data[parsed[1] :])
        elif isinstance(event, StreamDataReceived):
            if event.stream_id == self.control_stream:
                self.control_data += event.data
                if b"\n" in self.control_data and not self.status.done():
                    self.status.set_result(self.control_data.split(b"\n")[0].decode())
            else:
                self.stream_data(event.stream_id, event.data)

    def stream_data(self, stream_id, data):
        state = self.streams.setdefault(stream_id, [b"", None])
        state[0] += data
        buf, at = state[0], 0
        if state[1] is None:
            parsed = read_varint(buf, 0)
            if parsed is None:
                return
            state[1], at = parsed
        while True:
            parsed = read_varint(buf, at)
            if parsed is None or parsed[1] + parsed[0] > len(buf):
                break
            length, start = parsed
            if state[1] == self.flow_id:
                self.packets.put_nowait(buf[start : start + length])
            at = start + length
        state[0] = buf[at:]


async def attach(answer):
    quic = answer["quic"]
    host, port = quic["addr"].rsplit(":", 1)
    config = QuicConfiguration(
        is_client=True,
        alpn_protocols=[quic["alpn"]],
        max_datagram_frame_size=65536,
        verify_mode=ssl.CERT_NONE,  # pinned by fingerprint below, as docs/transports.md says
    )
    return connect(host.strip("[]"), int(port), configuration=config, create_protocol=RoqProtocol)


async def open_session(client, answer):
    quic = answer["quic"]
    der = client._quic.tls._peer_certificate.public_bytes(Encoding.DER)
    if hashlib.sha256(der).hexdigest() != quic["cert_sha256"]:
        raise SystemExit("certificate fingerprint mismatch")
    client.flow_id = quic["flow_id"]
    client.control_stream = client._quic.get_next_available_stream_id()
    client._quic.send_stream_data(
        client.control_stream, (quic["session_token"] + "\n").encode(), end_stream=True
    )
    client.transmit()
    status = await asyncio.wait_for(client.status, TIMEOUT)
    if not status.startswith("OK "):
        raise SystemExit(f"relay refused the token: {status}")


def send_datagram(client, packet):
    client._quic.send_datagram_frame(write_varint(client.flow_id) + packet)
    client.transmit()


async def publish(base, token, room, payload_hex, count):
    answer = join(base, token, room)
    payload = bytes.fromhex(payload_hex)
    async with await attach(answer) as client:
        await open_session(client, answer)
        ssrc = answer["ssrc"]
        print(f"ssrc {ssrc}", flush=True)
        for seq in range(count):
            header = struct.pack("!BBHII", 0x80, 96, seq, seq * 3000, ssrc)
            send_datagram(client, header + payload)
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)


async def subscribe(base, token, room):
    answer = join(base, token, room)
    async with await attach(answer) as client:
        await open_session(client, answer)
        # FIR (RFC 5104 §4.3.1): PSFB, FMT 4, media SSRC 0, one FCI naming the relay's SSRC.
        fir = struct.pack(
            "!BBHIIIB3x", 0x84, 206, 4, answer["ssrc"], 0, answer["relay_ssrc"], 1
        )
        send_datagram(client, fir)
        wait = TIMEOUT
        while True:
            try:
                packet = await asyncio.wait_for(client.packets.get(), wait)
            except asyncio.TimeoutError:
                if wait == QUIET:
                    return
                raise
            if len(packet) < 12 or packet[0] >> 6 != 2 or 192 <= packet[1] <= 223:
                continue  # RTCP (rtcp-mux) or not RTP
            cc = packet[0] & 0x0F
            start = 12 + 4 * cc
            if packet[0] & 0x10:
                ext_len = struct.unpack("!H", packet[start + 2 : start + 4])[0]
                start += 4 + 4 * ext_len
            end = len(packet)
            if packet[0] & 0x20:
                end -= packet[-1]
            ssrc = struct.unpack("!I", packet[8:12])[0]
            print(f"rtp {ssrc} {packet[start:end].hex()}", flush=True)
            wait = QUIET


def main():
    mode, base, token, room = sys.argv[1:5]
    if mode == "publish":
        asyncio.run(publish(base, token, room, sys.argv[5], int(sys.argv[6])))
    elif mode == "subscribe":
        asyncio.run(subscribe(base, token, room))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
