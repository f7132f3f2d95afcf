/* The off-CPU workload: main -> wait_here, which sleeps 50 ms, argv[1] times. Prints the wall time
 * spent inside wait_here in seconds (CLOCK_MONOTONIC), which the off-CPU profile must attribute.
 * wait_here makes the nanosleep system call itself: libc's wrapper has no frame pointer, so a
 * frame-pointer walk from inside it would skip its caller. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) void wait_here(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
#if defined(__x86_64__)
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"((long)SYS_nanosleep), "D"(&ts), "S"(0L)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_nanosleep;
    register long x0 __asm__("x0") = (long)&ts;
    register long x1 __asm__("x1") = 0;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
#else
    nanosleep(&ts, NULL);
#endif
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20;
    double total = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now();
        wait_here(50);
        total += now() - t0;
    }
    printf("%.6f\n", total);
    return 0;
}
