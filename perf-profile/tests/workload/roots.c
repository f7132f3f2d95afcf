/* The workload of the root tests (tests/roots.rs).
 *
 * `roots nap N`: main -> nap, which sleeps 20 ms in libc's nanosleep, N times: one code path,
 * whose every stack must end at the same outermost frame.
 * `roots deep DEPTH MS`: main -> deep -> deep -> ... (DEPTH frames of about 300 bytes each) ->
 * spin, which burns MS milliseconds of CPU: deep enough, a stack copy (-g dwarf,SIZE) or the
 * kernel's frame limit (perf_event_max_stack, -g fp) runs out before main is reached. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) void nap(void) {
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
}

volatile unsigned long sink;

__attribute__((noinline)) void spin(long ms) {
    double end = now() + ms / 1e3;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink += i;
}

/* The pad keeps each frame big, so that the copy runs out after a known number of frames; its
 * use after the call keeps the call from being a tail call. */
__attribute__((noinline)) void deep(int n, long ms) {
    volatile char pad[256];
    memset((char *)pad, n, sizeof pad);
    if (n > 0)
        deep(n - 1, ms);
    else
        spin(ms);
    sink += pad[n % sizeof pad];
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "nap") == 0) {
        for (int i = atoi(argv[2]); i > 0; i--)
            nap();
    } else if (argc > 3 && strcmp(argv[1], "deep") == 0) {
        deep(atoi(argv[2]), atol(argv[3]));
    } else {
        return 2;
    }
    return 0;
}
