// The C ABI of crates/ffi (include/gsrelay.h) as P/Invoke declarations, written by hand
// and kept equal to the header by tests/ffi_csharp.rs: every gsr_ function is declared here
// with parameters of matching types, every GSR_ constant has its value, and every struct
// has the header's size and each field its offset (compared with gcc's offsetof).
//
// Everything here is blittable: integers, floats, IntPtr (pointers), UIntPtr (size_t) and
// structs of those, so the runtime passes arrays and refs by pointer without copying or
// reflection-based marshalling that IL2CPP's stripping could break. The one exception is
// gsr_client_info's fixed char array (a ByValArray), read only by Info.
//
// The layouts are those of the platforms Unity ships 64-bit players for (x86_64, arm64);
// 32-bit players are not supported (docs/csharp-client.md).
using System;
using System.Runtime.InteropServices;

namespace GsRelay
{
    /// <summary>The raw C ABI. Use <see cref="GsRelayClient"/>, <see cref="GsEncoder"/>
    /// and <see cref="GsDecoder"/> instead.</summary>
    [Preserve]
    internal static class Native
    {
        /// <summary>The library DllImport loads: libgsrelay_ffi.so (Linux, Android),
        /// gsrelay_ffi.dll (Windows), libgsrelay_ffi.dylib (macOS); on iOS the static
        /// library linked into the player ("__Internal").</summary>
#if UNITY_IOS && !UNITY_EDITOR
        internal const string Library = "__Internal";
#else
        internal const string Library = "gsrelay_ffi";
#endif

        // Constants, as the header's #defines.
        internal const uint GSR_FLAG_UNDECODED = 1;
        internal const uint GSR_FLAG_PARTIAL = 2;
        internal const int GSR_ENDED_LEFT = 0;
        internal const int GSR_ENDED_BY_RELAY = 1;
        internal const int GSR_ENDED_FAILED = 2;
        internal const uint GSR_TRANSPORT_UDP = 0;
        internal const uint GSR_TRANSPORT_QUIC = 1;
        internal const uint GSR_DELIVERY_PER_STREAM = 0;
        internal const uint GSR_DELIVERY_AGGREGATED = 1;
        internal const uint GSR_DIALECT_DRAFT01 = 0;
        internal const uint GSR_DIALECT_GSE = 1;
        internal const uint GSR_EVENT_JOINED = 1;
        internal const uint GSR_EVENT_OBJECT = 2;
        internal const uint GSR_EVENT_SNAPSHOT_COMPLETE = 3;
        internal const uint GSR_EVENT_STREAM_STARTED = 4;
        internal const uint GSR_EVENT_STREAM_ENDED = 5;
        internal const uint GSR_EVENT_OWNERSHIP = 6;
        internal const uint GSR_EVENT_RESUMED = 7;
        internal const uint GSR_EVENT_REJOINED = 8;
        internal const uint GSR_EVENT_ENDED = 9;
        internal const uint GSR_EVENT_ERROR = 10;
        internal const uint GSR_EVENT_DROPPED = 11;
        internal const uint GSR_OBJECT_NONE = 0;
        internal const uint GSR_OBJECT_HEAD1 = 1;
        internal const uint GSR_OBJECT_HAND1 = 2;
        internal const uint GSR_OBJECT_OBJECT1 = 3;
        internal const uint GSR_OBJECT_MESH1 = 4;
        internal const uint GSR_OBJECT_HAND2 = 5;
        internal const uint GSR_OBJECT_HEAD_IPD1 = 6;
        internal const uint GSR_OBJECT_OBJECT2 = 7;
        internal const uint GSR_OBJECT_MESH2 = 8;
        internal const uint GSR_OBJECT_GAME_CONTROL1 = 9;
        internal const uint GSR_OBJECT_THREE_DOF1 = 10;
        internal const uint GSR_OBJECT_SIX_DOF1 = 11;
        internal const uint GSR_OBJECT_UNKNOWN = 12;
        internal const uint GSR_TEXTURE_NONE = 0;
        internal const uint GSR_TEXTURE_URL = 1;
        internal const uint GSR_TEXTURE_RTP_PT = 2;
        internal const int GSR_OK = 0;
        internal const int GSR_END = 1;
        internal const int GSR_ERR_NULL = -1;
        internal const int GSR_ERR_HANDLE = -2;
        internal const int GSR_ERR_UTF8 = -3;
        internal const int GSR_ERR_SIZE = -4;
        internal const int GSR_ERR_ARGUMENT = -5;
        internal const int GSR_ERR_DECODE = -6;
        internal const int GSR_ERR_ENCODE = -7;
        internal const int GSR_ERR_STATE = -8;
        internal const int GSR_ERR_BUSY = -9;
        internal const int GSR_ERR_PANIC = -10;
        internal const int GSR_ERR_NETWORK = -11;
        internal const int GSR_ERR_REFUSED = -12;
        internal const uint GSR_NOTICE_GRANTED = 3;
        internal const uint GSR_NOTICE_LOST = 4;
        internal const uint GSR_NOTICE_REFUSED = 5;
        internal const uint GSR_MAX_QUEUED_EVENTS = 65536;
        internal const byte GSR_STATE_JOINING = 0;
        internal const byte GSR_STATE_JOINED = 1;
        internal const byte GSR_STATE_ENDED = 2;
        internal const uint GSR_ABI_VERSION = 1;

