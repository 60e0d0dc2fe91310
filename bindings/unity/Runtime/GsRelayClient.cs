// A session in a room: GsRelayClient.Join, then Poll every frame on one thread (Unity's
// main thread), Publish, and Dispose. Nothing ever calls back: the network runs on the
// native library's own threads and its results wait in a queue until Poll takes them.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace GsRelay
{
    /// <summary>What a join asks for. HttpBase, Token and Room are required.</summary>
    public sealed class JoinOptions
    {
        /// <summary>The relay's HTTP API, e.g. "http://127.0.0.1:8080".</summary>
        public string HttpBase { get; set; }

        /// <summary>The access token.</summary>
        public string Token { get; set; }

        /// <summary>The room.</summary>
        public string Room { get; set; }

        /// <summary>The interest as JSON (docs/interest.md), or null for the default.</summary>
        public string InterestJson { get; set; }

        /// <summary>UDP with SRTP (the default) or QUIC.</summary>
        public Transport Transport { get; set; }

        /// <summary>The wire dialect (draft-01 by default).</summary>
        public Dialect Dialect { get; set; }

        /// <summary>Per-stream (the default) or aggregated delivery.</summary>
        public Delivery Delivery { get; set; }

        /// <summary>Aggregated delivery: the longest an update waits for a packet to fill;
        /// zero for the relay's default.</summary>
        public TimeSpan AggregateMaxDelay { get; set; }

        /// <summary>The SSRC wanted; 0 lets the relay pick.</summary>
        public uint Ssrc { get; set; }

        /// <summary>Silence from the relay after which the session comes back (resume,
        /// else rejoin); zero for the default (15 s).</summary>
        public TimeSpan Silence { get; set; }

        /// <summary>Ask for a room stream: objects published with PublishRoom outlive the
        /// session.</summary>
        public bool RoomStream { get; set; }

        /// <summary>Plain RTP without SRTP (only relays run with --insecure-plain-rtp accept).</summary>
        public bool PlainRtp { get; set; }

        /// <summary>Ask for the whole room on joining (true by default): its objects, then
        /// a SnapshotComplete event.</summary>
        public bool Snapshot { get; set; }

        public JoinOptions()
        {
            Snapshot = true;
        }

        public JoinOptions(string httpBase, string token, string room)
            : this()
        {
            HttpBase = httpBase;
            Token = token;
            Room = room;
        }
    }

    /// <summary>A session's identifiers (<see cref="GsRelayClient.Info"/>).</summary>
    public struct ClientInfo
    {
        /// <summary>Joined (and not ended); when false the rest is zero.</summary>
        public bool Joined;
        /// <summary>The session's SSRC.</summary>
        public uint Ssrc;
        /// <summary>The relay's SSRC.</summary>
        public uint RelaySsrc;
        /// <summary>The room stream's SSRC, 0 without one.</summary>
        public uint RoomSsrc;
        /// <summary>The session id.</summary>
        public string SessionId;
    }

    /// <summary>An object of a stream, as ownership requests and releases name it; also a
    /// dictionary key for the objects an app tracks (equality without boxing).</summary>
    public struct ObjectRef : IEquatable<ObjectRef>
    {
        public uint Ssrc;
        public ulong ObjectId;

        public ObjectRef(uint ssrc, ulong objectId) { Ssrc = ssrc; ObjectId = objectId; }

        /// <summary>The object an Object event is about.</summary>
        public static ObjectRef Of(GsRelayEvent e) { return new ObjectRef(e.Ssrc, e.ObjectId); }

        public bool Equals(ObjectRef other) { return Ssrc == other.Ssrc && ObjectId == other.ObjectId; }

        public override bool Equals(object obj) { return obj is ObjectRef && Equals((ObjectRef)obj); }

        public override int GetHashCode() { return (int)Ssrc * 397 ^ ObjectId.GetHashCode(); }

        public override string ToString() { return string.Format("{0}/{1}", Ssrc, ObjectId); }
    }

    /// <summary>A client session. Not thread-safe: use it from one thread at a time (the
    /// main thread in Unity); its calls never wait on the network. Dispose it (OnDestroy)
    /// to leave the room and free it.</summary>
    public sealed class GsRelayClient : IDisposable
    {
        /// <summary>Native events taken per call of gsr_client_poll.</summary>
        const int NativeBatch = 128;

        ulong handle;
        readonly Dialect dialect;
        readonly Native.gsr_event[] nativeEvents = new Native.gsr_event[NativeBatch];
        GsRelayEvent[] events = new GsRelayEvent[NativeBatch];
        byte[] data = new byte[4096];
        Native.gsr_object[] nativeObjects = new Native.gsr_object[1];
        readonly Pins pins = new Pins();
        ClientState state = ClientState.Joining;
        uint ssrc;

        GsRelayClient(ulong handle, Dialect dialect)
        {
            this.handle = handle;
            this.dialect = dialect;
        }

        /// <summary>The version of the native library, "major.minor.patch".</summary>
        public static string Version { get { return Library.Version; } }

        /// <summary>Starts joining a room and returns at once; the outcome is an event
        /// (Joined, or Ended with EndReason.Failed and why). Throws GsRelayException for
        /// options the library refuses (Status.Argument: an unknown enum value, bad
        /// interest JSON) and ArgumentNullException for a missing HttpBase, Token or Room.</summary>
        public static GsRelayClient Join(JoinOptions options)
        {
            if (options == null) throw new ArgumentNullException("options");
            if (options.HttpBase == null) throw new ArgumentNullException("options.HttpBase");
            if (options.Token == null) throw new ArgumentNullException("options.Token");
            if (options.Room == null) throw new ArgumentNullException("options.Room");
            Library.EnsureLoaded();
            Native.gsr_join_options o = new Native.gsr_join_options();
            GsRelayException.Check(Native.gsr_join_options_init(ref o), "gsr_join_options_init");
            o.transport = (uint)options.Transport;
            o.dialect = (uint)options.Dialect;
            o.delivery = (uint)options.Delivery;
            o.aggregate_max_delay_ms = Milliseconds(options.AggregateMaxDelay, "AggregateMaxDelay");
            o.ssrc = options.Ssrc;
            o.silence_ms = Milliseconds(options.Silence, "Silence");
            o.room_stream = options.RoomStream ? (byte)1 : (byte)0;
            o.plain_rtp = options.PlainRtp ? (byte)1 : (byte)0;
            o.no_snapshot = options.Snapshot ? (byte)0 : (byte)1;
            Pins strings = new Pins();
            try
            {
                o.http_base = strings.Utf8z(options.HttpBase);
                o.token = strings.Utf8z(options.Token);
                o.room = strings.Utf8z(options.Room);
                o.interest_json = strings.Utf8z(options.InterestJson);
                ulong h;
                GsRelayException.Check(Native.gsr_client_join(ref o, out h), "gsr_client_join");
                return new GsRelayClient(h, options.Dialect);
            }
            finally
            {
                strings.Release();
            }
        }

        /// <summary>Join with the default options.</summary>
        public static GsRelayClient Join(string httpBase, string token, string room)
        {
            return Join(new JoinOptions(httpBase, token, room));
        }

        static uint Milliseconds(TimeSpan t, string what)
        {
            double ms = t.TotalMilliseconds;
            if (ms < 0 || ms > uint.MaxValue) throw new ArgumentOutOfRangeException(what);
            return (uint)ms;
        }

        ~GsRelayClient()
        {
            // A client nobody disposed: free it (the library leaves in the background).
            // gsr_client_free is safe from the finalizer's thread.
            Free();
        }

        /// <summary>The session's dialect: the objects it publishes and receives.</summary>
        public Dialect Dialect { get { return dialect; } }

        /// <summary>Where the session is, as the events polled so far tell.</summary>
        public ClientState State { get { return state; } }

        /// <summary>The session's SSRC once joined (from the Joined or Rejoined event), else 0.</summary>
        public uint Ssrc { get { return ssrc; } }

        /// <summary>Whether Dispose was called.</summary>
        public bool IsDisposed { get { return handle == 0; } }

        /// <summary>The native handle (for the C ABI directly; see docs/csharp-client.md).</summary>
        public ulong Handle { get { return Live(); } }

        ulong Live()
        {
            if (handle == 0) throw new ObjectDisposedException("GsRelayClient");
            return handle;
        }

        /// <summary>Takes every event waiting, oldest first (at most
        /// <paramref name="maxEvents"/>; the rest wait for the next call). Never waits.
        /// The batch and its events' Data are valid until the next Poll.</summary>
        public EventBatch Poll(int maxEvents = int.MaxValue)
        {
            int n = PollInto(maxEvents);
            return new EventBatch(events, n);
        }

        /// <summary>As <see cref="Poll(int)"/>, appending the events to <paramref name="into"/>;
        /// returns how many.</summary>
        public int Poll(List<GsRelayEvent> into, int maxEvents = int.MaxValue)
        {
            if (into == null) throw new ArgumentNullException("into");
            int n = PollInto(maxEvents);
            for (int i = 0; i < n; i++) into.Add(events[i]);
            return n;
        }

        int PollInto(int maxEvents)
        {
            ulong h = Live();
            if (maxEvents < 0) throw new ArgumentOutOfRangeException("maxEvents");
            int total = 0;
            int used = 0;
            while (total < maxEvents)
            {
                int capacity = Math.Min(NativeBatch, maxEvents - total);
                UIntPtr count;
                int status = Native.gsr_client_poll(h, nativeEvents, new UIntPtr((uint)capacity),
                    Native.EventSize, out count);
                GsRelayException.Check(status, "gsr_client_poll");
                int n = (int)count.ToUInt32();
                if (events.Length < total + n) Array.Resize(ref events, Math.Max(events.Length * 2, total + n));
                for (int i = 0; i < n; i++) events[total + i] = Convert(ref nativeEvents[i], ref used);
                total += n;
                if (n < capacity) break;
            }
            // Nothing the library handed out is kept: drop the copies' old strings too.
            for (int i = total; i < events.Length && events[i].Kind != 0; i++) events[i] = default(GsRelayEvent);
            return total;
        }

        GsRelayEvent Convert(ref Native.gsr_event e, ref int used)
        {
            GsRelayEvent ev = new GsRelayEvent();
            ev.Kind = (EventKind)e.kind;
            ev.Ssrc = e.ssrc;
            ev.ObjectId = e.object_id;
            ev.Code = e.code;
            ev.Flags = e.flags;
            int length = Marshalling.Count(e.data_length, "data");
            switch (ev.Kind)
            {
                case EventKind.Joined:
                    state = ClientState.Joined;
                    ssrc = e.ssrc;
                    ev.Message = Strings.FromUtf8(e.data, length);
                    break;
                case EventKind.Rejoined:
                    state = ClientState.Joined;
                    ssrc = e.ssrc;
                    break;
                case EventKind.Resumed:
                    state = ClientState.Joined;
                    break;
                case EventKind.Ended:
                    state = ClientState.Ended;
                    ev.Message = Strings.FromUtf8(e.data, length);
                    break;
                case EventKind.Error:
                    ev.Message = Strings.FromUtf8(e.data, length);
                    break;
                case EventKind.Object:
                    if (length > 0)
                    {
                        if (data.Length < used + length)
                        {
                            // A new array: the events already converted keep the old one.
                            data = new byte[Math.Max(data.Length * 2, used + length)];
                            used = 0;
                        }
                        Marshal.Copy(e.data, data, used, length);
                        ev.Data = new ArraySegment<byte>(data, used, length);
                        used += length;
                    }
                    ev.Object = Marshalling.FromNative(ref e.@object);
                    break;
            }
            return ev;
        }

        /// <summary>Publishes one object in one packet on the session's stream. Throws
        /// GsRelayException: Status.State before Joined or after Ended, Status.Busy when
        /// the network thread is behind, Status.Encode for an object the dialect cannot
        /// carry (see <see cref="TryPublish"/>).</summary>
        public void Publish(GsObject obj)
        {
            GsRelayException.Check(PublishOne(obj, false), "gsr_client_publish");
        }

        /// <summary>Publishes the objects in one packet.</summary>
        public void Publish(params GsObject[] objects)
        {
            if (objects == null) throw new ArgumentNullException("objects");
            GsRelayException.Check(PublishMany(objects, objects.Length, false), "gsr_client_publish");
        }

        /// <summary>Publishes the objects in one packet (no params array to allocate).</summary>
        public void Publish(List<GsObject> objects)
        {
            if (objects == null) throw new ArgumentNullException("objects");
            GsRelayException.Check(PublishMany(objects, objects.Count, false), "gsr_client_publish");
        }

        /// <summary>As <see cref="Publish(GsObject)"/>, but returns false instead of throwing
        /// when the session cannot take it now (not joined yet or ended: Status.State;
        /// queue full: Status.Busy). Other errors still throw.</summary>
        public bool TryPublish(GsObject obj)
        {
            int status = PublishOne(obj, false);
            if (status == Native.GSR_ERR_STATE || status == Native.GSR_ERR_BUSY) return false;
            GsRelayException.Check(status, "gsr_client_publish");
            return true;
        }

        /// <summary>Publishes <paramref name="payload"/> as one packet's payload as it is (a
        /// game-state payload of the session's dialect, from a GsEncoder say).</summary>
        public void PublishRaw(byte[] payload)
        {
            if (payload == null) throw new ArgumentNullException("payload");
            PublishRaw(payload, 0, payload.Length);
        }

        static readonly Marshalling.SpanCall PublishRawCall = Native.gsr_client_publish_raw;

        /// <summary>Publishes <paramref name="count"/> bytes of <paramref name="payload"/>
        /// from <paramref name="offset"/> as one packet's payload.</summary>
        public void PublishRaw(byte[] payload, int offset, int count)
        {
            Marshalling.WithSpan(Live(), payload, offset, count, PublishRawCall, "gsr_client_publish_raw");
        }

        /// <summary>Publishes objects on the session's room stream (it joined with
        /// RoomStream): they belong to the room and outlive the session.</summary>
        public void PublishRoom(params GsObject[] objects)
        {
            if (objects == null) throw new ArgumentNullException("objects");
            GsRelayException.Check(PublishMany(objects, objects.Length, true), "gsr_client_publish_room");
        }

        int PublishOne(GsObject obj, bool room)
        {
            ulong h = Live();
            try
            {
                Marshalling.ToNative(ref obj, ref nativeObjects[0], pins);
                return room
                    ? Native.gsr_client_publish_room(h, nativeObjects, new UIntPtr(1u))
                    : Native.gsr_client_publish(h, nativeObjects, new UIntPtr(1u));
            }
            finally
            {
                pins.Release();
                nativeObjects[0] = default(Native.gsr_object);
            }
        }

        int PublishMany(IList<GsObject> objects, int count, bool room)
        {
            ulong h = Live();
            if (nativeObjects.Length < count) nativeObjects = new Native.gsr_object[count];
            try
            {
                for (int i = 0; i < count; i++)
                {
                    GsObject g = objects[i];
                    Marshalling.ToNative(ref g, ref nativeObjects[i], pins);
                }
                UIntPtr n = new UIntPtr((uint)count);
                return room
                    ? Native.gsr_client_publish_room(h, nativeObjects, n)
                    : Native.gsr_client_publish(h, nativeObjects, n);
            }
            finally
            {
                pins.Release();
                Array.Clear(nativeObjects, 0, count);
            }
        }

        /// <summary>Asks for the whole room again; a SnapshotComplete event follows.</summary>
        public void RequestSnapshot()
        {
            GsRelayException.Check(Native.gsr_client_request_snapshot(Live()), "gsr_client_request_snapshot");
        }

        /// <summary>Changes what the session receives: <paramref name="interestJson"/> as in
        /// docs/interest.md, or null for the default. Malformed JSON throws GsRelayException
        /// (Status.Argument) here; the relay's refusal comes as an Error event.</summary>
        public void SetInterest(string interestJson)
        {
            ulong h = Live();
            GsRelayException.Check(Native.gsr_client_set_interest(h, Strings.Utf8z(interestJson)),
                "gsr_client_set_interest");
        }

        /// <summary>Asks the relay for objects of other streams; each answer is an
        /// Ownership event (granted or refused).</summary>
        public void RequestObjects(params ObjectRef[] refs)
        {
            GsRelayException.Check(Native.gsr_client_request_objects(Live(), Refs(refs), Length(refs)),
                "gsr_client_request_objects");
        }

        /// <summary>Gives held objects back.</summary>
        public void ReleaseObjects(params ObjectRef[] refs)
        {
            GsRelayException.Check(Native.gsr_client_release_objects(Live(), Refs(refs), Length(refs)),
                "gsr_client_release_objects");
        }

        static Native.gsr_object_ref[] Refs(ObjectRef[] refs)
        {
            if (refs == null) throw new ArgumentNullException("refs");
            Native.gsr_object_ref[] c = new Native.gsr_object_ref[refs.Length];
            for (int i = 0; i < refs.Length; i++)
            {
                c[i].ssrc = refs[i].Ssrc;
                c[i].object_id = refs[i].ObjectId;
            }
            return c;
        }

        static UIntPtr Length(ObjectRef[] refs) { return new UIntPtr((uint)(refs == null ? 0 : refs.Length)); }

        /// <summary>The session's identifiers, as the library knows them now.</summary>
        public ClientInfo Info
        {
            get
            {
                Native.gsr_client_info c = new Native.gsr_client_info();
                c.struct_size = Native.ClientInfoSize;
                c.session_id = new byte[64];
                GsRelayException.Check(Native.gsr_client_get_info(Live(), ref c), "gsr_client_get_info");
                int n = 0;
                while (n < c.session_id.Length && c.session_id[n] != 0) n++;
                return new ClientInfo
                {
                    Joined = c.joined != 0,
                    Ssrc = c.ssrc,
                    RelaySsrc = c.relay_ssrc,
                    RoomSsrc = c.room_ssrc,
                    SessionId = System.Text.Encoding.UTF8.GetString(c.session_id, 0, n),
                };
            }
        }

        /// <summary>Leaves the room; an Ended event (EndReason.Left) follows. The client
        /// stays usable for Poll until disposed.</summary>
        public void Leave()
        {
            GsRelayException.Check(Native.gsr_client_leave(Live()), "gsr_client_leave");
        }

        /// <summary>Frees the client: the library leaves the room in the background if still
        /// joined. A second Dispose does nothing; any other call after it throws
        /// ObjectDisposedException.</summary>
        public void Dispose()
        {
            Free();
            GC.SuppressFinalize(this);
        }

        void Free()
        {
            ulong h = handle;
            if (h == 0) return;
            handle = 0;
            // GSR_ERR_HANDLE cannot happen for a handle only this object frees; nothing
            // else can fail.
            Native.gsr_client_free(h);
        }
    }
}
