/* netutil.c — see netutil.h. */
#include "netutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int rl_test_raw_listener(int flags, int backlog, uint16_t *port) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
    assert_true(lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, backlog), 0);
    socklen_t alen = sizeof a;
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    return lfd;
}

int rl_test_raw_connect(uint16_t port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

void rl_test_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

size_t rl_test_dropped_of(RLSocketPortRef p) {
    char *d = RLCopyDescription(p);
    const char *at = strstr(d, "dropped ");
    size_t n = at ? strtoul(at + 8, NULL, 10) : 0;
    free(d);
    return n;
}
