/* Loads the library argv[1] (plugin.c) with dlopen once running, then runs its plugin_spin for
 * argv[2] seconds of CPU time: main -> plugin_spin -> plugin_leaf, in a file mapped after the
 * start. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define AFTER_CALLS() __asm__ volatile("" ::: "memory")

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: dlopen LIBRARY SECONDS\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    void (*spin)(double) = (void (*)(double))dlsym(lib, "plugin_spin");
    if (!spin) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    spin(atof(argv[2]));
    AFTER_CALLS();
    return 0;
}
