/* A C publisher and subscriber across a relay's crash: both join (silence after 1 s),
 * the publisher sends a Head1 every 20 ms, and once the subscriber receives it this
 * prints "joined". The harness then kills the relay (-9) and starts it again on the same
 * ports; each client must come back by itself (GSR_EVENT_RESUMED, its SSRC kept), and
 * the subscriber must receive what the publisher sends after that ("flowing").
 *
 * usage: resume HTTP_BASE TOKEN_PUB TOKEN_SUB ROOM */
#include "check.h"

#include <string.h>

static gsr_client join(const char *base, const char *token, const char *room) {
    gsr_join_options o;
    CHECK(gsr_join_options_init(&o));
    o.http_base = base;
    o.token = token;
    o.room = room;
    o.silence_ms = 1000;
    gsr_client c;
    CHECK(gsr_client_join(&o, &c));
    return c;
}

int main(int argc, char **argv) {
    ASSERT(argc == 5, "usage: resume HTTP_BASE TOKEN_PUB TOKEN_SUB ROOM");
    gsr_client pub = join(argv[1], argv[2], argv[4]);
    gsr_client sub = join(argv[1], argv[3], argv[4]);
    gsr_object head;
    memset(&head, 0, sizeof head);
    head.type = GSR_OBJECT_HEAD1;
    head.u.head1.id = 1;
    uint32_t pub_ssrc = 0, sub_ssrc = 0;
    int joined = 0, pub_back = 0, sub_back = 0;
    uint16_t back_at = 0;
    gsr_event events[64];
    double until = now_s() + 60.0, next = 0;
    while (now_s() < until) {
        if (now_s() >= next) {
            head.u.head1.time++;
            /* Refused while the publisher is not joined (GSR_ERR_STATE): that is fine. */
            gsr_status st = gsr_client_publish(pub, &head, 1);
            ASSERT(st == GSR_OK || st == GSR_ERR_STATE, "publish: %s", gsr_last_error());
            next = now_s() + 0.02;
        }
        size_t n;
        CHECK(gsr_client_poll(pub, events, 64, sizeof(gsr_event), &n));
        for (size_t i = 0; i < n; i++) {
            const gsr_event *e = &events[i];
            ASSERT(e->kind != GSR_EVENT_ENDED, "the publisher ended");
            ASSERT(e->kind != GSR_EVENT_REJOINED, "the publisher came back under a new SSRC");
            if (e->kind == GSR_EVENT_JOINED) pub_ssrc = e->ssrc;
            if (e->kind == GSR_EVENT_RESUMED) {
                ASSERT(e->ssrc == pub_ssrc, "the publisher kept its SSRC");
                pub_back = 1;
                back_at = head.u.head1.time;
                printf("back pub resumed\n");
                fflush(stdout);
            }
        }
        CHECK(gsr_client_poll(sub, events, 64, sizeof(gsr_event), &n));
        for (size_t i = 0; i < n; i++) {
            const gsr_event *e = &events[i];
            ASSERT(e->kind != GSR_EVENT_ENDED, "the subscriber ended");
            ASSERT(e->kind != GSR_EVENT_REJOINED, "the subscriber came back under a new SSRC");
            if (e->kind == GSR_EVENT_JOINED) sub_ssrc = e->ssrc;
            if (e->kind == GSR_EVENT_RESUMED) {
                ASSERT(e->ssrc == sub_ssrc, "the subscriber kept its SSRC");
                sub_back = 1;
                printf("back sub resumed\n");
                fflush(stdout);
            }
            if (e->kind != GSR_EVENT_OBJECT || e->ssrc != pub_ssrc) continue;
            ASSERT(e->object.type == GSR_OBJECT_HEAD1, "a Head1");
            if (!joined) {
                joined = 1;
                printf("joined\n");
                fflush(stdout);
            } else if (pub_back && sub_back && e->object.u.head1.time > back_at) {
                printf("flowing\n");
                CHECK(gsr_client_free(pub));
                CHECK(gsr_client_free(sub));
                return 0;
            }
        }
        sleep_ms(5);
    }
    fprintf(stderr, "timed out: joined %d, publisher back %d, subscriber back %d\n", joined,
            pub_back, sub_back);
    return 1;
}
