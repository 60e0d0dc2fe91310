// NOT Unity: the few UnityEngine members the sample (Samples~/Basic) uses, as empty
// stand-ins, so that tests/ffi_csharp.rs can compile the sample with mcs where Unity
// cannot run. Nothing else is compiled against this, and it never ships: Unity ignores
// folders whose name ends in "~". The test fails if this declares a type the sample does
// not use.
using System;

namespace UnityEngine
{
    public class Object
    {
        public string name { get; set; }

        public static T Instantiate<T>(T original) where T : Object { return original; }

        public static void Destroy(Object obj) { }
    }

    public class MonoBehaviour : Object
    {
        public bool enabled { get; set; }
        public Transform transform { get { return null; } }
        public GameObject gameObject { get { return null; } }
    }

    public class Transform : Object
    {
        public Vector3 position { get; set; }
        public Quaternion rotation { get; set; }
        public Vector3 localScale { get; set; }
        public GameObject gameObject { get { return null; } }
    }

    public class GameObject : Object
    {
        public Transform transform { get { return null; } }

        public void SetActive(bool value) { }

        public static GameObject CreatePrimitive(PrimitiveType type) { return null; }
    }

    public enum PrimitiveType
    {
        Sphere,
        Capsule,
        Cylinder,
        Cube,
        Plane,
        Quad,
    }

    public struct Vector3
    {
        public float x, y, z;

        public Vector3(float x, float y, float z) { this.x = x; this.y = y; this.z = z; }

        public static Vector3 zero { get { return new Vector3(0, 0, 0); } }

        public static Vector3 operator -(Vector3 a, Vector3 b) { return new Vector3(a.x - b.x, a.y - b.y, a.z - b.z); }

        public static Vector3 operator /(Vector3 a, float d) { return new Vector3(a.x / d, a.y / d, a.z / d); }
    }

    public struct Quaternion
    {
        public float x, y, z, w;

        public Quaternion(float x, float y, float z, float w) { this.x = x; this.y = y; this.z = z; this.w = w; }
    }

    public static class Time
    {
        public static float time { get { return 0; } }
    }

    public static class Mathf
    {
        public static float Clamp(float value, float min, float max) { return value < min ? min : value > max ? max : value; }
    }

    public static class Debug
    {
        public static void Log(object message) { }

        public static void LogWarning(object message) { }

        public static void LogError(object message) { }
    }

    [AttributeUsage(AttributeTargets.Field)]
    public class TooltipAttribute : Attribute
    {
        public TooltipAttribute(string tooltip) { }
    }
}
