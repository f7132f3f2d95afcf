/* The PLT workload: main calls the shared library pltlib.c builds (libpltlib.so) in a loop for
 * a given number of seconds of CPU time, half through plt_outer (whose calls of plt_tiny go
 * through the library's PLT), half in plt_hidden (a static function of the library). */
#include <stdlib.h>
#include <time.h>

void plt_outer(unsigned long n);
void plt_hidden(unsigned long n);

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    double end = t.tv_sec + t.tv_nsec / 1e9 + secs;
    do {
        for (int i = 0; i < 20; i++) {
            plt_outer(20000);
            plt_hidden(20000);
        }
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec + t.tv_nsec / 1e9 < end);
    return 0;
}
