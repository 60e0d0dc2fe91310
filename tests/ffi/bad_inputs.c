/* Garbage into every kind of entry of the C ABI: null pointers, made-up, foreign and
 * stale handles, double frees, wrong struct sizes, invalid UTF-8, out-of-range enums and
 * flags, undecodable bytes. Each must return its error code and leave a message, never
 * crash or touch memory it was not given; this program also runs under AddressSanitizer
 * and UndefinedBehaviorSanitizer. Prints "N passed, N failed". */
#include "check.h"

#include <string.h>

static int checks;

/* Like EXPECT, and the failure must leave a message. */
#define REFUSED(call, want)                                                             \
    do {                                                                                \
        EXPECT(call, want);                                                             \
        ASSERT(strlen(gsr_last_error()) > 0, "no message after %s", #call);             \
        checks++;                                                                       \
    } while (0)

static void handles(void) {
    gsr_encoder enc;
    gsr_decoder dec;
    gsr_object o;
    memset(&o, 0, sizeof o);
    o.type = GSR_OBJECT_HEAD1;
    CHECK(gsr_encoder_new(GSR_DIALECT_DRAFT01, &enc));
    CHECK(gsr_decoder_new(GSR_DIALECT_GSE, &dec));
    REFUSED(gsr_encode_object(0, &o), GSR_ERR_HANDLE);                  /* never a handle */
    REFUSED(gsr_encode_object(0xdeadbeefcafeULL, &o), GSR_ERR_HANDLE);  /* made up */
    REFUSED(gsr_encode_object(dec, &o), GSR_ERR_HANDLE);                /* foreign kind */
    REFUSED(gsr_decode_object(enc, &o), GSR_ERR_HANDLE);
    REFUSED(gsr_client_leave(enc), GSR_ERR_HANDLE);
    CHECK(gsr_encode_object(enc, &o));
    CHECK(gsr_encoder_free(enc));
    REFUSED(gsr_encoder_free(enc), GSR_ERR_HANDLE);                     /* double free */
    REFUSED(gsr_encode_object(enc, &o), GSR_ERR_HANDLE);                /* stale */
    gsr_encoder again;
    CHECK(gsr_encoder_new(GSR_DIALECT_DRAFT01, &again));
    ASSERT(again != enc, "a freed handle is never issued again");
    REFUSED(gsr_encoder_reset(enc), GSR_ERR_HANDLE);
    CHECK(gsr_encoder_free(again));
    CHECK(gsr_decoder_free(dec));
    REFUSED(gsr_decoder_free(dec), GSR_ERR_HANDLE);
}

static void nulls_and_ranges(void) {
    gsr_encoder enc;
    gsr_decoder dec;
    REFUSED(gsr_encoder_new(GSR_DIALECT_DRAFT01, NULL), GSR_ERR_NULL);
    REFUSED(gsr_encoder_new(7, &enc), GSR_ERR_ARGUMENT);
    REFUSED(gsr_decoder_new(2, &dec), GSR_ERR_ARGUMENT);
    CHECK(gsr_encoder_new(GSR_DIALECT_DRAFT01, &enc));
    CHECK(gsr_decoder_new(GSR_DIALECT_DRAFT01, &dec));
    REFUSED(gsr_encode_object(enc, NULL), GSR_ERR_NULL);
    REFUSED(gsr_encoder_data(enc, NULL, NULL), GSR_ERR_NULL);

    gsr_object o;
    memset(&o, 0, sizeof o);
    o.type = 99;
    REFUSED(gsr_encode_object(enc, &o), GSR_ERR_ARGUMENT);              /* no such type */
    o.type = GSR_OBJECT_HAND1;
    o.u.hand1.left = 2;
    REFUSED(gsr_encode_object(enc, &o), GSR_ERR_ARGUMENT);              /* flag not 0/1 */
    memset(&o, 0, sizeof o);
    o.type = GSR_OBJECT_MESH1;
    o.u.mesh1.num_vertices = 3;                                         /* no array */
    REFUSED(gsr_encode_object(enc, &o), GSR_ERR_NULL);
    o.u.mesh1.num_vertices = 0;
    o.u.mesh1.texture_kind = 9;
    REFUSED(gsr_encode_object(enc, &o), GSR_ERR_ARGUMENT);
    memset(&o, 0, sizeof o);
    o.type = GSR_OBJECT_MESH2;
    o.u.mesh2.mesh_url = "\xff\xfe not UTF-8";
    REFUSED(gsr_encode_object(enc, &o), GSR_ERR_UTF8);
    o.u.mesh2.mesh_url = NULL;
    REFUSED(gsr_encode_object(enc, &o), GSR_ERR_NULL);
    memset(&o, 0, sizeof o);
    o.type = GSR_OBJECT_HEAD1;
    o.extra_length = 4;                                                 /* extra is null */
    REFUSED(gsr_encode_object(enc, &o), GSR_ERR_NULL);
    memset(&o, 0, sizeof o);
    o.type = GSR_OBJECT_UNKNOWN;
    o.u.unknown_object.tag = 1;                                         /* Head1's tag */
    REFUSED(gsr_encode_object(enc, &o), GSR_ERR_ENCODE);
    const uint8_t *data;
    size_t len;
    CHECK(gsr_encoder_data(enc, &data, &len));
    ASSERT(len == 0, "a refused object leaves the payload as it was (%zu bytes)", len);

    static const uint8_t garbage[] = {0x01, 0x7f, 0x00, 0xff, 0xff};
    REFUSED(gsr_decoder_set_buffer(dec, NULL, 5), GSR_ERR_NULL);
    CHECK(gsr_decoder_set_buffer(dec, garbage, sizeof garbage));
    REFUSED(gsr_decode_object(dec, &o), GSR_ERR_DECODE);
    REFUSED(gsr_decode_object(dec, &o), GSR_ERR_DECODE);                /* stays at it */
    REFUSED(gsr_decode_object(dec, NULL), GSR_ERR_NULL);
    CHECK(gsr_decoder_set_buffer(dec, NULL, 0));
    EXPECT(gsr_decode_object(dec, &o), GSR_END);
    CHECK(gsr_encoder_free(enc));
    CHECK(gsr_decoder_free(dec));
}

static void clients(void) {
    gsr_join_options o;
    gsr_client c;
    REFUSED(gsr_join_options_init(NULL), GSR_ERR_NULL);
    REFUSED(gsr_client_join(NULL, &c), GSR_ERR_NULL);
    CHECK(gsr_join_options_init(&o));
    o.http_base = "http://127.0.0.1:1";
    o.token = "t";
    o.room = "r";
    o.struct_size = (uint32_t)sizeof o - 8;                             /* another version */
    REFUSED(gsr_client_join(&o, &c), GSR_ERR_SIZE);
    o.struct_size = (uint32_t)sizeof o;
    REFUSED(gsr_client_join(&o, NULL), GSR_ERR_NULL);
    o.token = NULL;
    REFUSED(gsr_client_join(&o, &c), GSR_ERR_NULL);
    o.token = "t";
    o.room = "\xc3\x28";                                                /* bad UTF-8 */
    REFUSED(gsr_client_join(&o, &c), GSR_ERR_UTF8);
    o.room = "r";
    o.transport = 5;
    REFUSED(gsr_client_join(&o, &c), GSR_ERR_ARGUMENT);
    o.transport = GSR_TRANSPORT_UDP;
    o.delivery = 3;
    REFUSED(gsr_client_join(&o, &c), GSR_ERR_ARGUMENT);
    o.delivery = GSR_DELIVERY_PER_STREAM;
    o.plain_rtp = 7;
    REFUSED(gsr_client_join(&o, &c), GSR_ERR_ARGUMENT);
    o.plain_rtp = 0;
    o.interest_json = "{not json";
    REFUSED(gsr_client_join(&o, &c), GSR_ERR_ARGUMENT);
    o.interest_json = NULL;

    /* A join to nowhere: the handle is good at once, the failure arrives as an event. */
    CHECK(gsr_client_join(&o, &c));
    gsr_event events[8];
    size_t n;
    REFUSED(gsr_client_poll(c, events, 8, sizeof(gsr_event) - 1, &n), GSR_ERR_SIZE);
    REFUSED(gsr_client_poll(c, events, 8, sizeof(gsr_event), NULL), GSR_ERR_NULL);
    REFUSED(gsr_client_poll(c, NULL, 8, sizeof(gsr_event), &n), GSR_ERR_NULL);
    CHECK(gsr_client_poll(c, NULL, 0, sizeof(gsr_event), &n));
    REFUSED(gsr_client_publish_raw(c, (const uint8_t *)"x", 1), GSR_ERR_STATE);
    REFUSED(gsr_client_publish_raw(c, NULL, 1), GSR_ERR_NULL);
    REFUSED(gsr_client_set_interest(c, "[1,2"), GSR_ERR_ARGUMENT);
    REFUSED(gsr_client_request_objects(c, NULL, 2), GSR_ERR_NULL);
    gsr_client_info info;
    info.struct_size = 3;
    REFUSED(gsr_client_get_info(c, &info), GSR_ERR_SIZE);
    REFUSED(gsr_client_get_info(c, NULL), GSR_ERR_NULL);
    int ended = 0;
    double until = now_s() + 10.0;
    while (!ended && now_s() < until) {
        CHECK(gsr_client_poll(c, events, 8, sizeof(gsr_event), &n));
        for (size_t i = 0; i < n; i++) {
            if (events[i].kind == GSR_EVENT_ENDED) {
                ASSERT(events[i].code == GSR_ENDED_FAILED, "ended with %d", events[i].code);
                ASSERT(events[i].data_length > 0 && events[i].data[events[i].data_length] == 0,
                       "the reason is a NUL-terminated message");
                ended = 1;
            }
        }
        sleep_ms(10);
    }
    ASSERT(ended, "a join to nowhere ends");
    checks++;
    CHECK(gsr_client_free(c));
    REFUSED(gsr_client_free(c), GSR_ERR_HANDLE);
    REFUSED(gsr_client_poll(c, events, 8, sizeof(gsr_event), &n), GSR_ERR_HANDLE);
}

int main(void) {
    ASSERT(strcmp(gsr_status_name(GSR_ERR_HANDLE), "GSR_ERR_HANDLE") == 0, "status names");
    ASSERT(strcmp(gsr_status_name(12345), "GSR_UNKNOWN") == 0, "unknown status name");
    ASSERT(strlen(gsr_version()) > 0, "version");
    handles();
    nulls_and_ranges();
    clients();
    printf("%d passed, 0 failed\n", checks);
    return 0;
}
