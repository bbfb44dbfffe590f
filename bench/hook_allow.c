/* A pre_call hook for bench/hooks.py: reads the call toolgate sends on standard input, to its
 * end, and answers allow at once.
 *
 *     cc -O2 -o hook_allow bench/hook_allow.c
 */
#include <unistd.h>

int main(void) {
    static char buf[65536];
    while (read(0, buf, sizeof buf) > 0) {
    }
    static const char answer[] = "{\"decision\": \"allow\"}\n";
    return write(1, answer, sizeof answer - 1) == (ssize_t)(sizeof answer - 1) ? 0 : 1;
}
