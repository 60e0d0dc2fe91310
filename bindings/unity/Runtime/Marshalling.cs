// Between GsObject and the C gsr_object, and between strings and C strings, without
// unsafe code or reflection: arrays are pinned with GCHandle for the length of one call,
// and what the library hands out is copied with Marshal.Copy before the next call.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;

namespace GsRelay
{
    /// <summary>Arrays pinned for one call into the library, unpinned by Release. Reused,
    /// so a call that pins nothing (Head1, Object1, ...) allocates nothing.</summary>
    sealed class Pins
    {
        readonly List<GCHandle> handles = new List<GCHandle>();

        /// <summary>The address of <paramref name="array"/>'s first element, pinned until
        /// Release; zero for null or empty.</summary>
        internal IntPtr Pin(Array array)
        {
            if (array == null || array.Length == 0) return IntPtr.Zero;
            GCHandle h = GCHandle.Alloc(array, GCHandleType.Pinned);
            handles.Add(h);
            return h.AddrOfPinnedObject();
        }

        /// <summary><paramref name="s"/> as a pinned NUL-terminated UTF-8 string; zero for
        /// null.</summary>
        internal IntPtr Utf8z(string s)
        {
            return s == null ? IntPtr.Zero : Pin(Strings.Utf8z(s));
        }

        internal void Release()
        {
            for (int i = 0; i < handles.Count; i++) handles[i].Free();
            handles.Clear();
        }
    }

    static class Strings
    {
        static readonly UTF8Encoding Utf8 = new UTF8Encoding(false, false);

        /// <summary><paramref name="s"/> in UTF-8 with a NUL after it; null for null.</summary>
        internal static byte[] Utf8z(string s)
        {
            if (s == null) return null;
            byte[] bytes = new byte[Utf8.GetByteCount(s) + 1];
            Utf8.GetBytes(s, 0, s.Length, bytes, 0);
            return bytes;
        }

        /// <summary>The NUL-terminated UTF-8 string at <paramref name="p"/>; null for zero.
        /// (Marshal.PtrToStringAnsi is not UTF-8 on Windows; PtrToStringUTF8 is missing
        /// from older profiles.)</summary>
        internal static string FromUtf8z(IntPtr p)
        {
            if (p == IntPtr.Zero) return null;
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            return FromUtf8(p, n);
        }

        /// <summary><paramref name="length"/> UTF-8 bytes at <paramref name="p"/>.</summary>
        internal static string FromUtf8(IntPtr p, int length)
        {
            if (p == IntPtr.Zero || length == 0) return string.Empty;
            byte[] bytes = new byte[length];
            Marshal.Copy(p, bytes, 0, length);
            return Utf8.GetString(bytes);
        }
    }

    static class Marshalling
    {
        /// <summary>A library call taking a handle and a span of bytes.</summary>
        internal delegate int SpanCall(ulong handle, IntPtr data, UIntPtr length);

        /// <summary>Calls <paramref name="call"/> with <paramref name="count"/> bytes of
        /// <paramref name="payload"/> from <paramref name="offset"/>, pinned for the call, and
        /// throws on its error. The delegate is a cached static, so nothing is allocated.</summary>
        internal static void WithSpan(ulong handle, byte[] payload, int offset, int count,
            SpanCall call, string name)
        {
            if (payload == null) throw new ArgumentNullException("payload");
            if (offset < 0 || count < 0 || offset > payload.Length - count)
            {
                throw new ArgumentOutOfRangeException("count");
            }
            GCHandle pin = GCHandle.Alloc(payload, GCHandleType.Pinned);
            try
            {
                IntPtr at = new IntPtr(pin.AddrOfPinnedObject().ToInt64() + offset);
                GsRelayException.Check(call(handle, at, new UIntPtr((uint)count)), name);
            }
            finally
            {
                pin.Free();
            }
        }

        /// <summary>A count from the library as an int, refusing what no array holds.</summary>
        internal static int Count(UIntPtr n, string what)
        {
            ulong v = n.ToUInt64();
            if (v > int.MaxValue)
            {
                throw new GsRelayException(Status.Size, what + " is too long for a C# array: " + v);
            }
            return (int)v;
        }

        /// <summary><paramref name="length"/> bytes at <paramref name="p"/>, copied.</summary>
        internal static byte[] Bytes(IntPtr p, int length)
        {
            byte[] bytes = new byte[length];
            if (length > 0) Marshal.Copy(p, bytes, 0, length);
            return bytes;
        }

        /// <summary><paramref name="count"/> blittable <typeparamref name="T"/>s at
        /// <paramref name="p"/>, copied (through a byte array: Marshal.Copy has no
        /// overload for them).</summary>
        internal static T[] Items<T>(IntPtr p, UIntPtr count, string what) where T : struct
        {
            int n = Count(count, what);
            T[] items = new T[n];
            if (n == 0) return items;
            int size = Marshal.SizeOf(typeof(T));
            byte[] bytes = Bytes(p, checked(n * size));
            GCHandle h = GCHandle.Alloc(items, GCHandleType.Pinned);
            try
            {
                Marshal.Copy(bytes, 0, h.AddrOfPinnedObject(), bytes.Length);
            }
            finally
            {
                h.Free();
            }
            return items;
        }

