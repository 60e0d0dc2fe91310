// The draft-01 objects as C# structs (docs/wire-format.md): Head1, Hand1, Hand2, Object1,
// Object2, Mesh1, Mesh2, GameControl1, ThreeDof1, SixDof1, HeadIpd1 and UnknownObject, the
// value types they are made of (Vec3, Loc2, Rot2, ...), and GsObject, which holds any one
// of them with its ObjectType.
//
// The float-only value types have the C structs' layout and are used in the P/Invoke
// declarations as they are (Native.cs), so nothing converts them.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace GsRelay
{
    /// <summary>An object's type.</summary>
    public enum ObjectType : uint
    {
        /// <summary>No object: an undecoded object event's, or a default GsObject.</summary>
        None = Native.GSR_OBJECT_NONE,
        /// <summary>A head's pose.</summary>
        Head1 = Native.GSR_OBJECT_HEAD1,
        /// <summary>A hand's pose.</summary>
        Hand1 = Native.GSR_OBJECT_HAND1,
        /// <summary>A generic object.</summary>
        Object1 = Native.GSR_OBJECT_OBJECT1,
        /// <summary>A small inline triangle mesh.</summary>
        Mesh1 = Native.GSR_OBJECT_MESH1,
        /// <summary>A hand with its joints.</summary>
        Hand2 = Native.GSR_OBJECT_HAND2,
        /// <summary>An inter-pupillary distance on its own.</summary>
        HeadIpd1 = Native.GSR_OBJECT_HEAD_IPD1,
        /// <summary>A generic object with velocities (draft-01 only).</summary>
        Object2 = Native.GSR_OBJECT_OBJECT2,
        /// <summary>A mesh by URL (draft-01 only).</summary>
        Mesh2 = Native.GSR_OBJECT_MESH2,
        /// <summary>A game controller (draft-01 only).</summary>
        GameControl1 = Native.GSR_OBJECT_GAME_CONTROL1,
        /// <summary>A controller's rotation (draft-01 only).</summary>
        ThreeDof1 = Native.GSR_OBJECT_THREE_DOF1,
        /// <summary>A controller's pose (draft-01 only).</summary>
        SixDof1 = Native.GSR_OBJECT_SIX_DOF1,
        /// <summary>An object of a tag the codec does not know, kept byte for byte.</summary>
        Unknown = Native.GSR_OBJECT_UNKNOWN,
    }

    /// <summary>Three floats: Loc1 (a position), a scale or a normal.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Vec3
    {
        public float X, Y, Z;

        public Vec3(float x, float y, float z) { X = x; Y = y; Z = z; }

        public override string ToString() { return string.Format("({0}, {1}, {2})", X, Y, Z); }
    }

    /// <summary>Loc2: a position and its velocity per second (Float16 on the wire).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Loc2
    {
        public float X, Y, Z;
        public float Vx, Vy, Vz;

        public Loc2(float x, float y, float z, float vx = 0, float vy = 0, float vz = 0)
        {
            X = x; Y = y; Z = z; Vx = vx; Vy = vy; Vz = vz;
        }

        /// <summary>The position <paramref name="seconds"/> later at the same velocity.</summary>
        public Vec3 At(float seconds)
        {
            return new Vec3(X + Vx * seconds, Y + Vy * seconds, Z + Vz * seconds);
        }

        public override string ToString()
        {
            return string.Format("({0}, {1}, {2}; {3}, {4}, {5})", X, Y, Z, Vx, Vy, Vz);
        }
    }

    /// <summary>Rot2: a rotation now (S) and one second later (E), each the vector part
    /// of a unit quaternion whose real part is non-negative (Float16 on the wire).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Rot2
    {
        public float Si, Sj, Sk;
        public float Ei, Ej, Ek;

        public Rot2(float si, float sj, float sk, float ei, float ej, float ek)
        {
            Si = si; Sj = sj; Sk = sk; Ei = ei; Ej = ej; Ek = ek;
        }

        /// <summary>A rotation that does not change: S and E both the quaternion
        /// (<paramref name="x"/>, <paramref name="y"/>, <paramref name="z"/>,
        /// <paramref name="w"/>), negated first if <paramref name="w"/> is negative.</summary>
        public static Rot2 Steady(float x, float y, float z, float w)
        {
            if (w < 0) { x = -x; y = -y; z = -z; }
            return new Rot2(x, y, z, x, y, z);
        }

        /// <summary>The real part of S: sqrt(1 - Si² - Sj² - Sk²), 0 when rounding made the
        /// vector part a little too long.</summary>
        public float StartW { get { return Quaternions.RealPart(Si, Sj, Sk); } }

        /// <summary>The real part of E.</summary>
        public float EndW { get { return Quaternions.RealPart(Ei, Ej, Ek); } }

        public override string ToString()
        {
            return string.Format("(s {0}, {1}, {2}; e {3}, {4}, {5})", Si, Sj, Sk, Ei, Ej, Ek);
        }
    }

    /// <summary>Rot1: a rotation as the vector part of a unit quaternion.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Rot1
    {
        public float I, J, K;

        public Rot1(float i, float j, float k) { I = i; J = j; K = k; }

        /// <summary>The real part: sqrt(1 - I² - J² - K²), never negative.</summary>
        public float W { get { return Quaternions.RealPart(I, J, K); } }
    }

    /// <summary>Transform1: one joint of a Hand2 (Float16 on the wire).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Transform1
    {
        public float Tx, Ty, Tz;

        public Transform1(float tx, float ty, float tz) { Tx = tx; Ty = ty; Tz = tz; }
    }

    /// <summary>A thumb's joints.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Thumb
    {
        public Transform1 Tip, Ip, Mcp, Cmc;
    }

    /// <summary>A finger's joints.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Finger
    {
        public Transform1 Tip, Dip, Pip, Mcp, Cmc;
    }

    /// <summary>A thumbstick's position.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Stick
    {
        public float X, Y;

        public Stick(float x, float y) { X = x; Y = y; }
    }

    /// <summary>A Mesh1 texture coordinate: U and V in draft-01 (Float32), Iu and Iv in
    /// the gse dialect (VarUInt). The dialect picks which pair is read and written.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct TextureUV
    {
        public float U, V;
        public ulong Iu, Iv;

        /// <summary>A draft-01 coordinate.</summary>
        public static TextureUV Float(float u, float v) { return new TextureUV { U = u, V = v }; }

        /// <summary>A gse coordinate.</summary>
        public static TextureUV Index(ulong u, ulong v) { return new TextureUV { Iu = u, Iv = v }; }
    }

    /// <summary>How a mesh's texture is named.</summary>
    public enum TextureKind : uint
    {
        /// <summary>No texture.</summary>
        None = Native.GSR_TEXTURE_NONE,
        /// <summary><see cref="MeshTexture.Url"/> names it.</summary>
        Url = Native.GSR_TEXTURE_URL,
        /// <summary><see cref="MeshTexture.RtpPayloadType"/> is the payload type of the RTP
        /// stream carrying it.</summary>
        RtpPayloadType = Native.GSR_TEXTURE_RTP_PT,
    }

    /// <summary>A mesh's texture: none, a URL, or an RTP payload type.</summary>
    public struct MeshTexture
    {
        public TextureKind Kind;
        public string Url;
        public byte RtpPayloadType;

        public static MeshTexture FromUrl(string url) { return new MeshTexture { Kind = TextureKind.Url, Url = url }; }

        public static MeshTexture FromRtp(byte payloadType)
        {
            return new MeshTexture { Kind = TextureKind.RtpPayloadType, RtpPayloadType = payloadType };
        }
    }

    /// <summary>Head1: a head's pose, with its inter-pupillary distance when present.</summary>
    public struct Head1
    {
        public ulong Id;
        /// <summary>Time1: the low 16 bits of epoch milliseconds (<see cref="Time1.Now"/>).</summary>
        public ushort Time;
        public Loc2 Location;
        public Rot2 Rotation;
        /// <summary>HeadIPD1, in metres, or null.</summary>
        public float? Ipd;
    }

    /// <summary>Hand1: a hand's pose.</summary>
    public struct Hand1
    {
        public ulong Id;
        public ushort Time;
        public bool Left;
        public Loc2 Location;
        public Rot2 Rotation;
    }

    /// <summary>Hand2: a hand with its joints.</summary>
    public struct Hand2
    {
        public ulong Id;
        public ushort Time;
        public bool Left;
        public Loc2 Location;
        public Rot2 Rotation;
        public Transform1 Wrist;
        public Thumb Thumb;
        public Finger Index, Middle, Ring, Pinky;
    }

    /// <summary>Object1: a generic object. Its scale is one number in draft-01
    /// (<see cref="ScaleUniform"/> true, the number in Scale.X; a decoded one has it in X,
    /// Y and Z) and three in the gse dialect (ScaleUniform false).</summary>
    public struct Object1
    {
        public ulong Id;
        public ushort Time;
        public Vec3 Position;
        public Rot1 Rotation;
        public Vec3 Scale;
        public bool ScaleUniform;
        public bool Active;
        /// <summary>The parent's objectID, or null.</summary>
        public ulong? Parent;
    }

    /// <summary>Object2: a generic object with velocities (draft-01 only).</summary>
    public struct Object2
    {
        public ulong Id;
        public ushort Time;
        public Loc2 Location;
        public Rot2 Rotation;
        public Loc2 Scale;
        public bool Active;
        public ulong? Parent;
    }

    /// <summary>Mesh1: a small inline triangle mesh. Decoding allocates its arrays.</summary>
    public struct Mesh1
    {
        public ulong Id;
        /// <summary>draft-01 only; the gse dialect has none.</summary>
        public MeshTexture Texture;
        public Vec3[] Vertices;
        public Vec3[] Normals;
        public TextureUV[] Textures;
        /// <summary>Vertex indexes, three per triangle.</summary>
        public ulong[] Triangles;
    }

    /// <summary>Mesh2: a mesh by URL, placed in the world (draft-01 only).</summary>
    public struct Mesh2
    {
        public ulong Id;
        public Loc2 Location;
        public Rot2 Rotation;
        public Loc2 Scale;
        public string MeshUrl;
        public MeshTexture Texture;
        public ulong? Parent;
    }

    /// <summary>GameControl1: a game controller's buttons and sticks (draft-01 only).</summary>
    public struct GameControl1
    {
        public ulong Id;
        public ushort Time;
        /// <summary>One bit per button.</summary>
        public long Buttons;
        /// <summary>When the buttons last changed (Time1).</summary>
        public ushort ButtonsTime;
        public Stick Left, Right;
    }

    /// <summary>ThreeDOF1: a controller's rotation (draft-01 only).</summary>
    public struct ThreeDof1
    {
        public ulong Id;
        public ushort Time;
        public bool Left;
        public Rot2 Rotation;
    }

    /// <summary>SixDOF1's pointer.</summary>
    public struct SixDofPointer
    {
        public float X, Y, Z;
        /// <summary>Written without its own tag and Length (the draft's grammar as
        /// written).</summary>
        public bool Bare;
    }

    /// <summary>SixDOF1: a controller's pose (draft-01 only).</summary>
    public struct SixDof1
    {
        public ulong Id;
        public ushort Time;
        public bool Left;
        public Loc2 Location;
        public Rot2 Rotation;
        public SixDofPointer? Pointer;
    }

    /// <summary>HeadIPD1 on its own: an inter-pupillary distance, in metres.</summary>
    public struct HeadIpd1
    {
        public float Ipd;
    }

    /// <summary>An object of a tag the codec does not know: its tag and body.</summary>
    public struct UnknownObject
    {
        public ulong Tag;
        /// <summary>Its body, after the Length.</summary>
        public byte[] Data;
    }

    /// <summary>Time1 values.</summary>
    public static class Time1
    {
        static readonly DateTime Epoch = new DateTime(1970, 1, 1, 0, 0, 0, DateTimeKind.Utc);

        /// <summary>Now: the low 16 bits of the milliseconds since 1970 (UTC).</summary>
        public static ushort Now()
        {
            return (ushort)((DateTime.UtcNow - Epoch).Ticks / TimeSpan.TicksPerMillisecond);
        }

        /// <summary>Milliseconds from <paramref name="from"/> to <paramref name="to"/>
        /// (negative when <paramref name="to"/> is earlier), across the wrap.</summary>
        public static int Delta(ushort from, ushort to) { return (short)(ushort)(to - from); }
    }

    static class Quaternions
    {
        internal static float RealPart(float i, float j, float k)
        {
            float w2 = 1f - (i * i + j * j + k * k);
            return w2 > 0 ? (float)Math.Sqrt(w2) : 0f;
        }
    }

    /// <summary>One object of any type: <see cref="Type"/> says which, and the property of
    /// that name (<see cref="Head1"/>, <see cref="Object1"/>, ...) or
    /// <see cref="TryGet(out Head1)"/> gives it. Each object struct converts to a GsObject
    /// implicitly, so <c>client.Publish(head)</c> works. A value type: copying one copies
    /// the object (its arrays and strings are shared).</summary>
    public struct GsObject
    {
        // The C object, its pointers always zero: Mesh1, Mesh2 and unknown objects keep
        // their arrays and strings in `managed`; Marshalling points at them, pinned, for
        // the length of a call.
        internal Native.gsr_object raw;
        internal object managed;
        byte[] extra;

        /// <summary>Which object this is.</summary>
        public ObjectType Type { get { return (ObjectType)raw.type; } }

        /// <summary>Bytes after the parts the codec knows (usually null), kept so that an
        /// object round-trips byte for byte.</summary>
        public byte[] Extra { get { return extra; } set { extra = value; } }

        /// <summary>The objectID, or null for HeadIPD1, unknown objects and None.</summary>
        public ulong? Id
        {
            get
            {
                switch (Type)
                {
                    case ObjectType.Head1: return raw.u.head1.id;
                    case ObjectType.Hand1: return raw.u.hand1.id;
                    case ObjectType.Hand2: return raw.u.hand2.id;
                    case ObjectType.Object1: return raw.u.object1.id;
                    case ObjectType.Object2: return raw.u.object2.id;
                    case ObjectType.Mesh1: return raw.u.mesh1.id;
                    case ObjectType.Mesh2: return raw.u.mesh2.id;
                    case ObjectType.GameControl1: return raw.u.game_control1.id;
                    case ObjectType.ThreeDof1: return raw.u.three_dof1.id;
                    case ObjectType.SixDof1: return raw.u.six_dof1.id;
                    default: return null;
                }
            }
        }

        public GsObject(Head1 v) : this()
        {
            raw.type = Native.GSR_OBJECT_HEAD1;
            raw.u.head1.id = v.Id;
            raw.u.head1.time = v.Time;
            raw.u.head1.location = v.Location;
            raw.u.head1.rotation = v.Rotation;
            raw.u.head1.ipd_present = Flag(v.Ipd.HasValue);
            raw.u.head1.ipd = v.Ipd.GetValueOrDefault();
        }

        public GsObject(Hand1 v) : this()
        {
            raw.type = Native.GSR_OBJECT_HAND1;
            raw.u.hand1.id = v.Id;
            raw.u.hand1.time = v.Time;
            raw.u.hand1.left = Flag(v.Left);
            raw.u.hand1.location = v.Location;
            raw.u.hand1.rotation = v.Rotation;
        }

        public GsObject(Hand2 v) : this()
        {
            raw.type = Native.GSR_OBJECT_HAND2;
            raw.u.hand2.id = v.Id;
            raw.u.hand2.time = v.Time;
            raw.u.hand2.left = Flag(v.Left);
            raw.u.hand2.location = v.Location;
            raw.u.hand2.rotation = v.Rotation;
            raw.u.hand2.wrist = v.Wrist;
            raw.u.hand2.thumb = v.Thumb;
            raw.u.hand2.index = v.Index;
            raw.u.hand2.middle = v.Middle;
            raw.u.hand2.ring = v.Ring;
            raw.u.hand2.pinky = v.Pinky;
        }

        public GsObject(Object1 v) : this()
        {
            raw.type = Native.GSR_OBJECT_OBJECT1;
            raw.u.object1.id = v.Id;
            raw.u.object1.time = v.Time;
            raw.u.object1.position = v.Position;
            raw.u.object1.rotation = v.Rotation;
            raw.u.object1.scale = v.Scale;
            raw.u.object1.scale_uniform = Flag(v.ScaleUniform);
            raw.u.object1.active = Flag(v.Active);
            raw.u.object1.parent_present = Flag(v.Parent.HasValue);
            raw.u.object1.parent = v.Parent.GetValueOrDefault();
        }

        public GsObject(Object2 v) : this()
        {
            raw.type = Native.GSR_OBJECT_OBJECT2;
            raw.u.object2.id = v.Id;
            raw.u.object2.time = v.Time;
            raw.u.object2.location = v.Location;
            raw.u.object2.rotation = v.Rotation;
            raw.u.object2.scale = v.Scale;
            raw.u.object2.active = Flag(v.Active);
            raw.u.object2.parent_present = Flag(v.Parent.HasValue);
            raw.u.object2.parent = v.Parent.GetValueOrDefault();
        }

        public GsObject(Mesh1 v) : this()
        {
            raw.type = Native.GSR_OBJECT_MESH1;
            raw.u.mesh1.id = v.Id;
            managed = v;
        }

        public GsObject(Mesh2 v) : this()
        {
            raw.type = Native.GSR_OBJECT_MESH2;
            raw.u.mesh2.id = v.Id;
            managed = v;
        }

        public GsObject(GameControl1 v) : this()
        {
            raw.type = Native.GSR_OBJECT_GAME_CONTROL1;
            raw.u.game_control1.id = v.Id;
            raw.u.game_control1.time = v.Time;
            raw.u.game_control1.buttons = v.Buttons;
            raw.u.game_control1.buttons_time = v.ButtonsTime;
            raw.u.game_control1.left = v.Left;
            raw.u.game_control1.right = v.Right;
        }

        public GsObject(ThreeDof1 v) : this()
        {
            raw.type = Native.GSR_OBJECT_THREE_DOF1;
            raw.u.three_dof1.id = v.Id;
            raw.u.three_dof1.time = v.Time;
            raw.u.three_dof1.left = Flag(v.Left);
            raw.u.three_dof1.rotation = v.Rotation;
        }

        public GsObject(SixDof1 v) : this()
        {
            raw.type = Native.GSR_OBJECT_SIX_DOF1;
            raw.u.six_dof1.id = v.Id;
            raw.u.six_dof1.time = v.Time;
            raw.u.six_dof1.left = Flag(v.Left);
            raw.u.six_dof1.location = v.Location;
            raw.u.six_dof1.rotation = v.Rotation;
            raw.u.six_dof1.pointer_present = Flag(v.Pointer.HasValue);
            SixDofPointer p = v.Pointer.GetValueOrDefault();
            raw.u.six_dof1.pointer.x = p.X;
            raw.u.six_dof1.pointer.y = p.Y;
            raw.u.six_dof1.pointer.z = p.Z;
            raw.u.six_dof1.pointer.bare = Flag(p.Bare);
        }

        public GsObject(HeadIpd1 v) : this()
        {
            raw.type = Native.GSR_OBJECT_HEAD_IPD1;
            raw.u.head_ipd1.ipd = v.Ipd;
        }

        public GsObject(UnknownObject v) : this()
        {
            raw.type = Native.GSR_OBJECT_UNKNOWN;
            raw.u.unknown_object.tag = v.Tag;
            managed = v;
        }

        public static implicit operator GsObject(Head1 v) { return new GsObject(v); }
        public static implicit operator GsObject(Hand1 v) { return new GsObject(v); }
        public static implicit operator GsObject(Hand2 v) { return new GsObject(v); }
        public static implicit operator GsObject(Object1 v) { return new GsObject(v); }
        public static implicit operator GsObject(Object2 v) { return new GsObject(v); }
        public static implicit operator GsObject(Mesh1 v) { return new GsObject(v); }
        public static implicit operator GsObject(Mesh2 v) { return new GsObject(v); }
        public static implicit operator GsObject(GameControl1 v) { return new GsObject(v); }
        public static implicit operator GsObject(ThreeDof1 v) { return new GsObject(v); }
        public static implicit operator GsObject(SixDof1 v) { return new GsObject(v); }
        public static implicit operator GsObject(HeadIpd1 v) { return new GsObject(v); }
        public static implicit operator GsObject(UnknownObject v) { return new GsObject(v); }

        /// <summary>The Head1; InvalidOperationException if this is another type.</summary>
        public Head1 Head1 { get { Head1 v; Expect(TryGet(out v), ObjectType.Head1); return v; } }
        public Hand1 Hand1 { get { Hand1 v; Expect(TryGet(out v), ObjectType.Hand1); return v; } }
        public Hand2 Hand2 { get { Hand2 v; Expect(TryGet(out v), ObjectType.Hand2); return v; } }
        public Object1 Object1 { get { Object1 v; Expect(TryGet(out v), ObjectType.Object1); return v; } }
        public Object2 Object2 { get { Object2 v; Expect(TryGet(out v), ObjectType.Object2); return v; } }
        public Mesh1 Mesh1 { get { Mesh1 v; Expect(TryGet(out v), ObjectType.Mesh1); return v; } }
        public Mesh2 Mesh2 { get { Mesh2 v; Expect(TryGet(out v), ObjectType.Mesh2); return v; } }
        public GameControl1 GameControl1 { get { GameControl1 v; Expect(TryGet(out v), ObjectType.GameControl1); return v; } }
        public ThreeDof1 ThreeDof1 { get { ThreeDof1 v; Expect(TryGet(out v), ObjectType.ThreeDof1); return v; } }
        public SixDof1 SixDof1 { get { SixDof1 v; Expect(TryGet(out v), ObjectType.SixDof1); return v; } }
        public HeadIpd1 HeadIpd1 { get { HeadIpd1 v; Expect(TryGet(out v), ObjectType.HeadIpd1); return v; } }
        public UnknownObject Unknown { get { UnknownObject v; Expect(TryGet(out v), ObjectType.Unknown); return v; } }

        public bool TryGet(out Head1 v)
        {
            v = default(Head1);
            if (Type != ObjectType.Head1) return false;
            Native.gsr_head1 h = raw.u.head1;
            v.Id = h.id;
            v.Time = h.time;
            v.Location = h.location;
            v.Rotation = h.rotation;
            v.Ipd = h.ipd_present != 0 ? h.ipd : (float?)null;
            return true;
        }

        public bool TryGet(out Hand1 v)
        {
            v = default(Hand1);
            if (Type != ObjectType.Hand1) return false;
            Native.gsr_hand1 h = raw.u.hand1;
            v.Id = h.id;
            v.Time = h.time;
            v.Left = h.left != 0;
            v.Location = h.location;
            v.Rotation = h.rotation;
            return true;
        }

        public bool TryGet(out Hand2 v)
        {
            v = default(Hand2);
            if (Type != ObjectType.Hand2) return false;
            Native.gsr_hand2 h = raw.u.hand2;
            v.Id = h.id;
            v.Time = h.time;
            v.Left = h.left != 0;
            v.Location = h.location;
            v.Rotation = h.rotation;
            v.Wrist = h.wrist;
            v.Thumb = h.thumb;
            v.Index = h.index;
            v.Middle = h.middle;
            v.Ring = h.ring;
            v.Pinky = h.pinky;
            return true;
        }

        public bool TryGet(out Object1 v)
        {
            v = default(Object1);
            if (Type != ObjectType.Object1) return false;
            Native.gsr_object1 o = raw.u.object1;
            v.Id = o.id;
            v.Time = o.time;
            v.Position = o.position;
            v.Rotation = o.rotation;
            v.Scale = o.scale;
            v.ScaleUniform = o.scale_uniform != 0;
            v.Active = o.active != 0;
            v.Parent = o.parent_present != 0 ? o.parent : (ulong?)null;
            return true;
        }

        public bool TryGet(out Object2 v)
        {
            v = default(Object2);
            if (Type != ObjectType.Object2) return false;
            Native.gsr_object2 o = raw.u.object2;
            v.Id = o.id;
            v.Time = o.time;
            v.Location = o.location;
            v.Rotation = o.rotation;
            v.Scale = o.scale;
            v.Active = o.active != 0;
            v.Parent = o.parent_present != 0 ? o.parent : (ulong?)null;
            return true;
        }

        public bool TryGet(out Mesh1 v)
        {
            v = default(Mesh1);
            if (Type != ObjectType.Mesh1) return false;
            v = (Mesh1)managed;
            return true;
        }

        public bool TryGet(out Mesh2 v)
        {
            v = default(Mesh2);
            if (Type != ObjectType.Mesh2) return false;
            v = (Mesh2)managed;
            return true;
        }

        public bool TryGet(out GameControl1 v)
        {
            v = default(GameControl1);
            if (Type != ObjectType.GameControl1) return false;
            Native.gsr_game_control1 g = raw.u.game_control1;
            v.Id = g.id;
            v.Time = g.time;
            v.Buttons = g.buttons;
            v.ButtonsTime = g.buttons_time;
            v.Left = g.left;
            v.Right = g.right;
            return true;
        }

        public bool TryGet(out ThreeDof1 v)
        {
            v = default(ThreeDof1);
            if (Type != ObjectType.ThreeDof1) return false;
            Native.gsr_three_dof1 t = raw.u.three_dof1;
            v.Id = t.id;
            v.Time = t.time;
            v.Left = t.left != 0;
            v.Rotation = t.rotation;
            return true;
        }

        public bool TryGet(out SixDof1 v)
        {
            v = default(SixDof1);
            if (Type != ObjectType.SixDof1) return false;
            Native.gsr_six_dof1 s = raw.u.six_dof1;
            v.Id = s.id;
            v.Time = s.time;
            v.Left = s.left != 0;
            v.Location = s.location;
            v.Rotation = s.rotation;
            if (s.pointer_present != 0)
            {
                v.Pointer = new SixDofPointer
                {
                    X = s.pointer.x,
                    Y = s.pointer.y,
                    Z = s.pointer.z,
                    Bare = s.pointer.bare != 0,
                };
            }
            return true;
        }

        public bool TryGet(out HeadIpd1 v)
        {
            v = default(HeadIpd1);
            if (Type != ObjectType.HeadIpd1) return false;
            v.Ipd = raw.u.head_ipd1.ipd;
            return true;
        }

        public bool TryGet(out UnknownObject v)
        {
            v = default(UnknownObject);
            if (Type != ObjectType.Unknown) return false;
            v = (UnknownObject)managed;
            return true;
        }

        /// <summary>The object as its struct, boxed (allocates: for logs and tools, not
        /// for every frame); null for None.</summary>
        public object Value
        {
            get
            {
                switch (Type)
                {
                    case ObjectType.Head1: return Head1;
                    case ObjectType.Hand1: return Hand1;
                    case ObjectType.Hand2: return Hand2;
                    case ObjectType.Object1: return Object1;
                    case ObjectType.Object2: return Object2;
                    case ObjectType.Mesh1: return Mesh1;
                    case ObjectType.Mesh2: return Mesh2;
                    case ObjectType.GameControl1: return GameControl1;
                    case ObjectType.ThreeDof1: return ThreeDof1;
                    case ObjectType.SixDof1: return SixDof1;
                    case ObjectType.HeadIpd1: return HeadIpd1;
                    case ObjectType.Unknown: return Unknown;
                    default: return null;
                }
            }
        }

        public override string ToString()
        {
            ulong? id = Id;
            return id.HasValue ? string.Format("{0} {1}", Type, id.Value) : Type.ToString();
        }

        static byte Flag(bool b) { return b ? (byte)1 : (byte)0; }

        void Expect(bool ok, ObjectType wanted)
        {
            if (!ok)
            {
                throw new InvalidOperationException(string.Format(
                    "the object is a {0}, not a {1}", Type, wanted));
            }
        }
    }
}
