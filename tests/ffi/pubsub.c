/* Two C clients and two late joiners against a real relay, in one dialect:
 * A publishes one object of every type the dialect has; B receives each, byte for byte as
 * A's encoder wrote it, and decoded into the same object (it encodes back to the same
 * bytes); C joins late and gets them all in its snapshot; D does too, in aggregated
 * delivery (containers unpacked to A's stream).
 *
 * usage: pubsub HTTP_BASE TOKEN_A TOKEN_B TOKEN_C TOKEN_D ROOM DIALECT */
#include "check.h"
#include "objects.h"

#include <string.h>

#define MAX_EVENTS 256

typedef struct {
    size_t count;
    gsr_object objects[16];
    uint8_t bytes[16][512];
    size_t lengths[16];
} expected_t;

static gsr_dialect dialect;
static expected_t expected;
static gsr_encoder encoder;

/* Each object's bytes, as an encoder of the dialect writes it alone. */
static void expect_all(void) {
    expected.count = test_objects(dialect, 100, expected.objects);
    for (size_t i = 0; i < expected.count; i++) {
        const uint8_t *data;
        size_t len;
        CHECK(gsr_encoder_reset(encoder));
        CHECK(gsr_encode_object(encoder, &expected.objects[i]));
        CHECK(gsr_encoder_data(encoder, &data, &len));
        ASSERT(len <= sizeof expected.bytes[i], "object %zu is %zu bytes", i, len);
        memcpy(expected.bytes[i], data, len);
        expected.lengths[i] = len;
    }
}

static gsr_client join(const char *base, const char *token, const char *room,
                       gsr_delivery delivery) {
    gsr_join_options o;
    CHECK(gsr_join_options_init(&o));
    o.http_base = base;
    o.token = token;
    o.room = room;
    o.dialect = dialect;
    o.delivery = delivery;
    gsr_client c;
    CHECK(gsr_client_join(&o, &c));
    return c;
}

/* Polls `c` until an event of `kind`; fails on an end or after `timeout` seconds. */
static uint32_t wait_for(gsr_client c, gsr_event_kind kind, double timeout) {
    gsr_event events[MAX_EVENTS];
    double until = now_s() + timeout;
    while (now_s() < until) {
        size_t n;
        CHECK(gsr_client_poll(c, events, MAX_EVENTS, sizeof(gsr_event), &n));
        for (size_t i = 0; i < n; i++) {
            if (events[i].kind == kind) return events[i].ssrc;
            ASSERT(events[i].kind != GSR_EVENT_ENDED, "ended: %.*s",
                   (int)events[i].data_length, (const char *)events[i].data);
        }
        sleep_ms(5);
    }
    ASSERT(0, "no event %u within %.0f s", kind, timeout);
    return 0;
}

/* Whether `e` is object `i` of A's stream, byte for byte and decoded into the same object
 * (re-encoded to the same bytes). */
static int matches(const gsr_event *e, uint32_t a, size_t i) {
    if (e->kind != GSR_EVENT_OBJECT || e->ssrc != a ||
        e->object_id != test_object_id(&expected.objects[i]))
        return 0;
    ASSERT(e->data_length == expected.lengths[i] &&
               memcmp(e->data, expected.bytes[i], e->data_length) == 0,
           "object %zu arrived with other bytes (%zu, want %zu)", i, e->data_length,
           expected.lengths[i]);
    ASSERT(e->object.type == expected.objects[i].type, "object %zu decoded as type %u", i,
           e->object.type);
    const uint8_t *data;
    size_t len;
    CHECK(gsr_encoder_reset(encoder));
    CHECK(gsr_encode_object(encoder, &e->object));
    CHECK(gsr_encoder_data(encoder, &data, &len));
    ASSERT(len == e->data_length && memcmp(data, e->data, len) == 0,
           "object %zu decoded into something else", i);
    if (e->object.type == GSR_OBJECT_HEAD1) {
        ASSERT(e->object.u.head1.time == 1234 && e->object.u.head1.location.x == 1.5f &&
                   e->object.u.head1.ipd_present == 1,
               "Head1 fields");
    }
    if (e->object.type == GSR_OBJECT_MESH1) {
        ASSERT(e->object.u.mesh1.num_vertices == 3 && e->object.u.mesh1.vertices[1].x == 1.0f,
               "Mesh1 vertices");
    }
    return 1;
}

