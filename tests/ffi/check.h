/* What the C and C++ tests of the C ABI share: a check that names the call, its status
 * and the library's message, and a monotonic clock. */
#ifndef GSRELAY_TEST_CHECK_H
#define GSRELAY_TEST_CHECK_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gsrelay.h"

/* Fails the program when `call` does not return `want`. */
#define EXPECT(call, want)                                                              \
    do {                                                                                \
        gsr_status got_ = (call);                                                       \
        if (got_ != (want)) {                                                           \
            fprintf(stderr, "%s:%d: %s returned %s (%d), expected %s: %s\n", __FILE__,  \
                    __LINE__, #call, gsr_status_name(got_), (int)got_,                   \
                    gsr_status_name(want), gsr_last_error());                           \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

/* Fails the program when `call` does not succeed. */
#define CHECK(call) EXPECT(call, GSR_OK)

/* Fails the program when `cond` is false. */
#define ASSERT(cond, ...)                                                               \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
            fprintf(stderr, __VA_ARGS__);                                               \
            fprintf(stderr, "\n");                                                      \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

/* Seconds on a monotonic clock. */
static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Sleeps `ms` milliseconds. */
static inline void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

#endif
