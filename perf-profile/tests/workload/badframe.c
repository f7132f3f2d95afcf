/* A frame chain that leads to garbage: bad_frame spins (for the CPU seconds its argument gives)
 * with its frame pointer on a fake frame whose return address, 0x31333436383a3d3e (ASCII
 * digits, as a stray string on a stack reads), is in no mapping; a frame-pointer unwinder reads
 * it as the caller. x86-64 only. */
#include <stdlib.h>
#include <time.h>

static unsigned long fake_frame[2] = {0, 0x31333436383a3d3eUL};

__attribute__((noinline)) static void bad_frame(unsigned long n) {
#if defined(__x86_64__)
    __asm__ volatile("mov %%rbp, %%rbx\n\t"
                     "mov %1, %%rbp\n\t"
                     "1: dec %0\n\t"
                     "jnz 1b\n\t"
                     "mov %%rbx, %%rbp\n\t"
                     : "+r"(n)
                     : "r"(fake_frame)
                     : "rbx", "memory", "cc");
#else
#error "x86-64 only"
#endif
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    double end = t.tv_sec + t.tv_nsec / 1e9 + secs;
    do {
        bad_frame(50000000);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec + t.tv_nsec / 1e9 < end);
    return 0;
}
