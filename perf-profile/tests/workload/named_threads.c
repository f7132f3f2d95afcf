/* Two threads named by pthread_setname_np, "spin-alpha" -> alpha_spin and "spin-beta" ->
 * beta_spin, each for argv[1] seconds of its own CPU time, while main waits in pthread_join;
 * then spin-alpha renames itself "spin-omega" and runs omega_spin as long: a name is the one the
 * thread had when sampled. Prints "pid PID" and "NAME TID" for each thread, so that a test knows
 * who ran. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__clang__)
#define KEEP __attribute__((noinline))
#else
#define KEEP __attribute__((noinline, noipa))
#endif
#define AFTER_CALLS() __asm__ volatile("" ::: "memory")

static volatile unsigned long sink;
static double secs;

static void spin(void) {
    struct timespec t;
    double end;
    unsigned long x = sink;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    end = t.tv_sec + t.tv_nsec / 1e9 + secs;
    do {
        for (unsigned long i = 0; i < 1000000; i++)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while (t.tv_sec + t.tv_nsec / 1e9 < end);
    sink = x;
}

KEEP void alpha_spin(void) {
    spin();
    AFTER_CALLS();
}

KEEP void beta_spin(void) {
    spin();
    AFTER_CALLS();
}

KEEP void omega_spin(void) {
    spin();
    AFTER_CALLS();
}

static pthread_barrier_t named;

static void *run(void *arg) {
    const char *name = arg;
    pthread_setname_np(pthread_self(), name);
    printf("%s %ld\n", name, (long)syscall(SYS_gettid));
    fflush(stdout);
    /* Both named before either spins. */
    pthread_barrier_wait(&named);
    if (name[5] == 'a') {
        alpha_spin();
        pthread_setname_np(pthread_self(), "spin-omega");
        omega_spin();
    } else
        beta_spin();
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t a, b;
    secs = argc > 1 ? atof(argv[1]) : 0.3;
    printf("pid %ld\n", (long)getpid());
    fflush(stdout);
    pthread_barrier_init(&named, NULL, 2);
    if (pthread_create(&a, NULL, run, "spin-alpha") != 0 ||
        pthread_create(&b, NULL, run, "spin-beta") != 0)
        return 1;
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
