// Errors the C# way: every failing call of the library becomes a GsRelayException with
// its Status and the library's message (gsr_last_error, read on the same thread right
// after the call); a native library that cannot be loaded becomes one that names the file
// expected, the platform and the architecture.
using System;
using System.Runtime.InteropServices;

namespace GsRelay
{
    /// <summary>What a call did: the library's status codes (GSR_OK, GSR_ERR_*), and one of
    /// this binding's own, <see cref="LibraryNotLoaded"/>.</summary>
    public enum Status
    {
        /// <summary>Success.</summary>
        Ok = Native.GSR_OK,
        /// <summary>A decoder has no more objects.</summary>
        End = Native.GSR_END,
        /// <summary>A required pointer was null.</summary>
        Null = Native.GSR_ERR_NULL,
        /// <summary>The handle is not a live handle of the kind the function takes.</summary>
        Handle = Native.GSR_ERR_HANDLE,
        /// <summary>A string was not valid UTF-8.</summary>
        Utf8 = Native.GSR_ERR_UTF8,
        /// <summary>A struct's size is not the one the library knows: this binding and the
        /// native library are of different versions.</summary>
        Size = Native.GSR_ERR_SIZE,
        /// <summary>An argument is out of its range (an unknown enum value, malformed
        /// interest JSON).</summary>
        Argument = Native.GSR_ERR_ARGUMENT,
        /// <summary>The bytes are not a game-state payload of the dialect.</summary>
        Decode = Native.GSR_ERR_DECODE,
        /// <summary>The object cannot be encoded in the dialect.</summary>
        Encode = Native.GSR_ERR_ENCODE,
        /// <summary>The client is not joined yet, or has ended.</summary>
        State = Native.GSR_ERR_STATE,
        /// <summary>The client's command queue is full; try again later.</summary>
        Busy = Native.GSR_ERR_BUSY,
        /// <summary>The library panicked inside the call (a defect; please report).</summary>
        Panic = Native.GSR_ERR_PANIC,
        /// <summary>The network failed.</summary>
        Network = Native.GSR_ERR_NETWORK,
        /// <summary>The relay refused (an HTTP error; the message has its status and body).</summary>
        Refused = Native.GSR_ERR_REFUSED,
        /// <summary>This binding's own: the native library could not be loaded (missing,
        /// of another architecture, or of an older version without the function).</summary>
        LibraryNotLoaded = -1000,
    }

    /// <summary>A call of the gsrelay library failed: <see cref="Status"/> says how, the
    /// message says what the library said.</summary>
    public class GsRelayException : Exception
    {
        /// <summary>How it failed.</summary>
        public Status Status { get; private set; }

        /// <summary>The C function that failed, if one did.</summary>
        public string Function { get; private set; }

        public GsRelayException(Status status, string message)
            : base(message)
        {
            Status = status;
        }

        public GsRelayException(Status status, string message, Exception inner)
            : base(message, inner)
        {
            Status = status;
        }

        GsRelayException(Status status, string function, string message)
            : base(message)
        {
            Status = status;
            Function = function;
        }

        /// <summary>Throws for a negative <paramref name="status"/> of
        /// <paramref name="function"/>, with the thread's last error message.</summary>
        internal static void Check(int status, string function)
        {
            if (status < 0) throw Failed(status, function);
        }

        /// <summary>The exception for <paramref name="status"/>, which
        /// <paramref name="function"/> just returned on this thread.</summary>
        internal static GsRelayException Failed(int status, string function)
        {
            string detail = Strings.FromUtf8z(Native.gsr_last_error());
            string name = Strings.FromUtf8z(Native.gsr_status_name(status));
            string message = string.Format("{0}: {1} ({2}){3}", function, name, status,
                string.IsNullOrEmpty(detail) ? "" : ": " + detail);
            return new GsRelayException((Status)status, function, message);
        }
    }

    /// <summary>The native library's loading, checked once before first use.</summary>
    static class Library
    {
        static volatile bool loaded;

        /// <summary>The file DllImport looks for on this platform, and where it goes in
        /// the Unity package.</summary>
        internal static string ExpectedFile
        {
            get
            {
#if UNITY_IOS && !UNITY_EDITOR
                return "libgsrelay_ffi.a linked into the player (Plugins/iOS/libgsrelay_ffi.a; DllImport \"__Internal\")";
#elif UNITY_ANDROID && !UNITY_EDITOR
                return "libgsrelay_ffi.so (Plugins/Android/arm64-v8a/libgsrelay_ffi.so)";
#else
                if (RuntimeInformation.IsOSPlatform(OSPlatform.Windows))
                {
                    return "gsrelay_ffi.dll (Plugins/Windows/x86_64/gsrelay_ffi.dll; elsewhere beside the program or on PATH)";
                }
                if (RuntimeInformation.IsOSPlatform(OSPlatform.OSX))
                {
                    return "libgsrelay_ffi.dylib (Plugins/macOS/libgsrelay_ffi.dylib; elsewhere on DYLD_LIBRARY_PATH)";
                }
                return "libgsrelay_ffi.so (Plugins/Linux/x86_64/libgsrelay_ffi.so; elsewhere on LD_LIBRARY_PATH)";
#endif
            }
        }

        /// <summary>The platform and architecture, as a message names them.</summary>
        internal static string Platform
        {
            get
            {
                string os = RuntimeInformation.IsOSPlatform(OSPlatform.Windows) ? "Windows"
                    : RuntimeInformation.IsOSPlatform(OSPlatform.OSX) ? "macOS"
                    : RuntimeInformation.IsOSPlatform(OSPlatform.Linux) ? "Linux"
                    : "an unknown OS";
                return string.Format("{0} ({1}), {2} process, {3}-bit", os,
                    RuntimeInformation.OSDescription.Trim(), RuntimeInformation.ProcessArchitecture,
                    IntPtr.Size * 8);
            }
        }

        /// <summary>Loads the library (by calling gsr_version) and checks that it is a
        /// 64-bit process; throws a GsRelayException saying what is wrong otherwise.</summary>
        internal static void EnsureLoaded()
        {
            if (loaded) return;
            if (IntPtr.Size != 8)
            {
                throw new GsRelayException(Status.LibraryNotLoaded, string.Format(
                    "gsrelay supports 64-bit processes only; this one is {0}", Platform));
            }
            try
            {
                Native.gsr_version();
            }
            catch (DllNotFoundException e)
            {
                throw NotLoaded(e);
            }
            catch (EntryPointNotFoundException e)
            {
                throw NotLoaded(e);
            }
            catch (BadImageFormatException e)
            {
                throw NotLoaded(e);
            }
            loaded = true;
        }

        static GsRelayException NotLoaded(Exception e)
        {
            string why = e is BadImageFormatException
                ? "a file of that name was found but is for another architecture"
                : e is EntryPointNotFoundException
                    ? "the library found lacks gsr_version: it is not gsrelay's, or too old"
                    : "it was not found, or it or a library it needs failed to load";
            string message = string.Format(
                "the gsrelay native library could not be loaded: expected {0} for {1}; {2} " +
                "(docs/csharp-client.md, \"Native libraries\"). The runtime said: {3}",
                ExpectedFile, Platform, why, e.Message);
            return new GsRelayException(Status.LibraryNotLoaded, message, e);
        }

        /// <summary>The library's version, "major.minor.patch".</summary>
        internal static string Version
        {
            get
            {
                EnsureLoaded();
                return Strings.FromUtf8z(Native.gsr_version());
            }
        }
    }
}
