// What a poll hands over: events as value types in a batch the client reuses, so that a
// frame's poll allocates nothing once the buffers have grown to the traffic (except for
// the rare events carrying text, and Mesh1, Mesh2 and unknown objects' arrays).
using System;
using System.Collections.Generic;

namespace GsRelay
{
    /// <summary>A wire dialect.</summary>
    public enum Dialect : uint
    {
        /// <summary>draft-01 as written (the default).</summary>
        Draft01 = Native.GSR_DIALECT_DRAFT01,
        /// <summary>Byte-compatible with the reference implementation (cisco/gse).</summary>
        Gse = Native.GSR_DIALECT_GSE,
    }

    /// <summary>How a session reaches the relay.</summary>
    public enum Transport : uint
    {
        /// <summary>RTP over UDP with SRTP (the default).</summary>
        Udp = Native.GSR_TRANSPORT_UDP,
        /// <summary>RTP over QUIC.</summary>
        Quic = Native.GSR_TRANSPORT_QUIC,
    }

    /// <summary>How the relay delivers others' objects.</summary>
    public enum Delivery : uint
    {
        /// <summary>Each sender's stream on its own (the default).</summary>
        PerStream = Native.GSR_DELIVERY_PER_STREAM,
        /// <summary>One stream from the relay carrying every sender's objects, for dense
        /// rooms (the events still name each sender's stream).</summary>
        Aggregated = Native.GSR_DELIVERY_AGGREGATED,
    }

    /// <summary>What an event tells.</summary>
    public enum EventKind : uint
    {
        /// <summary>The join succeeded: Ssrc is the session's, Message its session id.</summary>
        Joined = Native.GSR_EVENT_JOINED,
        /// <summary>An object's update: Ssrc is its stream, ObjectId its objectID, Object
        /// the object decoded, Data its bytes as sent.</summary>
        Object = Native.GSR_EVENT_OBJECT,
        /// <summary>Every stream in the room at the join (or at RequestSnapshot) has sent
        /// its state; <see cref="GsRelayEvent.Partial"/> when the wait timed out instead.</summary>
        SnapshotComplete = Native.GSR_EVENT_SNAPSHOT_COMPLETE,
        /// <summary>The first packet of stream Ssrc arrived.</summary>
        StreamStarted = Native.GSR_EVENT_STREAM_STARTED,
        /// <summary>Stream Ssrc ended (its sender left).</summary>
        StreamEnded = Native.GSR_EVENT_STREAM_ENDED,
        /// <summary>An ownership notice for (Ssrc, ObjectId): see
        /// <see cref="GsRelayEvent.Notice"/>; Code is the reason number.</summary>
        Ownership = Native.GSR_EVENT_OWNERSHIP,
        /// <summary>The relay was silent or gone and the session came back with its SSRC.</summary>
        Resumed = Native.GSR_EVENT_RESUMED,
        /// <summary>The session came back under a new SSRC (Ssrc).</summary>
        Rejoined = Native.GSR_EVENT_REJOINED,
        /// <summary>The session is over: <see cref="GsRelayEvent.EndReason"/> says why,
        /// Message may say more. Nothing follows it.</summary>
        Ended = Native.GSR_EVENT_ENDED,
        /// <summary>Something failed without ending the session: <see cref="GsRelayEvent.Error"/>
        /// is the status, Message the message.</summary>
        Error = Native.GSR_EVENT_ERROR,
        /// <summary>Nobody polled for a while and the queue filled: Count events were
        /// dropped before this one (old state, never an end).</summary>
        Dropped = Native.GSR_EVENT_DROPPED,
    }

    /// <summary>Why a session ended.</summary>
    public enum EndReason
    {
        /// <summary>The app left.</summary>
        Left = Native.GSR_ENDED_LEFT,
        /// <summary>The relay ended the session (the room closed, the identity removed).</summary>
        ByRelay = Native.GSR_ENDED_BY_RELAY,
        /// <summary>The join failed (the message says why).</summary>
        Failed = Native.GSR_ENDED_FAILED,
    }

    /// <summary>An ownership notice (docs/relay.md, "GSOW").</summary>
    public enum OwnershipNotice : uint
    {
        /// <summary>The object is this session's now.</summary>
        Granted = Native.GSR_NOTICE_GRANTED,
        /// <summary>The object was taken back.</summary>
        Lost = Native.GSR_NOTICE_LOST,
        /// <summary>A request was refused.</summary>
        Refused = Native.GSR_NOTICE_REFUSED,
    }

