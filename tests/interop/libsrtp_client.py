#!/usr/bin/env python3
"""An independent gsrelay client for tests/relay_libsrtp.rs: the standard library for HTTP,
UDP and RTP/RTCP framing, and libsrtp (through pylibsrtp) for SRTP. Nothing of gsrelay.

usage:
  libsrtp_client.py publish   HTTP_BASE ROOM TOKEN PROFILE PAYLOAD_HEX...
  libsrtp_client.py subscribe HTTP_BASE ROOM TOKEN PROFILE FIR_TARGET...

Both join ROOM over HTTP (POST /v1/rooms/{room}/sessions, bearer TOKEN, "srtp_profile":
PROFILE) and print the join answer's fields as the first JSON line on stdout.

publish: sends one SRTP packet per PAYLOAD_HEX, in order, with consecutive sequence numbers,
protected with client_key; prints {"sent": seq, "payload": hex} per packet.

subscribe: sends an SRTCP receiver report (latches its address), then for each FIR_TARGET
("relay" for the relay's SSRC, else an SSRC in decimal) an SRTCP FIR with the next command
sequence number, and waits for the first SRTP packet after it, unprotected with relay_key;
prints {"ssrc", "seq", "payload"} for it. RTCP received meanwhile is unprotected too and
printed as {"rtcp": hex}.

Every wait has a timeout; any failure exits with status 1 and a message on stderr.
"""

import base64
import json
import os
import socket
import struct
import sys
import urllib.error
import urllib.request

import pylibsrtp

PROFILES = {
    "AES_CM_128_HMAC_SHA1_80": pylibsrtp.Policy.SRTP_PROFILE_AES128_CM_SHA1_80,
    "AEAD_AES_128_GCM": pylibsrtp.Policy.SRTP_PROFILE_AEAD_AES_128_GCM,
}
HTTP_TIMEOUT = 10.0
RECV_TIMEOUT = 5.0
PAYLOAD_TYPE = 96
RTCP_RR = 201
RTCP_PSFB = 206
FMT_FIR = 4


def fail(message: str) -> None:
    print(f"libsrtp_client: {message}", file=sys.stderr)
    sys.exit(1)


def emit(value: dict) -> None:
    print(json.dumps(value), flush=True)