        // Structs. Field names are the header's, so that the layout test can pair them;
        // the float-only ones (Vec3, Loc2, Rot2, ...) are the public structs of Objects.cs.

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_join_options
        {
            public uint struct_size;
            public uint transport;
            public uint dialect;
            public uint delivery;
            public uint aggregate_max_delay_ms;
            public uint ssrc;
            public uint silence_ms;
            public byte room_stream;
            public byte plain_rtp;
            public byte no_snapshot;
            public IntPtr http_base;
            public IntPtr token;
            public IntPtr room;
            public IntPtr interest_json;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_head1
        {
            public ulong id;
            public ushort time;
            public Loc2 location;
            public Rot2 rotation;
            public byte ipd_present;
            public float ipd;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_hand1
        {
            public ulong id;
            public ushort time;
            public byte left;
            public Loc2 location;
            public Rot2 rotation;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_object1
        {
            public ulong id;
            public ushort time;
            public Vec3 position;
            public Rot1 rotation;
            public Vec3 scale;
            public byte scale_uniform;
            public byte active;
            public byte parent_present;
            public ulong parent;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_mesh1
        {
            public ulong id;
            public uint texture_kind;
            public IntPtr texture_url;
            public byte texture_rtp_pt;
            public UIntPtr num_vertices;
            public IntPtr vertices;
            public UIntPtr num_normals;
            public IntPtr normals;
            public UIntPtr num_textures;
            public IntPtr textures;
            public UIntPtr num_triangles;
            public IntPtr triangles;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_hand2
        {
            public ulong id;
            public ushort time;
            public byte left;
            public Loc2 location;
            public Rot2 rotation;
            public Transform1 wrist;
            public Thumb thumb;
            public Finger index;
            public Finger middle;
            public Finger ring;
            public Finger pinky;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_head_ipd1
        {
            public float ipd;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_object2
        {
            public ulong id;
            public ushort time;
            public Loc2 location;
            public Rot2 rotation;
            public Loc2 scale;
            public byte active;
            public byte parent_present;
            public ulong parent;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_mesh2
        {
            public ulong id;
            public Loc2 location;
            public Rot2 rotation;
            public Loc2 scale;
            public IntPtr mesh_url;
            public uint texture_kind;
            public IntPtr texture_url;
            public byte texture_rtp_pt;
            public byte parent_present;
            public ulong parent;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_game_control1
        {
            public ulong id;
            public ushort time;
            public long buttons;
            public ushort buttons_time;
            public Stick left;
            public Stick right;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_three_dof1
        {
            public ulong id;
            public ushort time;
            public byte left;
            public Rot2 rotation;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_pointer
        {
            public float x;
            public float y;
            public float z;
            public byte bare;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_six_dof1
        {
            public ulong id;
            public ushort time;
            public byte left;
            public Loc2 location;
            public Rot2 rotation;
            public byte pointer_present;
            public gsr_pointer pointer;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_unknown_object
        {
            public ulong tag;
            public UIntPtr data_length;
            public IntPtr data;
        }

        /// <summary>The C union: every member at offset 0.</summary>
        [StructLayout(LayoutKind.Explicit)]
        internal struct gsr_object_union
        {
            [FieldOffset(0)] public gsr_head1 head1;
            [FieldOffset(0)] public gsr_hand1 hand1;
            [FieldOffset(0)] public gsr_object1 object1;
            [FieldOffset(0)] public gsr_mesh1 mesh1;
            [FieldOffset(0)] public gsr_hand2 hand2;
            [FieldOffset(0)] public gsr_head_ipd1 head_ipd1;
            [FieldOffset(0)] public gsr_object2 object2;
            [FieldOffset(0)] public gsr_mesh2 mesh2;
            [FieldOffset(0)] public gsr_game_control1 game_control1;
            [FieldOffset(0)] public gsr_three_dof1 three_dof1;
            [FieldOffset(0)] public gsr_six_dof1 six_dof1;
            [FieldOffset(0)] public gsr_unknown_object unknown_object;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_object
        {
            public uint type;
            public gsr_object_union u;
            public UIntPtr extra_length;
            public IntPtr extra;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_event
        {
            public uint kind;
            public uint ssrc;
            public ulong object_id;
            public int code;
            public uint flags;
            public UIntPtr data_length;
            public IntPtr data;
            public gsr_object @object;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_object_ref
        {
            public uint ssrc;
            public ulong object_id;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct gsr_client_info
        {
            public uint struct_size;
            public byte joined;
            public uint ssrc;
            public uint relay_ssrc;
            public uint room_ssrc;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 64)]
            public byte[] session_id;
        }

        // Functions, in the header's order. Strings going in are NUL-terminated UTF-8 byte
        // arrays (Strings.Utf8z); strings coming out are IntPtr read by Strings.FromUtf8z.

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_join_options_init(ref gsr_join_options options);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_join(ref gsr_join_options options, out ulong client);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_poll(ulong client, [In, Out] gsr_event[] events, UIntPtr capacity, UIntPtr event_size, out UIntPtr count);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_publish(ulong client, [In] gsr_object[] objects, UIntPtr count);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_publish_raw(ulong client, IntPtr payload, UIntPtr length);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_publish_room(ulong client, [In] gsr_object[] objects, UIntPtr count);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_request_snapshot(ulong client);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_set_interest(ulong client, [In] byte[] interest_json);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_request_objects(ulong client, [In] gsr_object_ref[] refs, UIntPtr count);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_release_objects(ulong client, [In] gsr_object_ref[] refs, UIntPtr count);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_get_info(ulong client, ref gsr_client_info info);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_state(ulong client, out byte state);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_leave(ulong client);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_client_free(ulong client);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_encoder_new(uint dialect, out ulong encoder);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_encode_object(ulong encoder, ref gsr_object @object);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_encoder_data(ulong encoder, out IntPtr data, out UIntPtr length);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_encoder_reset(ulong encoder);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_encoder_free(ulong encoder);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_decoder_new(uint dialect, out ulong decoder);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_decoder_set_buffer(ulong decoder, IntPtr data, UIntPtr length);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_decode_object(ulong decoder, out gsr_object @object);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern int gsr_decoder_free(ulong decoder);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern IntPtr gsr_last_error();

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern IntPtr gsr_status_name(int status);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern IntPtr gsr_version();

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl, ExactSpelling = true)]
        internal static extern uint gsr_abi_version();

        // Sizes the library checks (struct_size, event_size): computed once.
        internal static readonly uint JoinOptionsSize = (uint)Marshal.SizeOf(typeof(gsr_join_options));
        internal static readonly UIntPtr EventSize = new UIntPtr((uint)Marshal.SizeOf(typeof(gsr_event)));
        internal static readonly uint ClientInfoSize = (uint)Marshal.SizeOf(typeof(gsr_client_info));
    }
}
