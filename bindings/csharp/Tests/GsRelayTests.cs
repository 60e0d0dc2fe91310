// The C# binding's tests, a Mono console program in C# 7 (tests/ffi_csharp.rs compiles it
// with mcs against GsRelay.dll, built from bindings/unity/Runtime, and runs it with mono):
//
//   GsRelayTests.exe run HTTP_BASE ROOM TOKEN_A TOKEN_B TOKEN_C VERSION
//       every case below, against the codec and a real relay; the last line printed is
//       "N passed, M failed", and the exit status is 1 if any failed
//   GsRelayTests.exe layout
//       the size of every Native struct and the offset and size of each of its fields,
//       flattened, for comparison with the C header's (gcc's offsetof)
//   GsRelayTests.exe noload
//       run without the native library on the path: the first use must throw a
//       GsRelayException naming the library file, the platform and the architecture
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using GsRelay;

static class GsRelayTests
{
    static int passed, failed;

    static int Main(string[] args)
    {
        string mode = args.Length > 0 ? args[0] : "";
        switch (mode)
        {
            case "layout":
                Layout.Print();
                return 0;
            case "noload":
                return NoLoad();
            case "run":
                if (args.Length != 7)
                {
                    Console.Error.WriteLine("usage: GsRelayTests.exe run HTTP_BASE ROOM TOKEN_A TOKEN_B TOKEN_C VERSION");
                    return 2;
                }
                Run(args[1], args[2], args[3], args[4], args[5], args[6]);
                Console.WriteLine("{0} passed, {1} failed", passed, failed);
                return failed == 0 ? 0 : 1;
            default:
                Console.Error.WriteLine("usage: GsRelayTests.exe run|layout|noload ...");
                return 2;
        }
    }

    static void Case(string name, Action body)
    {
        Stopwatch watch = Stopwatch.StartNew();
        try
        {
            body();
            passed++;
            Console.WriteLine("ok {0} ({1} ms)", name, watch.ElapsedMilliseconds);
        }
        catch (Exception e)
        {
            failed++;
            Console.WriteLine("FAILED {0}: {1}", name, e);
        }
    }

    static int NoLoad()
    {
        try
        {
            using (new GsEncoder(Dialect.Draft01)) { }
            Console.WriteLine("the library loaded: it was meant to be missing");
            return 1;
        }
        catch (GsRelayException e)
        {
            Console.WriteLine(e.Message);
            bool ok = e.Status == Status.LibraryNotLoaded && e.InnerException is DllNotFoundException &&
                e.Message.Contains("libgsrelay_ffi.so") && e.Message.Contains("X64") &&
                e.Message.Contains("64-bit");
            return ok ? 0 : 1;
        }
    }

    static void Run(string httpBase, string room, string tokenA, string tokenB, string tokenC, string version)
    {
        Case("version", () => Check.Equal(version, GsRelayClient.Version, "version"));
        foreach (Dialect d in new[] { Dialect.Draft01, Dialect.Gse })
        {
            Dialect dialect = d;
            Case("codec round trip, each object alone: " + dialect, () => Codec.EachAlone(dialect));
            Case("codec round trip, all in one payload: " + dialect, () => Codec.AllTogether(dialect));
        }
        Case("codec: an object the dialect cannot carry is Status.Encode", Codec.EncodeError);
        Case("codec: bytes that do not decode are Status.Decode", Codec.DecodeError);
        Case("codec: a value that is no Dialect is Status.Argument", Codec.WrongDialect);
        Case("codec: Dispose twice is harmless, use after it ObjectDisposedException", Codec.DisposeTwice);
        new Relay(httpBase, room, tokenA, tokenB, tokenC).Run();
    }

    /// <summary>Assertions that say what differed.</summary>
    internal static class Check
    {
        internal static void True(bool ok, string what)
        {
            if (!ok) throw new Exception("not so: " + what);
        }

        internal static void Equal<T>(T want, T got, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(want, got))
            {
                throw new Exception(string.Format("{0}: want {1}, got {2}", what, want, got));
            }
        }

        internal static void Bytes(byte[] want, ArraySegment<byte> got, string what)
        {
            byte[] g = new byte[got.Count];
            Array.Copy(got.Array, got.Offset, g, 0, got.Count);
            Bytes(want, g, what);
        }

