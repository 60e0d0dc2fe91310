// The assembly's attributes, and the PreserveAttribute that keeps IL2CPP's managed code
// stripping from removing any of it.
using System;
using System.Runtime.CompilerServices;

// Unity's linker keeps what an attribute named PreserveAttribute marks, whatever its
// namespace, so this assembly needs no reference to UnityEngine for it. On the assembly:
// nothing of it is stripped (link.xml says the same, for the projects that pick it up).
[assembly: GsRelay.Preserve]

// The test program (bindings/csharp/Tests) calls the C ABI directly to check errors the
// wrapper otherwise prevents (a stale handle).
[assembly: InternalsVisibleTo("GsRelayTests")]

namespace GsRelay
{
    /// <summary>Marks code the linker must keep (the same as
    /// UnityEngine.Scripting.PreserveAttribute, without depending on UnityEngine).</summary>
    [AttributeUsage(AttributeTargets.Assembly | AttributeTargets.Class | AttributeTargets.Struct |
        AttributeTargets.Enum | AttributeTargets.Constructor | AttributeTargets.Method |
        AttributeTargets.Property | AttributeTargets.Field | AttributeTargets.Event |
        AttributeTargets.Interface | AttributeTargets.Delegate, Inherited = false)]
    internal sealed class PreserveAttribute : Attribute
    {
    }
}
