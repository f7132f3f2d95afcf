/* The library of the PLT workload (plt.c): plt_outer calls plt_tiny, which it exports, so every call
 * goes through this library's own PLT (`plt_tiny@plt`); built stripped, the library's own
 * functions are named by `.dynsym` only, and `hidden_spin` (static) by nothing. */
#if defined(__clang__)
#define KEEP __attribute__((noinline))
#else
#define KEEP __attribute__((noinline, noipa))
#endif

volatile unsigned long plt_sink;

KEEP unsigned long plt_tiny(unsigned long x) {
    return x * 6364136223846793005UL + 1;
}

KEEP void plt_outer(unsigned long n) {
    unsigned long x = plt_sink;
    for (unsigned long i = 0; i < n; i++)
        x = plt_tiny(x);
    plt_sink = x;
}

KEEP static void hidden_spin(unsigned long n) {
    unsigned long x = plt_sink;
    for (unsigned long i = 0; i < n; i++)
        x = x * 2862933555777941757UL + 3037000493UL;
    plt_sink = x;
}

KEEP void plt_hidden(unsigned long n) {
    hidden_spin(n);
    __asm__ volatile("" ::: "memory");
}