        internal static void Bytes(byte[] want, byte[] got, string what)
        {
            if (Convert.ToBase64String(want) != Convert.ToBase64String(got))
            {
                throw new Exception(string.Format("{0}: want {1}, got {2}", what,
                    BitConverter.ToString(want), BitConverter.ToString(got)));
            }
        }

        /// <summary>Throws unless <paramref name="body"/> throws a GsRelayException of
        /// <paramref name="status"/>; returns it.</summary>
        internal static GsRelayException Throws(Status status, Action body, string what)
        {
            try
            {
                body();
            }
            catch (GsRelayException e)
            {
                Equal(status, e.Status, what + " (" + e.Message + ")");
                True(e.Message.Length > 0, what + ": a message");
                return e;
            }
            throw new Exception(what + ": no GsRelayException");
        }

        internal static void Throws<E>(Action body, string what) where E : Exception
        {
            try
            {
                body();
            }
            catch (E)
            {
                return;
            }
            throw new Exception(what + ": no " + typeof(E).Name);
        }

        /// <summary>Field-by-field equality of two objects' structs (reflection: the test's
        /// own, never the binding's), arrays element by element.</summary>
        internal static void Same(object want, object got, string what)
        {
            string diff = Diff(want, got, what);
            if (diff != null) throw new Exception(diff);
        }

