/* Three threads, each main's pthread_create'd worker -> thread_spin for argv[1] seconds of its
 * own CPU time, while main waits in pthread_join. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#if defined(__clang__)
#define KEEP __attribute__((noinline))
#else
#define KEEP __attribute__((noinline, noipa))
#endif
#define AFTER_CALLS() __asm__ volatile("" ::: "memory")

static volatile unsigned long sink;

KEEP void thread_spin(double secs) {
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

KEEP void *worker(void *arg) {
    thread_spin(*(double *)arg);
    AFTER_CALLS();
    return NULL;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.5;
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&t[i], NULL, worker, &secs) != 0)
            return 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    return 0;
}
