#!/usr/bin/env python3
"""GStreamer's RTP stack (rtpbin) as a peer of the relay, for tests/gstreamer.rs.

Plain RTP with rtcp-mux: one UDP socket at --port sends and receives RTP and RTCP
(a subscriber's RTCP arriving on rtpbin's RTP pad is demultiplexed by rtpsession; a
publisher receives only RTCP, fed to the RTCP pad). The session's own
SSRC is --ssrc, the one the relay's join answer gave, so the relay accepts its RTCP.

  subscribe: receives the relay's streams for --seconds.
  publish:   sends --count RTP packets carrying --payload (hex) every --interval-ms, then
             waits --linger seconds for the relay's reports.

Either prints one JSON object: rtpsession's statistics per source.

Needs python3-gi and gir1.2-gstreamer-1.0 (Debian); run with the system python.
"""

import argparse
import json
import socket
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib, Gst  # noqa: E402

CAPS = "application/x-rtp,media=application,clock-rate=90000,encoding-name=X-GAMESTATE,payload=96"


def structure(s):
    """A GstStructure as a dict of its plain fields."""
    out = {}
    for i in range(s.n_fields()):
        name = s.nth_field_name(i)
        value = s.get_value(name)
        if isinstance(value, (bool, int, float, str)):
            out[name] = value
    return out


def build(args, sending):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", args.port))
    gsock = Gio.Socket.new_from_fd(sock.detach())
    host, port = args.relay.rsplit(":", 1)
    if sending:
        # A publish-only session receives only the relay's RTCP: into the RTCP pad, where
        # rtpsession times its arrival for the round trip (the muxed path does not).
        desc = 'udpsrc name=src caps="application/x-rtcp" ! rtpbin.recv_rtcp_sink_0 rtpbin name=rtpbin '
    else:
        desc = f'udpsrc name=src caps="{CAPS}" ! rtpbin.recv_rtp_sink_0 rtpbin name=rtpbin '
    desc += f"rtpbin.send_rtcp_src_0 ! udpsink name=rtcpsink host={host} port={port} sync=false async=false "
    if sending:
        desc += f'appsrc name=app is-live=true do-timestamp=true format=time caps="{CAPS}" ! rtpbin.send_rtp_sink_0 '
        desc += f"rtpbin.send_rtp_src_0 ! udpsink name=rtpsink host={host} port={port} sync=false async=false "
    pipe = Gst.parse_launch(desc)
    pipe.get_by_name("src").set_property("socket", gsock)
    for name in ("rtcpsink", "rtpsink"):
        sink = pipe.get_by_name(name)
        if sink is not None:
            sink.set_property("socket", gsock)
            sink.set_property("close-socket", False)
    rtpbin = pipe.get_by_name("rtpbin")

    def pad_added(_bin, pad):
        if pad.get_name().startswith("recv_rtp_src"):
            sink = Gst.ElementFactory.make("fakesink")
            sink.set_property("sync", False)
            pipe.add(sink)
            sink.sync_state_with_parent()
            pad.link(sink.get_static_pad("sink"))

    rtpbin.connect("pad-added", pad_added)
    session = rtpbin.emit("get-internal-session", 0)
    session.set_property("internal-ssrc", args.ssrc)
    session.set_property("rtcp-min-interval", int(args.rtcp_interval * Gst.SECOND))
    return pipe, session


def rtp_packet(seq, ts, ssrc, payload):
    header = bytes([0x80, 96]) + seq.to_bytes(2, "big") + ts.to_bytes(4, "big")
    return header + ssrc.to_bytes(4, "big") + payload


def run(pipe, seconds, on_start=None):
    loop = GLib.MainLoop()
    bus = pipe.get_bus()
    bus.add_signal_watch()
    failed = []

    def on_message(_bus, msg):
        if msg.type == Gst.MessageType.ERROR:
            failed.append(str(msg.parse_error()))
            loop.quit()

    bus.connect("message", on_message)
    pipe.set_state(Gst.State.PLAYING)
    if on_start:
        on_start(loop)
    GLib.timeout_add(int(seconds * 1000), loop.quit)
    loop.run()
    return failed


def sources(session):
    """rtpsession's statistics per source, by SSRC (the remote sources' rb-* fields are
    the last reception block each sent about this session's SSRC)."""
    out = {}
    for src in session.get_property("sources"):
        stats = structure(src.get_property("stats"))
        out[str(stats.get("ssrc"))] = stats
    return out


def subscribe(args):
    pipe, session = build(args, sending=False)
    failed = run(pipe, args.seconds)
    found = sources(session)
    pipe.set_state(Gst.State.NULL)
    print(json.dumps({"errors": failed, "sources": found}))


def publish(args):
    pipe, session = build(args, sending=True)
    app = pipe.get_by_name("app")
    payload = bytes.fromhex(args.payload)
    sent = {"packets": 0, "last_seq": None}

    def start(_loop):
        state = {"i": 0}

        def tick():
            i = state["i"]
            if i >= args.count:
                return False
            seq = (args.first_seq + i) & 0xFFFF
            pkt = rtp_packet(seq, (i * 90 * args.interval_ms) & 0xFFFFFFFF, args.ssrc, payload)
            app.emit("push-buffer", Gst.Buffer.new_wrapped(pkt))
            sent["packets"] += 1
            sent["last_seq"] = seq
            state["i"] = i + 1
            return True

        GLib.timeout_add(args.interval_ms, tick)

    duration = args.count * args.interval_ms / 1000 + args.linger
    failed = run(pipe, duration, start)
    found = sources(session)
    pipe.set_state(Gst.State.NULL)
    print(json.dumps({"errors": failed, "sent": sent, "sources": found}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["subscribe", "publish"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--relay", required=True)
    p.add_argument("--ssrc", type=int, required=True)
    p.add_argument("--rtcp-interval", type=float, default=1.0)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--payload", default="")
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--interval-ms", type=int, default=20)
    p.add_argument("--first-seq", type=int, default=4000)
    p.add_argument("--linger", type=float, default=2.5)
    args = p.parse_args()
    Gst.init(None)
    {"subscribe": subscribe, "publish": publish}[args.mode](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