        static string Diff(object a, object b, string path)
        {
            if (a == null || b == null)
            {
                return a == b ? null : string.Format("{0}: {1} vs {2}", path, a ?? "null", b ?? "null");
            }
            Type t = a.GetType();
            if (t != b.GetType()) return string.Format("{0}: {1} vs {2}", path, t, b.GetType());
            if (t.IsPrimitive || t.IsEnum || t == typeof(string))
            {
                return a.Equals(b) ? null : string.Format("{0}: {1} vs {2}", path, a, b);
            }
            Array aa = a as Array;
            if (aa != null)
            {
                Array ba = (Array)b;
                if (aa.Length != ba.Length) return string.Format("{0}: {1} vs {2} items", path, aa.Length, ba.Length);
                for (int i = 0; i < aa.Length; i++)
                {
                    string d = Diff(aa.GetValue(i), ba.GetValue(i), path + "[" + i + "]");
                    if (d != null) return d;
                }
                return null;
            }
            foreach (FieldInfo f in t.GetFields(BindingFlags.Instance | BindingFlags.Public))
            {
                string d = Diff(f.GetValue(a), f.GetValue(b), path + "." + f.Name);
                if (d != null) return d;
            }
            return null;
        }
    }

    /// <summary>One object of every type a dialect carries (as tests/ffi/objects.h), with
    /// values Float16 holds exactly.</summary>
    internal static class Objects
    {
        static Loc2 Loc(float x) { return new Loc2(x, x + 1, x + 2, 0.5f, -0.5f, 0.25f); }

        static Rot2 Rot() { return new Rot2(0.5f, 0.25f, -0.125f, 0f, 0.0625f, 1f); }

        internal static List<GsObject> All(Dialect dialect, ulong id)
        {
            bool gse = dialect == Dialect.Gse;
            List<GsObject> all = new List<GsObject>();
            all.Add(new Head1 { Id = id + 1, Time = 1234, Location = Loc(1.5f), Rotation = Rot(), Ipd = 0.0625f });
            all.Add(new Hand1 { Id = id + 2, Time = 7, Left = true, Location = Loc(-3f), Rotation = Rot() });
            Hand2 hand2 = new Hand2 { Id = id + 3, Time = 9, Location = Loc(4f), Rotation = Rot() };
            hand2.Wrist.Tx = 0.5f;
            hand2.Thumb.Tip.Ty = 0.25f;
            hand2.Index.Dip.Tz = -0.5f;
            hand2.Pinky.Cmc.Tx = 1f;
            all.Add(hand2);
            all.Add(new Object1
            {
                Id = id + 4,
                Time = 11,
                Position = new Vec3(10, 20, 30),
                Rotation = new Rot1(0.5f, 0, 0),
                Scale = gse ? new Vec3(1, 2, 3) : new Vec3(2, 2, 2),
                ScaleUniform = !gse,
                Active = true,
                Parent = id + 1,
            });
            Vec3[] corners = { new Vec3(0, 0, 0), new Vec3(1, 0, 0), new Vec3(0, 1, 0) };
            all.Add(new Mesh1
            {
                Id = id + 5,
                Texture = gse ? default(MeshTexture) : MeshTexture.FromUrl("https://example.com/t.png"),
                Vertices = corners,
                Normals = new[] { new Vec3(0, 0, 1), new Vec3(0, 0, 1), new Vec3(0, 0, 1) },
                Textures = gse
                    ? new[] { TextureUV.Index(0, 0), TextureUV.Index(1, 0), TextureUV.Index(0, 1) }
                    : new[] { TextureUV.Float(0, 0), TextureUV.Float(1, 0), TextureUV.Float(0, 1) },
                Triangles = new ulong[] { 0, 1, 2 },
            });
            all.Add(new HeadIpd1 { Ipd = 0.0625f });
            all.Add(new UnknownObject { Tag = 16384, Data = new byte[] { 0x2a, 1, 2, 3 } });
            if (gse) return all;
            all.Add(new Object2
            {
                Id = id + 6,
                Time = 13,
                Location = Loc(5f),
                Rotation = Rot(),
                Scale = Loc(1f),
                Active = true,
            });
            all.Add(new Mesh2
            {
                Id = id + 7,
                Location = Loc(6f),
                Rotation = Rot(),
                Scale = Loc(1f),
                MeshUrl = "https://example.com/m.glb",
                Texture = MeshTexture.FromRtp(97),
                Parent = id + 1,
            });
            all.Add(new GameControl1
            {
                Id = id + 8,
                Time = 15,
                Buttons = 5,
                ButtonsTime = 14,
                Left = new Stick(0.5f, 0),
                Right = new Stick(0, -0.5f),
            });
            all.Add(new ThreeDof1 { Id = id + 9, Time = 17, Left = true, Rotation = Rot() });
            all.Add(new SixDof1
            {
                Id = id + 10,
                Time = 19,
                Location = Loc(7f),
                Rotation = Rot(),
                Pointer = new SixDofPointer { X = 1, Y = 2, Z = 3 },
            });
            return all;
        }

        internal static Head1 Head(ulong id, float x)
        {
            return new Head1
            {
                Id = id,
                Time = Time1.Now(),
                Location = new Loc2(x, 1.5f, -2.25f, 0.5f, -0.25f, 0),
                Rotation = Rot2.Steady(0, 0.5f, 0, 0.8660254f),
            };
        }
    }

    static class Codec
    {
        internal static void EachAlone(Dialect dialect)
        {
            List<GsObject> all = Objects.All(dialect, 100);
            Check.Equal(dialect == Dialect.Gse ? 7 : 12, all.Count, "objects of the dialect");
            using (GsEncoder encoder = new GsEncoder(dialect))
            using (GsDecoder decoder = new GsDecoder(dialect))
            {
                Check.Equal(dialect, encoder.Dialect, "encoder dialect");
                foreach (GsObject o in all)
                {
                    encoder.Reset();
                    encoder.Add(o);
                    byte[] bytes = encoder.ToArray();
                    Check.Equal(bytes.Length, encoder.Length, o + ": Length");
                    decoder.SetBuffer(bytes);
                    GsObject back;
                    Check.True(decoder.TryDecode(out back), o + " decodes");
                    Check.Equal(o.Type, back.Type, o + ": type");
                    Check.Equal(o.Id, back.Id, o + ": id");
                    Check.Same(o.Value, back.Value, o.ToString());
                    Check.True(back.Extra == null, o + ": no extra bytes");
                    GsObject none;
                    Check.True(!decoder.TryDecode(out none), o + ": the end after it");
                    Check.Bytes(bytes, GsEncoder.Encode(dialect, back), o + " encodes back to its bytes");
                }
            }
        }

        internal static void AllTogether(Dialect dialect)
        {
            List<GsObject> all = Objects.All(dialect, 200);
            byte[] payload = GsEncoder.Encode(dialect, all.ToArray());
            List<GsObject> back = GsDecoder.Decode(dialect, payload);
            Check.Equal(all.Count, back.Count, "objects decoded");
            for (int i = 0; i < all.Count; i++) Check.Same(all[i].Value, back[i].Value, all[i].ToString());
            // The typed accessors, and a wrong one.
            Head1 head = back[0].Head1;
            Check.Equal(1234, (int)head.Time, "Head1 time");
            Check.Equal(0.0625f, head.Ipd.Value, "Head1 ipd");
            Check.Equal(1.5f, head.Location.X, "Head1 x");
            Mesh1 mesh = back[4].Mesh1;
            Check.Equal(3, mesh.Vertices.Length, "Mesh1 vertices");
            Check.Equal(1f, mesh.Vertices[1].X, "Mesh1 vertex 1");
            Object1 unused;
            Check.True(!back[0].TryGet(out unused), "a Head1 is no Object1");
            Check.Throws<InvalidOperationException>(() => { Object1 o = back[0].Object1; }, "Head1 as Object1");
            // A draft-01 object's trailing fields the codec does not know (here tag 9,
            // length 2) survive a round trip.
            if (dialect == Dialect.Draft01)
            {
                byte[] field = { 9, 2, 1, 2 };
                GsObject withExtra = all[0];
                withExtra.Extra = field;
                byte[] bytes = GsEncoder.Encode(dialect, withExtra);
                List<GsObject> again = GsDecoder.Decode(dialect, bytes);
                Check.Bytes(field, again[0].Extra, "extra bytes");
                Check.Bytes(bytes, GsEncoder.Encode(dialect, again[0]), "with extra bytes, encoded back");
            }
        }

        internal static void EncodeError()
        {
            using (GsEncoder encoder = new GsEncoder(Dialect.Gse))
            {
                GsRelayException e = Check.Throws(Status.Encode,
                    () => encoder.Add(new Object2 { Id = 1, Active = true }), "Object2 in gse");
                Check.Equal("gsr_encode_object", e.Function, "the function named");
                Check.Equal(0, encoder.Length, "the payload unchanged");
                Check.Throws(Status.Null,
                    () => encoder.Add(new Mesh1 { Id = 1, Texture = new MeshTexture { Kind = TextureKind.Url } }),
                    "a URL texture without its URL");
            }
        }

        internal static void DecodeError()
        {
            using (GsDecoder decoder = new GsDecoder(Dialect.Draft01))
            {
                decoder.SetBuffer(new byte[] { 0x01, 0x7f, 0x00 });
                GsObject o;
                GsRelayException e = Check.Throws(Status.Decode, () => decoder.TryDecode(out o), "garbage");
                Check.True(e.Message.Contains("GSR_ERR_DECODE"), "the status named: " + e.Message);
            }
        }

        internal static void WrongDialect()
        {
            Check.Throws(Status.Argument, () => new GsEncoder((Dialect)7), "encoder of dialect 7");
            Check.Throws(Status.Argument, () => new GsDecoder((Dialect)7), "decoder of dialect 7");
        }

        internal static void DisposeTwice()
        {
            GsEncoder encoder = new GsEncoder(Dialect.Draft01);
            encoder.Dispose();
            encoder.Dispose();
            Check.Throws<ObjectDisposedException>(() => encoder.Add(new HeadIpd1()), "encoder after Dispose");
            GsDecoder decoder = new GsDecoder(Dialect.Draft01);
            decoder.Dispose();
            decoder.Dispose();
            Check.Throws<ObjectDisposedException>(() => decoder.SetBuffer(new byte[1]), "decoder after Dispose");
        }
    }

    /// <summary>The cases against the relay, in order: each leaves the room as the next
    /// one expects it.</summary>
    sealed class Relay
    {
        readonly string httpBase, room, tokenA, tokenB, tokenC;
        GsRelayClient a, b, c;
        string aSession;
        readonly Dictionary<ulong, GsObject> published = new Dictionary<ulong, GsObject>();
        readonly GsEncoder encoder = new GsEncoder(Dialect.Draft01);

        internal Relay(string httpBase, string room, string tokenA, string tokenB, string tokenC)
        {
            this.httpBase = httpBase;
            this.room = room;
            this.tokenA = tokenA;
            this.tokenB = tokenB;
            this.tokenC = tokenC;
        }

        internal void Run()
        {
            Case("join: options the library refuses are GsRelayException Argument", BadOptions);
            Case("join: a refused token ends the session with EndReason.Failed", RefusedToken);
            Case("two clients join; B's snapshot completes", JoinTwo);
            Case("Head1 objects published by A reach B decoded equal, byte for byte", HeadsReachB);
            Case("Publish(params), Publish(List), PublishRaw and Poll(List) all deliver", PublishVariants);
            Case("a late joiner gets the room in its snapshot (SnapshotComplete)", LateJoiner);
            Case("RequestSnapshot sends the room again", SnapshotAgain);
            Case("Info: joined, the SSRC and session id of the Joined event", Info);
            Case("SetInterest: malformed JSON is Status.Argument, valid JSON is taken", Interest);
            Case("Poll allocates nothing in steady state", PollAllocatesNothing);
            Case("Leave: Ended (Left) follows; publishing then is Status.State", Leave);
            Case("Dispose: twice is harmless, a disposed client throws ObjectDisposedException, " +
                "its stale handle is Status.Handle", DisposeClients);
        }

        GsRelayClient Join(string token, Dialect dialect = Dialect.Draft01)
        {
            JoinOptions o = new JoinOptions(httpBase, token, room);
            o.Dialect = dialect;
            return GsRelayClient.Join(o);
        }

        /// <summary>Polls <paramref name="client"/> until an event of <paramref name="kind"/>
        /// (returned), handing every other to <paramref name="seen"/>; fails on an Ended
        /// event unless it is the one waited for.</summary>
        static GsRelayEvent WaitFor(GsRelayClient client, EventKind kind, double seconds,
            Action<GsRelayEvent> seen = null, Action each = null)
        {
            Stopwatch watch = Stopwatch.StartNew();
            while (watch.Elapsed.TotalSeconds < seconds)
            {
                if (each != null) each();
                foreach (GsRelayEvent e in client.Poll())
                {
                    if (e.Kind == kind) return e;
                    if (e.Kind == EventKind.Ended) throw new Exception("ended: " + e);
                    if (seen != null) seen(e);
                }
                Thread.Sleep(5);
            }
            throw new Exception(string.Format("no {0} event within {1} s", kind, seconds));
        }

        void BadOptions()
        {
            JoinOptions o = new JoinOptions(httpBase, tokenA, room);
            o.Dialect = (Dialect)9;
            Check.Throws(Status.Argument, () => GsRelayClient.Join(o), "dialect 9");
            o = new JoinOptions(httpBase, tokenA, room);
            o.Transport = (Transport)5;
            Check.Throws(Status.Argument, () => GsRelayClient.Join(o), "transport 5");
            o = new JoinOptions(httpBase, tokenA, room);
            o.InterestJson = "{\"echo\": ";
            Check.Throws(Status.Argument, () => GsRelayClient.Join(o), "malformed interest");
            Check.Throws<ArgumentNullException>(() => GsRelayClient.Join(null), "null options");
            Check.Throws<ArgumentNullException>(() => GsRelayClient.Join(httpBase, null, room), "null token");
        }

        void RefusedToken()
        {
            using (GsRelayClient x = GsRelayClient.Join(httpBase, "not-a-token", room))
            {
                Check.Equal(ClientState.Joining, x.State, "state at first");
                GsRelayEvent e = WaitFor(x, EventKind.Ended, 10);
                Check.Equal(EndReason.Failed, e.EndReason, "end reason");
                Check.True(!string.IsNullOrEmpty(e.Message), "a message says why");
                Check.Equal(ClientState.Ended, x.State, "state after");
                Console.WriteLine("  (the refusal said: {0})", e.Message);
            }
        }

        void JoinTwo()
        {
            a = Join(tokenA);
            b = Join(tokenB);
            GsRelayEvent joined = WaitFor(a, EventKind.Joined, 10);
            aSession = joined.Message;
            Check.True(joined.Ssrc != 0 && joined.Ssrc == a.Ssrc, "A's SSRC");
            Check.True(!string.IsNullOrEmpty(aSession), "A's session id");
            Check.Equal(ClientState.Joined, a.State, "A joined");
            GsRelayEvent snapshot = WaitFor(b, EventKind.SnapshotComplete, 10);
            Check.True(!snapshot.Partial, "B's snapshot complete, not partial");
            Check.Equal(ClientState.Joined, b.State, "B joined");
        }

        /// <summary>Polls <paramref name="client"/> until it has received every object of
        /// <paramref name="want"/> on A's stream, decoded equal and with the bytes A's
        /// encoder writes; <paramref name="publish"/> runs every 100 ms meanwhile.</summary>
        void Collect(GsRelayClient client, IList<ulong> want, Action publish, bool snapshot = false)
        {
            HashSet<ulong> missing = new HashSet<ulong>(want);
            bool complete = !snapshot;
            Stopwatch watch = Stopwatch.StartNew();
            double next = 0;
            List<GsRelayEvent> aEvents = new List<GsRelayEvent>();
            while ((missing.Count > 0 || !complete) && watch.Elapsed.TotalSeconds < 15)
            {
                if (publish != null && watch.Elapsed.TotalSeconds >= next)
                {
                    publish();
                    next = watch.Elapsed.TotalSeconds + 0.1;
                }
                foreach (GsRelayEvent e in client.Poll())
                {
                    if (e.Kind == EventKind.Ended) throw new Exception("ended: " + e);
                    if (e.Kind == EventKind.SnapshotComplete)
                    {
                        Check.True(!e.Partial, "snapshot not partial");
                        complete = true;
                    }
                    if (e.Kind != EventKind.Object || e.Ssrc != a.Ssrc) continue;
                    Check.True(!e.Undecoded, "decoded");
                    GsObject sent;
                    if (!published.TryGetValue(e.ObjectId, out sent)) continue;
                    Check.Equal(e.ObjectId, e.Object.Id.Value, "the event's objectID is its object's");
                    Check.Same(sent.Value, e.Object.Value, "object " + e.ObjectId);
                    encoder.Reset();
                    encoder.Add(sent);
                    Check.Bytes(encoder.ToArray(), e.Data, "object " + e.ObjectId + "'s bytes");
                    missing.Remove(e.ObjectId);
                }
                aEvents.Clear();
                a.Poll(aEvents);
                Thread.Sleep(5);
            }
            Check.True(complete, "the snapshot completed");
            Check.True(missing.Count == 0, "every object arrived; missing: " + string.Join(", ", Ids(missing)));
        }

        static string[] Ids(IEnumerable<ulong> ids)
        {
            List<string> s = new List<string>();
            foreach (ulong id in ids) s.Add(id.ToString());
            return s.ToArray();
        }

        void HeadsReachB()
        {
            ulong[] ids = { 1, 2, 3 };
            Collect(b, ids, () =>
            {
                foreach (ulong id in ids)
                {
                    GsObject head = Objects.Head(id, id * 1.5f);
                    published[id] = head;
                    a.Publish(head);
                }
            });
        }

        void PublishVariants()
        {
            Object1 box = new Object1
            {
                Id = 10,
                Time = Time1.Now(),
                Position = new Vec3(1, 2, 3),
                Rotation = new Rot1(0, 0.5f, 0),
                Scale = new Vec3(1, 1, 1),
                ScaleUniform = true,
                Active = true,
            };
            published[10] = box;
            published[11] = Objects.Head(11, -1);
            published[12] = Objects.Head(12, -2);
            published[13] = new Hand1 { Id = 13, Time = Time1.Now(), Left = true, Location = new Loc2(0.25f, 1, 0) };
            byte[] raw = GsEncoder.Encode(Dialect.Draft01, published[12]);
            List<GsObject> list = new List<GsObject> { published[13] };
            Collect(b, new ulong[] { 10, 11, 12, 13 }, () =>
            {
                a.Publish(published[10], published[11]);
                a.PublishRaw(raw);
                a.Publish(list);
                Check.True(a.TryPublish(published[11]), "TryPublish while joined");
            });
        }

        void LateJoiner()
        {
            c = Join(tokenC);
            Collect(c, new ulong[] { 1, 2, 3, 10, 11, 12, 13 }, null, true);
        }

        void SnapshotAgain()
        {
            c.RequestSnapshot();
            Collect(c, new ulong[] { 1, 2, 3, 10 }, null, true);
        }

        void Info()
        {
            ClientInfo info = a.Info;
            Check.True(info.Joined, "joined");
            Check.Equal(a.Ssrc, info.Ssrc, "SSRC");
            Check.Equal(aSession, info.SessionId, "session id");
            Check.True(info.RelaySsrc != 0, "the relay's SSRC");
            Check.Equal(0u, info.RoomSsrc, "no room stream");
        }

        void Interest()
        {
            Check.Throws(Status.Argument, () => b.SetInterest("{not json"), "malformed JSON");
            Check.Throws(Status.Argument, () => b.SetInterest("{\"bogus\": 1}"), "an unknown field");
            b.SetInterest("{\"echo\": false}");
            b.SetInterest(null);
            // Still receiving.
            published[14] = Objects.Head(14, 3);
            Collect(b, new ulong[] { 14 }, () => a.Publish(published[14]));
        }

        void PollAllocatesNothing()
        {
            // Warm up: the buffers grow to the traffic.
            for (int i = 0; i < 20; i++)
            {
                a.Publish(Objects.Head(1, i));
                b.Poll();
                Thread.Sleep(10);
            }
            long allocated = 0;
            int events = 0;
            for (int i = 0; i < 50; i++)
            {
                a.Publish(Objects.Head(1, i));
                Thread.Sleep(10);
                long before = GC.GetAllocatedBytesForCurrentThread();
                EventBatch batch = b.Poll();
                foreach (GsRelayEvent e in batch)
                {
                    if (e.Kind == EventKind.Object && e.Object.Type == ObjectType.Head1) events++;
                }
                allocated += GC.GetAllocatedBytesForCurrentThread() - before;
            }
            Console.WriteLine("  ({0} Head1 events over 50 polls, {1} bytes allocated)", events, allocated);
            Check.True(events > 0, "events arrived");
            Check.Equal(0L, allocated, "bytes allocated by 50 polls");
        }

        void Leave()
        {
            b.Leave();
            GsRelayEvent ended = WaitFor(b, EventKind.Ended, 10);
            Check.Equal(EndReason.Left, ended.EndReason, "end reason");
            Check.Equal(ClientState.Ended, b.State, "state");
            Check.Throws(Status.State, () => b.Publish(Objects.Head(1, 0)), "publish after leaving");
            Check.True(!b.TryPublish(Objects.Head(1, 0)), "TryPublish after leaving");
            Check.True(!b.Info.Joined, "Info after leaving");
        }

        void DisposeClients()
        {
            ulong stale = a.Handle;
            a.Dispose();
            a.Dispose();
            Check.True(a.IsDisposed, "IsDisposed");
            Check.Throws<ObjectDisposedException>(() => a.Poll(), "Poll after Dispose");
            Check.Throws<ObjectDisposedException>(() => a.Publish(Objects.Head(1, 0)), "Publish after Dispose");
            Check.Throws<ObjectDisposedException>(() => { ClientInfo i = a.Info; }, "Info after Dispose");
            // The C ABI itself refuses the freed handle, and the binding's exception says so.
            int status = Native.gsr_client_leave(stale);
            GsRelayException e = GsRelayException.Failed(status, "gsr_client_leave");
            Check.Equal(Status.Handle, e.Status, "a stale handle's status");
            Check.True(e.Message.Contains("not live"), "the message: " + e.Message);
            b.Dispose();
            c.Dispose();
            c.Dispose();
            encoder.Dispose();
        }
    }

    /// <summary>The Native structs' layout, flattened: "type size N" and
    /// "type.field.subfield offset size" lines, field names lowercased.</summary>
    static class Layout
    {
        internal static void Print()
        {
            Type native = typeof(GsRelayClient).Assembly.GetType("GsRelay.Native", true);
            List<string> lines = new List<string>();
            foreach (Type t in native.GetNestedTypes(BindingFlags.Public | BindingFlags.NonPublic))
            {
                if (!t.Name.StartsWith("gsr_")) continue;
                lines.Add(string.Format("{0} size {1}", t.Name, Marshal.SizeOf(t)));
                Fields(t, t.Name, 0, lines);
            }
            lines.Sort(StringComparer.Ordinal);
            foreach (string line in lines) Console.WriteLine(line);
        }

        static void Fields(Type t, string prefix, long at, List<string> lines)
        {
            foreach (FieldInfo f in t.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic))
            {
                long offset = at + Marshal.OffsetOf(t, f.Name).ToInt64();
                string path = prefix + "." + f.Name.ToLowerInvariant();
                Type ft = f.FieldType;
                if (ft.IsArray)
                {
                    MarshalAsAttribute m = (MarshalAsAttribute)Attribute.GetCustomAttribute(f, typeof(MarshalAsAttribute));
                    lines.Add(string.Format("{0} {1} {2}", path, offset, m.SizeConst * Marshal.SizeOf(ft.GetElementType())));
                }
                else if (ft.IsPrimitive || ft.IsEnum)
                {
                    lines.Add(string.Format("{0} {1} {2}", path, offset, Marshal.SizeOf(ft)));
                }
                else
                {
                    Fields(ft, path, offset, lines);
                }
            }
        }
    }
}
