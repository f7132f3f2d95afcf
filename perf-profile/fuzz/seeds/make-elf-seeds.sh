#!/bin/sh
# Makes the ELF seeds in seeds/elf/ (committed; run again only to change them): a static
# executable of three functions with a build id, symbols, .eh_frame and DWARF; the same with the
# DWARF zlib-compressed (SHF_COMPRESSED); stripped to a .gnu_debuglink and its debug file; a
# shared object (.dynsym); a 32-bit build. Linked with 16-byte pages so each is a few KiB.
set -eu
cd "$(dirname "$0")/elf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/tiny.c" <<'C'
static volatile int sink;
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int middle(int x) { return leaf(x) + leaf(x + 1); }
void _start(void) { sink = middle(sink); for (;;) ; }
C
small="-Os -nostdlib -Wl,--build-id -Wl,-z,max-page-size=0x10 -Wl,-z,norelro -Wl,-z,noseparate-code"
cc $small -g -static -funwind-tables -o seed-static "$tmp/tiny.c"
objcopy --compress-debug-sections=zlib seed-static seed-zdebug
objcopy --only-keep-debug seed-static seed-debugfile
objcopy --strip-debug --add-gnu-debuglink=seed-debugfile seed-static seed-debuglink
cc $small -shared -fPIC -o seed-shared.so "$tmp/tiny.c"
cc $small -m32 -static -o seed-32 "$tmp/tiny.c" || echo "no 32-bit compiler: seed-32 kept as it was"
ls -l
