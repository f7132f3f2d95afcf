/* The unprivileged neighbour of a root profiler (tests/untrusted.rs runs it as `nobody`): it plants
 * something where the profiler will read on its behalf, prints "ready" once it has, then burns CPU
 * for SECS seconds in anonymous executable memory (a JIT's code, so that the profiler consults
 * /tmp/perf-PID.map) or in a library it loaded.
 *
 *   attacker SECS jit-fifo            a FIFO at /tmp/perf-PID.map
 *   attacker SECS jit-link TARGET     a symlink /tmp/perf-PID.map -> TARGET
 *   attacker SECS jit-hardlink FILE   a hard link /tmp/perf-PID.map to FILE (the attacker's own)
 *   attacker SECS deleted LIB         dlopen LIB, delete it, FIFOs at "LIB" and "LIB (deleted)";
 *                                     spins in the library's plugin_spin
 *   attacker SECS map FILE...         maps each FILE executable, then spins in JIT code
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
/* mov rax, rdi; 1: dec rax; jnz 1b; ret */
static const unsigned char code[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};
#elif defined(__aarch64__)
/* 1: subs x0, x0, #1; b.ne 1b; ret */
static const uint32_t code[] = {0xf1000400, 0x54ffffe1, 0xd65f03c0};
#else
#error "the attacker knows x86_64 and aarch64 code"
#endif

typedef void (*fn)(long);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void ready(void) {
    printf("ready %d\n", getpid());
    fflush(stdout);
}

static void spin_jit(double secs) {
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        die("mmap");
    memcpy(page, code, sizeof code);
    __builtin___clear_cache((char *)page, (char *)page + sizeof code);
    fn f = (fn)page;
    ready();
    double end = now() + secs;
    while (now() < end)
        f(2000000);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: attacker SECS MODE [ARGS...]\n");
        return 2;
    }
    double secs = atof(argv[1]);
    const char *mode = argv[2];
    char map[64];
    snprintf(map, sizeof map, "/tmp/perf-%d.map", getpid());
    if (!strcmp(mode, "jit-fifo")) {
        if (mkfifo(map, 0644))
            die("mkfifo");
    } else if (!strcmp(mode, "jit-link") && argc > 3) {
        if (symlink(argv[3], map))
            die("symlink");
    } else if (!strcmp(mode, "jit-hardlink") && argc > 3) {
        if (link(argv[3], map))
            die("link");
    } else if (!strcmp(mode, "deleted") && argc > 3) {
        void *lib = dlopen(argv[3], RTLD_NOW);
        if (!lib) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        void (*spin)(double) = (void (*)(double))dlsym(lib, "plugin_spin");
        char deleted[4200];
        snprintf(deleted, sizeof deleted, "%s (deleted)", argv[3]);
        if (!spin || unlink(argv[3]) || mkfifo(argv[3], 0644) || mkfifo(deleted, 0644))
            die("plant");
        ready();
        spin(secs);
        return 0;
    } else if (!strcmp(mode, "map")) {
        for (int i = 3; i < argc; i++) {
            int fd = open(argv[i], O_RDONLY);
            struct stat st;
            if (fd < 0 || fstat(fd, &st))
                die(argv[i]);
            if (mmap(NULL, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
                die("mmap");
            close(fd);
        }
    } else {
        fprintf(stderr, "attacker: unknown mode %s\n", mode);
        return 2;
    }
    spin_jit(secs);
    unlink(map);
    return 0;
}