def join(http_base: str, room: str, token: str, profile: str) -> dict:
    body = json.dumps({"transport": "rtp", "srtp_profile": profile}).encode()
    request = urllib.request.Request(
        f"{http_base}/v1/rooms/{room}/sessions",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
            if response.status != 201:
                fail(f"join answered {response.status}")
            return json.load(response)
    except urllib.error.HTTPError as error:
        fail(f"join answered {error.code}: {error.read().decode(errors='replace')}")


def rtp_packet(seq: int, timestamp: int, ssrc: int, payload: bytes) -> bytes:
    """RFC 3550 §5.1: V=2, no padding, extension or CSRC, marker 0."""
    return struct.pack("!BBHII", 0x80, PAYLOAD_TYPE, seq, timestamp, ssrc) + payload


def rtcp_rr(ssrc: int) -> bytes:
    """RFC 3550 §6.4.2: an RR with no report blocks (length 1 word after the header)."""
    return struct.pack("!BBHI", 0x80, RTCP_RR, 1, ssrc)


def rtcp_fir(sender_ssrc: int, media_ssrc: int, command_seq: int) -> bytes:
    """RFC 5104 §4.3.1: PSFB with FMT 4, media source 0, one FCI entry (SSRC, seq, 0)."""
    return struct.pack(
        "!BBHIIIB3x",
        0x80 | FMT_FIR,
        RTCP_PSFB,
        4,
        sender_ssrc,
        0,
        media_ssrc,
        command_seq,
    )


def is_rtcp(datagram: bytes) -> bool:
    """RFC 5761 §4: payload types 64-95 (packet types 192-223) are RTCP."""
    return len(datagram) >= 2 and 192 <= datagram[1] <= 223


def sessions(answer: dict, profile: str):
    srtp = answer["rtp"]["srtp"]
    if srtp is None or srtp["profile"] != profile:
        fail(f"join answer has srtp {srtp!r}, wanted profile {profile}")
    outbound = pylibsrtp.Session(
        pylibsrtp.Policy(
            key=base64.b64decode(srtp["client_key"], validate=True),
            ssrc_type=pylibsrtp.Policy.SSRC_ANY_OUTBOUND,
            srtp_profile=PROFILES[profile],
        )
    )
    inbound = pylibsrtp.Session(
        pylibsrtp.Policy(
            key=base64.b64decode(srtp["relay_key"], validate=True),
            ssrc_type=pylibsrtp.Policy.SSRC_ANY_INBOUND,
            srtp_profile=PROFILES[profile],
        )
    )
    return outbound, inbound


def udp_socket(answer: dict) -> socket.socket:
    host, _, port = answer["rtp"]["addr"].rpartition(":")
    address = (host.strip("[]"), int(port))
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.settimeout(RECV_TIMEOUT)
    sock.connect(address)
    return sock


def publish(answer: dict, outbound, sock: socket.socket, payloads: list) -> None:
    ssrc = answer["ssrc"]
    seq = struct.unpack("!H", os.urandom(2))[0]
    timestamp = struct.unpack("!I", os.urandom(4))[0]
    for payload in payloads:
        packet = rtp_packet(seq, timestamp, ssrc, payload)
        sock.send(outbound.protect(packet))
        emit({"sent": seq, "payload": payload.hex()})
        seq = (seq + 1) & 0xFFFF
        timestamp = (timestamp + 4500) & 0xFFFFFFFF  # 50 ms at 90 kHz


def subscribe(answer: dict, outbound, inbound, sock: socket.socket, targets: list) -> None:
    ssrc = answer["ssrc"]
    sock.send(outbound.protect_rtcp(rtcp_rr(ssrc)))
    command_seq = struct.unpack("!B", os.urandom(1))[0]
    for target in targets:
        media = answer["relay_ssrc"] if target == "relay" else int(target)
        command_seq = (command_seq + 1) & 0xFF
        sock.send(outbound.protect_rtcp(rtcp_fir(ssrc, media, command_seq)))
        while True:
            try:
                datagram = sock.recv(65535)
            except socket.timeout:
                fail(f"no SRTP packet within {RECV_TIMEOUT} s of the FIR for {media}")
            try:
                if is_rtcp(datagram):
                    emit({"rtcp": inbound.unprotect_rtcp(datagram).hex()})
                    continue
                packet = inbound.unprotect(datagram)
            except pylibsrtp.Error as error:
                fail(f"libsrtp could not unprotect a datagram from the relay: {error}")
            if len(packet) < 12 or packet[0] >> 6 != 2:
                fail(f"not RTP after unprotect: {packet.hex()}")
            csrcs = packet[0] & 0x0F
            header = 12 + 4 * csrcs
            if packet[0] & 0x10:
                (words,) = struct.unpack("!H", packet[header + 2 : header + 4])
                header += 4 + 4 * words
            end = len(packet) - (packet[-1] if packet[0] & 0x20 else 0)
            seq, _, from_ssrc = struct.unpack("!HII", packet[2:12])
            emit({"ssrc": from_ssrc, "seq": seq, "payload": packet[header:end].hex()})
            break


def main() -> None:
    if len(sys.argv) < 7 or sys.argv[1] not in ("publish", "subscribe"):
        fail(__doc__)
    mode, http_base, room, token, profile = sys.argv[1:6]
    rest = sys.argv[6:]
    if profile not in PROFILES:
        fail(f"unknown profile {profile}")
    answer = join(http_base, room, token, profile)
    emit(
        {
            "session_id": answer["session_id"],
            "ssrc": answer["ssrc"],
            "relay_ssrc": answer["relay_ssrc"],
            "rtp_addr": answer["rtp"]["addr"],
            "profile": answer["rtp"]["srtp"]["profile"] if answer["rtp"]["srtp"] else None,
        }
    )
    outbound, inbound = sessions(answer, profile)
    with udp_socket(answer) as sock:
        if mode == "publish":
            publish(answer, outbound, sock, [bytes.fromhex(p) for p in rest])
        else:
            subscribe(answer, outbound, inbound, sock, rest)


if __name__ == "__main__":
    main()
