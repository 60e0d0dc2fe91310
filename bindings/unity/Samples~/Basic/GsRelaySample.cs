// The gsrelay client in a scene: joins in Start, polls in Update (on the main thread:
// nothing calls back), moves a GameObject for each remote Head1 and Object1, publishes the
// local player's transform as a Head1 at 20 Hz, and disposes the client in OnDestroy.
//
// Put it on an empty GameObject, set the relay's HTTP address, a token for the room
// (docs/security.md) and the room, and drag the player's transform into Local Player.
using System.Collections.Generic;
using UnityEngine;

namespace GsRelay.Samples
{
    public class GsRelaySample : MonoBehaviour
    {
        [Tooltip("The relay's HTTP API")]
        public string httpBase = "http://127.0.0.1:8080";

        [Tooltip("An access token for the room")]
        public string token = "";

        [Tooltip("The room")]
        public string room = "lobby";

        [Tooltip("Published as a Head1 (none: publish nothing)")]
        public Transform localPlayer;

        [Tooltip("The objectID of the local player's Head1")]
        public int playerObjectId = 1;

        [Tooltip("Updates per second of the local player")]
        public float publishHz = 20f;

        [Tooltip("Instantiated for each remote object (none: a cube)")]
        public GameObject remotePrefab;

        GsRelayClient client;
        readonly Dictionary<ObjectRef, Transform> remotes = new Dictionary<ObjectRef, Transform>();
        readonly List<ObjectRef> gone = new List<ObjectRef>();
        float nextPublish;
        float lastPublish;
        Vector3 lastPosition;

        void Start()
        {
            try
            {
                client = GsRelayClient.Join(httpBase, token, room);
            }
            catch (GsRelayException e)
            {
                // Status.LibraryNotLoaded: the native library is not in Plugins/ for this
                // platform (the message names the file); Status.Argument: bad options.
                Debug.LogError("gsrelay: " + e.Message);
                enabled = false;
                return;
            }
            if (localPlayer != null) lastPosition = localPlayer.position;
        }

        void Update()
        {
            if (client == null) return;
            // Every event waiting, in a batch the client reuses: no allocation per frame.
            foreach (GsRelayEvent e in client.Poll())
            {
                switch (e.Kind)
                {
                    case EventKind.Joined:
                        Debug.Log("gsrelay: joined " + room + " as SSRC " + e.Ssrc);
                        break;
                    case EventKind.Object:
                        Apply(e);
                        break;
                    case EventKind.StreamEnded:
                        RemoveStream(e.Ssrc);
                        break;
                    case EventKind.Error:
                        Debug.LogWarning("gsrelay: " + e.Error + ": " + e.Message);
                        break;
                    case EventKind.Ended:
                        Debug.LogWarning("gsrelay: ended (" + e.EndReason + ") " + e.Message);
                        break;
                }
            }
            if (localPlayer != null && client.State == ClientState.Joined && Time.time >= nextPublish)
            {
                PublishPlayer();
                nextPublish = Time.time + 1f / publishHz;
            }
        }

        void Apply(GsRelayEvent e)
        {
            GsObject o = e.Object;
            Head1 head;
            Object1 thing;
            if (o.TryGet(out head))
            {
                // Where the head is now, at the velocity it sent (Time1 is in ms).
                float age = Time1.Delta(head.Time, Time1.Now()) / 1000f;
                Vec3 p = head.Location.At(Mathf.Clamp(age, 0f, 0.5f));
                Transform t = Remote(e);
                t.position = new Vector3(p.X, p.Y, p.Z);
                t.rotation = new Quaternion(head.Rotation.Si, head.Rotation.Sj, head.Rotation.Sk, head.Rotation.StartW);
            }
            else if (o.TryGet(out thing))
            {
                Transform t = Remote(e);
                t.position = new Vector3(thing.Position.X, thing.Position.Y, thing.Position.Z);
                t.rotation = new Quaternion(thing.Rotation.I, thing.Rotation.J, thing.Rotation.K, thing.Rotation.W);
                t.localScale = thing.ScaleUniform
                    ? new Vector3(thing.Scale.X, thing.Scale.X, thing.Scale.X)
                    : new Vector3(thing.Scale.X, thing.Scale.Y, thing.Scale.Z);
                t.gameObject.SetActive(thing.Active);
            }
        }

        /// <summary>The GameObject of the event's object, made on its first update.</summary>
        Transform Remote(GsRelayEvent e)
        {
            ObjectRef key = ObjectRef.Of(e);
            Transform t;
            if (!remotes.TryGetValue(key, out t))
            {
                GameObject go = remotePrefab != null
                    ? Instantiate(remotePrefab)
                    : GameObject.CreatePrimitive(PrimitiveType.Cube);
                go.name = "gsrelay " + key;
                t = go.transform;
                remotes.Add(key, t);
            }
            return t;
        }

        void RemoveStream(uint ssrc)
        {
            gone.Clear();
            foreach (KeyValuePair<ObjectRef, Transform> r in remotes)
            {
                if (r.Key.Ssrc == ssrc) gone.Add(r.Key);
            }
            foreach (ObjectRef key in gone)
            {
                Destroy(remotes[key].gameObject);
                remotes.Remove(key);
            }
        }

        void PublishPlayer()
        {
            Vector3 p = localPlayer.position;
            Quaternion q = localPlayer.rotation;
            float dt = Time.time - lastPublish;
            Vector3 v = dt > 0 ? (p - lastPosition) / dt : Vector3.zero;
            lastPosition = p;
            lastPublish = Time.time;
            Head1 head = new Head1
            {
                Id = (ulong)playerObjectId,
                Time = Time1.Now(),
                Location = new Loc2(p.x, p.y, p.z, v.x, v.y, v.z),
                Rotation = Rot2.Steady(q.x, q.y, q.z, q.w),
            };
            // False while the network thread is behind: the next update replaces this one.
            client.TryPublish(head);
        }

        void OnDestroy()
        {
            // Leaves the room (in the background) and frees the native client. Without it
            // the session would stay until the garbage collector finalized the client.
            if (client != null) client.Dispose();
            client = null;
        }
    }
}
