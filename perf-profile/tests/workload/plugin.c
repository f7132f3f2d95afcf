/* A library the dlopen workload (dlopen.c) loads after it starts: plugin_spin -> plugin_leaf for
 * a given number of seconds of CPU time. */
#include <time.h>

#if defined(__clang__)
#define KEEP __attribute__((noinline))
#else
#define KEEP __attribute__((noinline, noipa))
#endif
#define AFTER_CALLS() __asm__ volatile("" ::: "memory")

static volatile unsigned long sink;

KEEP void plugin_leaf(unsigned long n) {
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
}

KEEP void plugin_spin(double secs) {
    struct timespec t;
    double end;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    end = t.tv_sec + t.tv_nsec / 1e9 + secs;
    do {
        for (int i = 0; i < 20; i++)
            plugin_leaf(200000);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while (t.tv_sec + t.tv_nsec / 1e9 < end);
    AFTER_CALLS();
}
