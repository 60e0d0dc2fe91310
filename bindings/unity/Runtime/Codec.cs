// The codec on its own, no network: GsEncoder appends objects to a payload, GsDecoder
// reads a payload's objects back one at a time (gsr_encoder_*, gsr_decoder_*). Named Gs*
// so that they do not clash with System.Text.Encoder and Decoder.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace GsRelay
{
    /// <summary>Builds a game-state payload of one dialect from objects.</summary>
    public sealed class GsEncoder : IDisposable
    {
        ulong handle;
        readonly Dialect dialect;
        readonly Pins pins = new Pins();

        /// <summary>An empty encoder. GsRelayException (Status.Argument) for a value that
        /// is not a Dialect.</summary>
        public GsEncoder(Dialect dialect)
        {
            Library.EnsureLoaded();
            ulong h;
            GsRelayException.Check(Native.gsr_encoder_new((uint)dialect, out h), "gsr_encoder_new");
            handle = h;
            this.dialect = dialect;
        }

        ~GsEncoder() { Free(); }

        /// <summary>The dialect it writes.</summary>
        public Dialect Dialect { get { return dialect; } }

        ulong Live()
        {
            if (handle == 0) throw new ObjectDisposedException("GsEncoder");
            return handle;
        }

        /// <summary>Appends <paramref name="obj"/>, encoded; on an error (Status.Encode: the
        /// dialect cannot carry it) the payload is unchanged.</summary>
        public void Add(GsObject obj)
        {
            ulong h = Live();
            Native.gsr_object o = new Native.gsr_object();
            try
            {
                Marshalling.ToNative(ref obj, ref o, pins);
                GsRelayException.Check(Native.gsr_encode_object(h, ref o), "gsr_encode_object");
            }
            finally
            {
                pins.Release();
            }
        }

        /// <summary>The payload's length so far.</summary>
        public int Length
        {
            get
            {
                IntPtr data;
                UIntPtr length;
                GsRelayException.Check(Native.gsr_encoder_data(Live(), out data, out length), "gsr_encoder_data");
                return Marshalling.Count(length, "the payload");
            }
        }

        /// <summary>The payload so far, copied.</summary>
        public byte[] ToArray()
        {
            IntPtr data;
            UIntPtr length;
            GsRelayException.Check(Native.gsr_encoder_data(Live(), out data, out length), "gsr_encoder_data");
            return Marshalling.Bytes(data, Marshalling.Count(length, "the payload"));
        }

        /// <summary>Copies the payload into <paramref name="into"/> from
        /// <paramref name="offset"/>; returns its length. Allocates nothing.</summary>
        public int CopyTo(byte[] into, int offset)
        {
            if (into == null) throw new ArgumentNullException("into");
            IntPtr data;
            UIntPtr length;
            GsRelayException.Check(Native.gsr_encoder_data(Live(), out data, out length), "gsr_encoder_data");
            int n = Marshalling.Count(length, "the payload");
            if (offset < 0 || offset > into.Length - n) throw new ArgumentOutOfRangeException("offset");
            if (n > 0) Marshal.Copy(data, into, offset, n);
            return n;
        }

        /// <summary>Empties the payload.</summary>
        public void Reset()
        {
            GsRelayException.Check(Native.gsr_encoder_reset(Live()), "gsr_encoder_reset");
        }

        /// <summary>The payload of <paramref name="objects"/> in <paramref name="dialect"/>.</summary>
        public static byte[] Encode(Dialect dialect, params GsObject[] objects)
        {
            if (objects == null) throw new ArgumentNullException("objects");
            using (GsEncoder e = new GsEncoder(dialect))
            {
                foreach (GsObject o in objects) e.Add(o);
                return e.ToArray();
            }
        }

        /// <summary>Frees it; a second Dispose does nothing.</summary>
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
            Native.gsr_encoder_free(h);
        }
    }

    /// <summary>Reads the objects of a game-state payload of one dialect.</summary>
    public sealed class GsDecoder : IDisposable
    {
        ulong handle;
        readonly Dialect dialect;

        /// <summary>A decoder with nothing to decode. GsRelayException (Status.Argument) for
        /// a value that is not a Dialect.</summary>
        public GsDecoder(Dialect dialect)
        {
            Library.EnsureLoaded();
            ulong h;
            GsRelayException.Check(Native.gsr_decoder_new((uint)dialect, out h), "gsr_decoder_new");
            handle = h;
            this.dialect = dialect;
        }

        ~GsDecoder() { Free(); }

        /// <summary>The dialect it reads.</summary>
        public Dialect Dialect { get { return dialect; } }

        ulong Live()
        {
            if (handle == 0) throw new ObjectDisposedException("GsDecoder");
            return handle;
        }

        /// <summary>Gives it <paramref name="payload"/> to read from its start (copied: the
        /// array may be reused at once).</summary>
        public void SetBuffer(byte[] payload)
        {
            if (payload == null) throw new ArgumentNullException("payload");
            SetBuffer(payload, 0, payload.Length);
        }

        static readonly Marshalling.SpanCall SetBufferCall = Native.gsr_decoder_set_buffer;

        /// <summary>Gives it <paramref name="count"/> bytes of <paramref name="payload"/>
        /// from <paramref name="offset"/>.</summary>
        public void SetBuffer(byte[] payload, int offset, int count)
        {
            Marshalling.WithSpan(Live(), payload, offset, count, SetBufferCall, "gsr_decoder_set_buffer");
        }

        /// <summary>The next object: true, or false when the payload has no more. Throws
        /// GsRelayException (Status.Decode) for bytes that are not an object of the dialect;
        /// the decoder stays there (the rest cannot be framed).</summary>
        public bool TryDecode(out GsObject obj)
        {
            Native.gsr_object o;
            int status = Native.gsr_decode_object(Live(), out o);
            if (status == Native.GSR_END)
            {
                obj = default(GsObject);
                return false;
            }
            GsRelayException.Check(status, "gsr_decode_object");
            obj = Marshalling.FromNative(ref o);
            return true;
        }

        /// <summary>Every object of <paramref name="payload"/> in <paramref name="dialect"/>.</summary>
        public static List<GsObject> Decode(Dialect dialect, byte[] payload)
        {
            using (GsDecoder d = new GsDecoder(dialect))
            {
                d.SetBuffer(payload);
                List<GsObject> objects = new List<GsObject>();
                GsObject o;
                while (d.TryDecode(out o)) objects.Add(o);
                return objects;
            }
        }

        /// <summary>Frees it; a second Dispose does nothing.</summary>
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
            Native.gsr_decoder_free(h);
        }
    }
}
