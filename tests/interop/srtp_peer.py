#!/usr/bin/env python3
"""libsrtp peer for tests/srtp_interop.rs, through the pylibsrtp package.

usage: srtp_peer.py {protect,unprotect} PROFILE KEY_BASE64

Reads lines "rtp HEX" or "rtcp HEX" from stdin and writes one HEX line per input line:
the packet protected or unprotected by libsrtp with KEY (master key || master salt, base64).
Any libsrtp failure goes to stderr with exit status 1.
"""

import base64
import sys

import pylibsrtp

PROFILES = {
    "AES_CM_128_HMAC_SHA1_80": pylibsrtp.Policy.SRTP_PROFILE_AES128_CM_SHA1_80,
    "AEAD_AES_128_GCM": pylibsrtp.Policy.SRTP_PROFILE_AEAD_AES_128_GCM,
}


def main() -> int:
    mode, profile, key = sys.argv[1:]
    ssrc_type = {
        "protect": pylibsrtp.Policy.SSRC_ANY_OUTBOUND,
        "unprotect": pylibsrtp.Policy.SSRC_ANY_INBOUND,
    }[mode]
    policy = pylibsrtp.Policy(
        key=base64.b64decode(key, validate=True),
        ssrc_type=ssrc_type,
        srtp_profile=PROFILES[profile],
    )
    session = pylibsrtp.Session(policy)
    for number, line in enumerate(sys.stdin, 1):
        kind, packet = line.split()
        op = {
            ("protect", "rtp"): session.protect,
            ("protect", "rtcp"): session.protect_rtcp,
            ("unprotect", "rtp"): session.unprotect,
            ("unprotect", "rtcp"): session.unprotect_rtcp,
        }[(mode, kind)]
        try:
            print(op(bytes.fromhex(packet)).hex())
        except pylibsrtp.Error as error:
            print(f"libsrtp {mode} {kind} failed on line {number}: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
