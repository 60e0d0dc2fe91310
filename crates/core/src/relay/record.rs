//! Recorders (`docs/recording.md`): a recorder session of a room is sent a copy of every
//! RTP packet the room accepts, with its source header (SSRC, sequence number, timestamp,
//! marker, payload type), and on [`super::Input::Checkpoint`] the room's whole cached
//! state at once, unpaced. Both go into the outbox like any packet, so the shell hands
//! them to the recorder's writer with the rest of a batch; nothing here allocates per
//! packet, and a room without a recorder pays one emptiness check per packet.

use super::api::{CHECKPOINT_PACKET, SessionId};
use super::forward::Packet;
use super::outbox::Outbox;
use super::room::{Room, Stream};
use super::state::State;
use crate::rtp::{PacketClass, RtpHeader};

/// Sends each recorder of `room` a copy of `p` as the room accepted it: the source's
/// header fields, and only the objects the room took (all of them, usually).
pub(super) fn copy(room: &Room, out: &mut Outbox, p: &Packet<'_, '_>) {
    for &to in &room.recorders {
        let header = RtpHeader {
            marker: p.marker,
            payload_type: p.payload_type,
            sequence_number: p.seq,
            timestamp: p.timestamp,
            ssrc: p.ssrc,
            csrcs: &[],
            extension: p.extension.map(Into::into),
        };
        let Some((buf, start)) = out.begin_rtp(&header) else {
            continue;
        };
        if p.complete {
            buf.extend_from_slice(p.payload);
        } else {
            for r in p.refs {
                buf.extend_from_slice(r.bytes(p.payload));
            }
        }
        out.commit_direct(to, PacketClass::Rtp, start);
    }
}

/// Queues for recorder `to` the whole cached state of its room: each stream's objects,
/// in SSRC order, packed into packets of at most [`CHECKPOINT_PACKET`] bytes under the
/// stream's newest header fields. A stream that holds no object sends nothing.
pub(super) fn checkpoint(st: &mut State, to: SessionId) {
    let Some(s) = st.sessions.get(&to).filter(|s| s.recorder) else {
        return;
    };
    let Some(room) = st.rooms.get(&s.room) else {
        return;
    };
    let mut ssrcs: Vec<u32> = room.streams.keys().copied().collect();
    ssrcs.sort_unstable();
    for ssrc in ssrcs {
        if let Some(stream) = room.streams.get(&ssrc) {
            state_of(&mut st.out, to, ssrc, stream);
        }
    }
}

/// One stream's objects as checkpoint packets for `to`.
fn state_of(out: &mut Outbox, to: SessionId, ssrc: u32, stream: &Stream) {
    let mut entries = stream.store.iter().map(|(_, e)| &e.bytes).peekable();
    while entries.peek().is_some() {
        let header = RtpHeader {
            marker: false,
            payload_type: stream.payload_type,
            sequence_number: stream.last_seq,
            timestamp: stream.last_ts,
            ssrc,
            csrcs: &[],
            extension: None,
        };
        let Some((buf, start)) = out.begin_rtp(&header) else {
            return;
        };
        let body = buf.len();
        // An object's TLVs never straddle two packets; one larger than a packet (none:
        // the relay takes no packet that large) goes alone.
        while let Some(tlvs) = entries
            .next_if(|t| buf.len() == body || buf.len() - start + t.len() <= CHECKPOINT_PACKET)
        {
            buf.extend_from_slice(tlvs);
        }
        out.commit_direct(to, PacketClass::Rtp, start);
    }
}