        static MeshTexture TextureOf(uint kind, IntPtr url, byte pt)
        {
            MeshTexture t = new MeshTexture { Kind = (TextureKind)kind, RtpPayloadType = pt };
            if (kind == Native.GSR_TEXTURE_URL) t.Url = Strings.FromUtf8z(url);
            return t;
        }

        /// <summary>A C object the library handed out (its pointers valid until the next
        /// call on the same handle) as a GsObject owning copies of its arrays.</summary>
        internal static GsObject FromNative(ref Native.gsr_object o)
        {
            GsObject g = new GsObject();
            g.raw.type = o.type;
            g.raw.u = o.u;
            int extra = Count(o.extra_length, "extra");
            if (extra > 0) g.Extra = Bytes(o.extra, extra);
            switch (o.type)
            {
                case Native.GSR_OBJECT_MESH1:
                {
                    Native.gsr_mesh1 m = o.u.mesh1;
                    g.managed = new Mesh1
                    {
                        Id = m.id,
                        Texture = TextureOf(m.texture_kind, m.texture_url, m.texture_rtp_pt),
                        Vertices = Items<Vec3>(m.vertices, m.num_vertices, "vertices"),
                        Normals = Items<Vec3>(m.normals, m.num_normals, "normals"),
                        Textures = Items<TextureUV>(m.textures, m.num_textures, "textures"),
                        Triangles = Items<ulong>(m.triangles, m.num_triangles, "triangles"),
                    };
                    g.raw.u = default(Native.gsr_object_union);
                    g.raw.u.mesh1.id = m.id;
                    break;
                }
                case Native.GSR_OBJECT_MESH2:
                {
                    Native.gsr_mesh2 m = o.u.mesh2;
                    g.managed = new Mesh2
                    {
                        Id = m.id,
                        Location = m.location,
                        Rotation = m.rotation,
                        Scale = m.scale,
                        MeshUrl = Strings.FromUtf8z(m.mesh_url),
                        Texture = TextureOf(m.texture_kind, m.texture_url, m.texture_rtp_pt),
                        Parent = m.parent_present != 0 ? m.parent : (ulong?)null,
                    };
                    g.raw.u = default(Native.gsr_object_union);
                    g.raw.u.mesh2.id = m.id;
                    break;
                }
                case Native.GSR_OBJECT_UNKNOWN:
                {
                    Native.gsr_unknown_object u = o.u.unknown_object;
                    g.managed = new UnknownObject
                    {
                        Tag = u.tag,
                        Data = Bytes(u.data, Count(u.data_length, "data")),
                    };
                    g.raw.u = default(Native.gsr_object_union);
                    g.raw.u.unknown_object.tag = u.tag;
                    break;
                }
            }
            return g;
        }

        static UIntPtr Length(Array a) { return new UIntPtr(a == null ? 0u : (uint)a.Length); }

        /// <summary><paramref name="g"/> as a C object in <paramref name="o"/>, its arrays
        /// and strings pinned in <paramref name="pins"/> until the caller releases them.</summary>
        internal static void ToNative(ref GsObject g, ref Native.gsr_object o, Pins pins)
        {
            o.type = g.raw.type;
            o.u = g.raw.u;
            byte[] extra = g.Extra;
            o.extra_length = Length(extra);
            o.extra = pins.Pin(extra);
            switch (g.raw.type)
            {
                case Native.GSR_OBJECT_MESH1:
                {
                    Mesh1 m = (Mesh1)g.managed;
                    o.u.mesh1.texture_kind = (uint)m.Texture.Kind;
                    o.u.mesh1.texture_url = pins.Utf8z(m.Texture.Url);
                    o.u.mesh1.texture_rtp_pt = m.Texture.RtpPayloadType;
                    o.u.mesh1.num_vertices = Length(m.Vertices);
                    o.u.mesh1.vertices = pins.Pin(m.Vertices);
                    o.u.mesh1.num_normals = Length(m.Normals);
                    o.u.mesh1.normals = pins.Pin(m.Normals);
                    o.u.mesh1.num_textures = Length(m.Textures);
                    o.u.mesh1.textures = pins.Pin(m.Textures);
                    o.u.mesh1.num_triangles = Length(m.Triangles);
                    o.u.mesh1.triangles = pins.Pin(m.Triangles);
                    break;
                }
                case Native.GSR_OBJECT_MESH2:
                {
                    Mesh2 m = (Mesh2)g.managed;
                    o.u.mesh2.location = m.Location;
                    o.u.mesh2.rotation = m.Rotation;
                    o.u.mesh2.scale = m.Scale;
                    o.u.mesh2.mesh_url = pins.Utf8z(m.MeshUrl ?? string.Empty);
                    o.u.mesh2.texture_kind = (uint)m.Texture.Kind;
                    o.u.mesh2.texture_url = pins.Utf8z(m.Texture.Url);
                    o.u.mesh2.texture_rtp_pt = m.Texture.RtpPayloadType;
                    o.u.mesh2.parent_present = m.Parent.HasValue ? (byte)1 : (byte)0;
                    o.u.mesh2.parent = m.Parent.GetValueOrDefault();
                    break;
                }
                case Native.GSR_OBJECT_UNKNOWN:
                {
                    UnknownObject u = (UnknownObject)g.managed;
                    o.u.unknown_object.data_length = Length(u.Data);
                    o.u.unknown_object.data = pins.Pin(u.Data);
                    break;
                }
            }
        }
    }
}
