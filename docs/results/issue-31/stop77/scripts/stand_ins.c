/* Stand-ins for the library's launch entry points (probe_launch.py): each returns 0 (LOSSJIT_OK)
   and ignores its arguments, after spending host time without touching memory (spin_us) or after
   walking a buffer the size of a core's L2 share (touch_256k). */
#include <stdint.h>
#include <time.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int spin_5us(void) {
    const uint64_t end = now_ns() + 5000;
    while (now_ns() < end) {
    }
    return 0;
}

static volatile unsigned char buffer[1 << 18];

int touch_256k(void) {
    for (unsigned i = 0; i < sizeof buffer; i += 64) buffer[i] = (unsigned char)(buffer[i] + 1);
    return 0;
}
