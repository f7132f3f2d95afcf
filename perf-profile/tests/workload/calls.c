/* The test workload: main -> outer -> {hot_a -> leaf (2/3 of the time), hot_b -> leaf (1/3)}.
 * Runs for argv[1] seconds of CPU time. Built by the tests with frame pointers (-O0) and without
 * (-O2 -fomit-frame-pointer): KEEP keeps each function a function of its own at -O2 (no inlining,
 * no specialized clone such as leaf.constprop.0) and AFTER_CALLS keeps the last call of hot_a and
 * hot_b a call, not a tail jump that would drop them from the stack. */
#include <stdlib.h>
#include <time.h>

#if defined(__clang__)
#define KEEP __attribute__((noinline))
#else
#define KEEP __attribute__((noinline, noipa))
#endif
#define AFTER_CALLS() __asm__ volatile("" ::: "memory")

static volatile unsigned long sink;

KEEP void leaf(unsigned long n) {
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
}

KEEP void hot_a(void) {
    leaf(200000);
    leaf(200000);
    AFTER_CALLS();
}

KEEP void hot_b(void) {
    leaf(200000);
    AFTER_CALLS();
}

KEEP void outer(double secs) {
    struct timespec t;
    double end;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    end = t.tv_sec + t.tv_nsec / 1e9 + secs;
    for (;;) {
        for (int i = 0; i < 20; i++) {
            hot_a();
            hot_b();
        }
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        if (t.tv_sec + t.tv_nsec / 1e9 >= end)
            break;
    }
}

int main(int argc, char **argv) {
    outer(argc > 1 ? atof(argv[1]) : 1.0);
    return 0;
}