/* Polls `c` until it has every expected object of stream `a` (and, with `snapshot`, the
 * snapshot is complete); returns how many it matched. */
static size_t collect(gsr_client c, uint32_t a, gsr_client publisher, int snapshot) {
    int seen[16] = {0};
    size_t got = 0;
    int complete = !snapshot;
    gsr_event events[MAX_EVENTS];
    double until = now_s() + 15.0, next_publish = 0;
    while (now_s() < until && (got < expected.count || !complete)) {
        if (publisher && now_s() >= next_publish) {
            for (size_t i = 0; i < expected.count; i++)
                CHECK(gsr_client_publish(publisher, &expected.objects[i], 1));
            next_publish = now_s() + 0.2;
        }
        size_t n;
        CHECK(gsr_client_poll(c, events, MAX_EVENTS, sizeof(gsr_event), &n));
        for (size_t k = 0; k < n; k++) {
            const gsr_event *e = &events[k];
            ASSERT(e->kind != GSR_EVENT_ENDED, "ended");
            if (e->kind == GSR_EVENT_SNAPSHOT_COMPLETE) {
                ASSERT(!(e->flags & GSR_FLAG_PARTIAL), "snapshot partial");
                complete = 1;
            }
            for (size_t i = 0; i < expected.count; i++) {
                if (!seen[i] && matches(e, a, i)) {
                    seen[i] = 1;
                    got++;
                }
            }
        }
        if (publisher) CHECK(gsr_client_poll(publisher, events, MAX_EVENTS, sizeof(gsr_event), &n));
        sleep_ms(5);
    }
    ASSERT(complete, "no snapshot");
    for (size_t i = 0; i < expected.count; i++) ASSERT(seen[i], "object %zu never arrived", i);
    return got;
}

int main(int argc, char **argv) {
    ASSERT(argc == 8, "usage: pubsub HTTP_BASE TOKEN_A TOKEN_B TOKEN_C TOKEN_D ROOM DIALECT");
    const char *base = argv[1], *room = argv[6];
    dialect = (gsr_dialect)atoi(argv[7]);
    CHECK(gsr_encoder_new(dialect, &encoder));
    expect_all();

    gsr_client a = join(base, argv[2], room, GSR_DELIVERY_PER_STREAM);
    gsr_client b = join(base, argv[3], room, GSR_DELIVERY_PER_STREAM);
    uint32_t a_ssrc = wait_for(a, GSR_EVENT_JOINED, 10.0);
    wait_for(b, GSR_EVENT_SNAPSHOT_COMPLETE, 10.0);
    size_t live = collect(b, a_ssrc, a, 0);

    gsr_client c = join(base, argv[4], room, GSR_DELIVERY_PER_STREAM);
    size_t late = collect(c, a_ssrc, 0, 1);
    gsr_client d = join(base, argv[5], room, GSR_DELIVERY_AGGREGATED);
    size_t aggregated = collect(d, a_ssrc, 0, 1);

    gsr_client_info info;
    info.struct_size = sizeof info;
    CHECK(gsr_client_get_info(a, &info));
    ASSERT(info.joined == 1 && info.ssrc == a_ssrc && strlen(info.session_id) > 0, "info");

    CHECK(gsr_client_leave(a));
    wait_for(a, GSR_EVENT_ENDED, 5.0);
    CHECK(gsr_client_free(a));
    CHECK(gsr_client_free(b));
    CHECK(gsr_client_free(c));
    CHECK(gsr_client_free(d));
    CHECK(gsr_encoder_free(encoder));
    printf("dialect %u: %zu objects byte-exact live, %zu in a late joiner's snapshot, %zu "
           "aggregated\n",
           dialect, live, late, aggregated);
    return 0;
}
