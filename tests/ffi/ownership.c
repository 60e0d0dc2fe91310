/* Room streams and ownership through the C ABI against a real relay: A joins with a room
 * stream and publishes a ball on it and a head on its own stream; B asks for A's head and
 * is granted it while A is told it lost it; A leaves; C joins late and finds the ball,
 * which outlived A, in its snapshot.
 *
 * usage: ownership HTTP_BASE TOKEN_A TOKEN_B TOKEN_C ROOM */
#include "check.h"

#include <string.h>

static gsr_client join(const char *base, const char *token, const char *room, int room_stream) {
    gsr_join_options o;
    CHECK(gsr_join_options_init(&o));
    o.http_base = base;
    o.token = token;
    o.room = room;
    o.room_stream = (uint8_t)room_stream;
    gsr_client c;
    CHECK(gsr_client_join(&o, &c));
    return c;
}

/* Polls `c` until an event of `kind` (and, for ownership, notice `notice`) arrives. */
static gsr_event wait_for(gsr_client c, gsr_event_kind kind, uint32_t notice, void (*each)(void)) {
    gsr_event events[64];
    double until = now_s() + 15.0;
    while (now_s() < until) {
        if (each) each();
        size_t n;
        CHECK(gsr_client_poll(c, events, 64, sizeof(gsr_event), &n));
        for (size_t i = 0; i < n; i++) {
            if (events[i].kind == kind && (kind != GSR_EVENT_OWNERSHIP || events[i].flags == notice))
                return events[i];
            ASSERT(events[i].kind != GSR_EVENT_ENDED, "ended");
        }
        sleep_ms(10);
    }
    ASSERT(0, "no event %u (notice %u)", kind, notice);
    return events[0];
}

static gsr_client a;
static gsr_object head, ball;

static void publish_a(void) {
    uint8_t state;
    CHECK(gsr_client_state(a, &state));
    if (state != GSR_STATE_JOINED) return;
    CHECK(gsr_client_publish(a, &head, 1));
    CHECK(gsr_client_publish_room(a, &ball, 1));
}

int main(int argc, char **argv) {
    ASSERT(argc == 6, "usage: ownership HTTP_BASE TOKEN_A TOKEN_B TOKEN_C ROOM");
    const char *base = argv[1], *room = argv[5];
    memset(&head, 0, sizeof head);
    head.type = GSR_OBJECT_HEAD1;
    head.u.head1.id = 9;
    memset(&ball, 0, sizeof ball);
    ball.type = GSR_OBJECT_OBJECT1;
    ball.u.object1.id = 50;
    ball.u.object1.scale_uniform = 1;
    ball.u.object1.scale.x = 1.0f;
    ball.u.object1.position.x = 3.0f;

    a = join(base, argv[2], room, 1);
    gsr_client b = join(base, argv[3], room, 0);
    uint32_t a_ssrc = wait_for(a, GSR_EVENT_JOINED, 0, NULL).ssrc;
    gsr_client_info info;
    info.struct_size = sizeof info;
    CHECK(gsr_client_get_info(a, &info));
    ASSERT(info.room_ssrc != 0 && info.room_ssrc != a_ssrc, "a room stream");

    /* B sees A's head, then asks for it. */
    gsr_event seen;
    do {
        seen = wait_for(b, GSR_EVENT_OBJECT, 0, publish_a);
    } while (seen.ssrc != a_ssrc);
    gsr_object_ref ref = {a_ssrc, 9};
    CHECK(gsr_client_request_objects(b, &ref, 1));
    gsr_event granted = wait_for(b, GSR_EVENT_OWNERSHIP, GSR_NOTICE_GRANTED, NULL);
    ASSERT(granted.ssrc == a_ssrc && granted.object_id == 9, "granted A's head");
    gsr_event lost = wait_for(a, GSR_EVENT_OWNERSHIP, GSR_NOTICE_LOST, NULL);
    ASSERT(lost.ssrc == a_ssrc && lost.object_id == 9, "A lost its head");
    CHECK(gsr_client_release_objects(b, &ref, 1));

    /* A leaves; its room stream's ball stays, and a late joiner gets it. */
    CHECK(gsr_client_leave(a));
    wait_for(a, GSR_EVENT_ENDED, 0, NULL);
    gsr_client c = join(base, argv[4], room, 0);
    int found = 0;
    gsr_event events[64];
    double until = now_s() + 15.0;
    while (!found && now_s() < until) {
        size_t n;
        CHECK(gsr_client_poll(c, events, 64, sizeof(gsr_event), &n));
        for (size_t i = 0; i < n; i++) {
            const gsr_event *e = &events[i];
            found |= e->kind == GSR_EVENT_OBJECT && e->ssrc == info.room_ssrc &&
                     e->object_id == 50 && e->object.type == GSR_OBJECT_OBJECT1 &&
                     e->object.u.object1.position.x == 3.0f;
        }
        sleep_ms(10);
    }
    ASSERT(found, "the ball outlived A and reached the late joiner");
    CHECK(gsr_client_free(a));
    CHECK(gsr_client_free(b));
    CHECK(gsr_client_free(c));
    printf("granted, lost, and the room object reached a late joiner\n");
    return 0;
}
