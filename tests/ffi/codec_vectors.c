/* The reference implementation's vectors through the C ABI's codec: each payload on
 * stdin ("<dialect> <hex>" a line, dialect 0 draft-01 or 1 gse) is decoded object by
 * object with a gsr_decoder, each object encoded again with a gsr_encoder, and the bytes
 * compared with the payload's. Prints "N passed, N failed". */
#include "check.h"

#include <string.h>

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The bytes of `hex` into `out` (room for `cap`); their count, or -1 on a bad digit. */
static long unhex(const char *hex, unsigned char *out, size_t cap) {
    size_t n = 0;
    while (hex[0] && hex[0] != '\n' && hex[1] && hex[1] != '\n') {
        int hi = hex_digit(hex[0]), lo = hex_digit(hex[1]);
        if (hi < 0 || lo < 0 || n == cap) return -1;
        out[n++] = (unsigned char)(hi << 4 | lo);
        hex += 2;
    }
    return (long)n;
}

int main(void) {
    static char line[1 << 16];
    static unsigned char payload[1 << 15];
    int passed = 0, failed = 0;
    gsr_decoder dec[2];
    gsr_encoder enc[2];
    for (gsr_dialect d = 0; d < 2; d++) {
        CHECK(gsr_decoder_new(d, &dec[d]));
        CHECK(gsr_encoder_new(d, &enc[d]));
    }
    while (fgets(line, sizeof line, stdin)) {
        unsigned dialect;
        char hex[sizeof line];
        if (sscanf(line, "%u %s", &dialect, hex) != 2 || dialect > 1) {
            fprintf(stderr, "bad input line: %s", line);
            return 2;
        }
        long len = unhex(hex, payload, sizeof payload);
        ASSERT(len > 0, "hex of %s", hex);
        CHECK(gsr_decoder_set_buffer(dec[dialect], payload, (size_t)len));
        CHECK(gsr_encoder_reset(enc[dialect]));
        gsr_object object;
        gsr_status st;
        int objects = 0;
        while ((st = gsr_decode_object(dec[dialect], &object)) == GSR_OK) {
            CHECK(gsr_encode_object(enc[dialect], &object));
            objects++;
        }
        const uint8_t *out;
        size_t out_len;
        CHECK(gsr_encoder_data(enc[dialect], &out, &out_len));
        if (st == GSR_END && objects > 0 && out_len == (size_t)len &&
            memcmp(out, payload, out_len) == 0) {
            passed++;
        } else {
            failed++;
            fprintf(stderr, "FAILED: dialect %u %s (%s: %s; %d objects, %zu of %ld bytes)\n",
                    dialect, hex, gsr_status_name(st), gsr_last_error(), objects, out_len, len);
        }
    }
    for (int d = 0; d < 2; d++) {
        CHECK(gsr_decoder_free(dec[d]));
        CHECK(gsr_encoder_free(enc[d]));
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
