/*
 * The least a stdio proxy can do: start a server and pass bytes both ways, unread.
 *
 *     cc -O2 -o relay bench/relay.c && ./relay COMMAND [ARG...]
 *
 * One thread, one poll(2) over the client's input and the server's output; whatever arrives on
 * one side is written to the other at once. No parsing, no policy, no record: what it adds to
 * a call is what any proxy between two processes pays on this machine (two more pipe hops and
 * the wake-ups they cost), and so the floor under bench/upstream_read.py's ratio targets.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int pass(int from, int to) {
    char buffer[65536];
    ssize_t n = read(from, buffer, sizeof buffer);
    if (n <= 0) return n == 0 || errno != EINTR ? -1 : 0;
    for (ssize_t done = 0; done < n;) {
        ssize_t w = write(to, buffer + done, n - done);
        if (w < 0 && errno != EINTR) return -1;
        if (w > 0) done += w;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: relay COMMAND [ARG...]\n");
        return 2;
    }
    int in[2], out[2];
    if (pipe(in) || pipe(out)) return perror("pipe"), 1;
    signal(SIGPIPE, SIG_IGN);
    pid_t child = fork();
    if (child < 0) return perror("fork"), 1;
    if (child == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execvp(argv[1], argv + 1);
        perror("exec");
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = out[0], .events = POLLIN}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (fds[0].revents && pass(0, in[1]) < 0) {
            close(in[1]);
            fds[0].fd = -1;
        }
        if (fds[1].revents && pass(out[0], 1) < 0) break;
    }
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
    return 0;
}
