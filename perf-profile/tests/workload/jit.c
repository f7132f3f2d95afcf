/* A JIT stand-in: generates two functions into anonymous executable memory and names them in
 * /tmp/perf-PID.map as a JIT does. It writes jit_first's line, runs jit_first for argv[1] seconds,
 * generates jit_second, appends its line, runs it as long, then deletes the map and exits: the
 * profiler must have read the map while the process lived (jit_second only after a miss).
 * The code is a countdown loop, `rdi` (x86_64) or `x0` (aarch64) times. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
/* mov rax, rdi; 1: dec rax; jnz 1b; ret */
static const unsigned char code[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};
#elif defined(__aarch64__)
/* 1: subs x0, x0, #1; b.ne 1b; ret */
static const uint32_t code[] = {0xf1000400, 0x54ffffe1, 0xd65f03c0};
#else
#error "the JIT stand-in knows x86_64 and aarch64"
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

typedef void (*fn)(long);

static fn generate(unsigned char *page, size_t at) {
    memcpy(page + at, code, sizeof code);
    __builtin___clear_cache((char *)page + at, (char *)page + at + sizeof code);
    return (fn)(page + at);
}

static void name(const char *map, fn f, const char *sym) {
    FILE *m = fopen(map, "a");
    fprintf(m, "%lx %zx %s\n", (unsigned long)(uintptr_t)f, sizeof code, sym);
    fclose(m);
}

static void run(fn f, double secs) {
    double end = now() + secs;
    while (now() < end)
        f(2000000);
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.5;
    char map[64];
    snprintf(map, sizeof map, "/tmp/perf-%d.map", getpid());
    unsigned char *page = mmap(NULL, 8192, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 1;
    fn first = generate(page, 0);
    name(map, first, "jit_first");
    run(first, secs);
    fn second = generate(page, 4096);
    name(map, second, "jit_second");
    run(second, secs);
    unlink(map);
    return 0;
}