    /// <summary>Where a client is.</summary>
    public enum ClientState
    {
        /// <summary>Joining: no command is taken yet.</summary>
        Joining,
        /// <summary>Joined: publishing and the other commands are taken.</summary>
        Joined,
        /// <summary>Ended: nothing more happens.</summary>
        Ended,
    }

    /// <summary>One event. <see cref="Data"/> points into the client's buffer and is valid
    /// until its next Poll; everything else is a copy.</summary>
    public struct GsRelayEvent
    {
        /// <summary>What it tells.</summary>
        public EventKind Kind { get; internal set; }

        /// <summary>The stream or session it is about.</summary>
        public uint Ssrc { get; internal set; }

        /// <summary>The object it is about (objects, ownership).</summary>
        public ulong ObjectId { get; internal set; }

        /// <summary>A reason, status or end code, by kind (the C event's code).</summary>
        public int Code { get; internal set; }

        /// <summary>Flags, a count or a notice, by kind (the C event's flags).</summary>
        public uint Flags { get; internal set; }

        /// <summary>An object event's bytes as sent (its TLV): valid until the next Poll.</summary>
        public ArraySegment<byte> Data { get; internal set; }

        /// <summary>An object event's object decoded (Type None when it did not decode).</summary>
        public GsObject Object { get; internal set; }

        /// <summary>The text of Joined (the session id), Ended and Error events; else null.</summary>
        public string Message { get; internal set; }

        /// <summary>An object event whose bytes did not decode (Object is None; Data has them).</summary>
        public bool Undecoded { get { return Kind == EventKind.Object && (Flags & Native.GSR_FLAG_UNDECODED) != 0; } }

        /// <summary>A SnapshotComplete that timed out with streams still missing.</summary>
        public bool Partial { get { return Kind == EventKind.SnapshotComplete && (Flags & Native.GSR_FLAG_PARTIAL) != 0; } }

        /// <summary>Why an Ended event's session ended.</summary>
        public EndReason EndReason { get { return (EndReason)Code; } }

        /// <summary>An Error event's status.</summary>
        public Status Error { get { return (Status)Code; } }

        /// <summary>An Ownership event's notice.</summary>
        public OwnershipNotice Notice { get { return (OwnershipNotice)Flags; } }

        /// <summary>A Dropped event's count of events lost.</summary>
        public uint Count { get { return Flags; } }

        public override string ToString()
        {
            switch (Kind)
            {
                case EventKind.Object: return string.Format("Object {0} of {1}: {2}", ObjectId, Ssrc, Object);
                case EventKind.Ended: return string.Format("Ended ({0}) {1}", EndReason, Message);
                case EventKind.Error: return string.Format("Error ({0}) {1}", Error, Message);
                default: return string.Format("{0} {1}", Kind, Ssrc);
            }
        }
    }

    /// <summary>The events of one <see cref="GsRelayClient.Poll()"/>, in the client's
    /// reused array: valid until its next Poll. <c>foreach</c> over it allocates nothing.</summary>
    public struct EventBatch
    {
        readonly GsRelayEvent[] items;
        readonly int count;

        internal EventBatch(GsRelayEvent[] items, int count)
        {
            this.items = items;
            this.count = count;
        }

        /// <summary>How many events.</summary>
        public int Count { get { return count; } }

        /// <summary>Event <paramref name="i"/>, oldest first.</summary>
        public GsRelayEvent this[int i]
        {
            get
            {
                if ((uint)i >= (uint)count) throw new ArgumentOutOfRangeException("i");
                return items[i];
            }
        }

        public Enumerator GetEnumerator() { return new Enumerator(items, count); }

        /// <summary>Copies the events into <paramref name="into"/> (appended).</summary>
        public void CopyTo(List<GsRelayEvent> into)
        {
            for (int i = 0; i < count; i++) into.Add(items[i]);
        }

        /// <summary>An enumerator that allocates nothing.</summary>
        public struct Enumerator
        {
            readonly GsRelayEvent[] items;
            readonly int count;
            int at;

            internal Enumerator(GsRelayEvent[] items, int count)
            {
                this.items = items;
                this.count = count;
                at = -1;
            }

            public GsRelayEvent Current { get { return items[at]; } }

            public bool MoveNext() { return ++at < count; }
        }
    }
}
