/*
 * bench_echo_uv.c — libuv as a peer of the echo benchmark: the same server
 * as bench_echo_cf.c with libuv's own tools. uv_read_start hands over what
 * arrived (into a 64 KB buffer from the alloc callback); uv_try_write sends
 * what the kernel takes now, uv_write queues the rest (libuv writes it
 * when the socket is writable); above BEC_HIGH_WATER queued bytes the
 * server stops reading from that client (uv_read_stop) until its writes
 * have drained. An uv_async stops the loop.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <uv.h>

#include "bench_echo.h"

#define BU_READ_SIZE 65536

typedef struct bu_server {
    pthread_t thread;
    sem_t ready;
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t stopper;
    unsigned port;
    char *note;
} bu_server;

typedef struct bu_conn {
    uv_tcp_t tcp;
    char buf[BU_READ_SIZE];
    bool paused;
} bu_conn;

/* A queued write owns a copy of the bytes the kernel did not take. */
typedef struct bu_wreq {
    uv_write_t req;
    char bytes[];
} bu_wreq;

static void bu_conn_free(uv_handle_t *h) { free(h); }

static void bu_conn_close(bu_conn *c) {
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, bu_conn_free);
}

static void bu_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    bu_conn *c = (bu_conn *)h;
    *buf = uv_buf_init(c->buf, sizeof c->buf);
}

static void bu_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void bu_after_write(uv_write_t *req, int status) {
    bu_conn *c = (bu_conn *)req->handle;
    free(req);
    if (status < 0) {
        bu_conn_close(c);
        return;
    }
    if (c->paused && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0 &&
        !uv_is_closing((uv_handle_t *)&c->tcp)) {
        c->paused = false;
        uv_read_start((uv_stream_t *)&c->tcp, bu_alloc, bu_on_read);
    }
}

static void bu_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    bu_conn *c = (bu_conn *)s;
    if (nread < 0) { /* UV_EOF or an error: the queued writes are cancelled by the close */
        bu_conn_close(c);
        return;
    }
    if (nread == 0) return;
    size_t sent = 0;
    if (uv_stream_get_write_queue_size(s) == 0) {
        uv_buf_t b = uv_buf_init(buf->base, (unsigned)nread);
        int r = uv_try_write(s, &b, 1);
        if (r > 0) sent = (size_t)r;
        else if (r != UV_EAGAIN) {
            bu_conn_close(c);
            return;
        }
    }
    if (sent < (size_t)nread) {
        size_t rest = (size_t)nread - sent;
        bu_wreq *w = malloc(sizeof *w + rest);
        if (!w) {
            bu_conn_close(c);
            return;
        }
        memcpy(w->bytes, buf->base + sent, rest);
        uv_buf_t b = uv_buf_init(w->bytes, (unsigned)rest);
        if (uv_write(&w->req, s, &b, 1, bu_after_write) != 0) {
            free(w);
            bu_conn_close(c);
            return;
        }
        if (uv_stream_get_write_queue_size(s) >= BEC_HIGH_WATER && !c->paused) {
            uv_read_stop(s);
            c->paused = true;
        }
    }
}

static void bu_on_connection(uv_stream_t *l, int status) {
    if (status < 0) return;
    bu_conn *c = calloc(1, sizeof *c);
    if (!c) return;
    uv_tcp_init(l->loop, &c->tcp);
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        bu_conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, bu_alloc, bu_on_read);
}

static void bu_close_walk(uv_handle_t *h, void *arg) {
    (void)arg;
    if (uv_is_closing(h)) return;
    uv_close(h, h->type == UV_TCP && h != arg ? bu_conn_free : NULL);
}

static void bu_on_stop(uv_async_t *a) {
    bu_server *server = a->data;
    uv_walk(&server->loop, bu_close_walk, &server->listener);
}

static void *bu_server_main(void *arg) {
    bu_server *server = arg;
    uv_loop_init(&server->loop);
    uv_async_init(&server->loop, &server->stopper, bu_on_stop);
    server->stopper.data = server;
    uv_tcp_init(&server->loop, &server->listener);
    struct sockaddr_in sin;
    uv_ip4_addr("127.0.0.1", 0, &sin);
    int r = uv_tcp_bind(&server->listener, (const struct sockaddr *)&sin, 0);
    if (r == 0) r = uv_listen((uv_stream_t *)&server->listener, 256, bu_on_connection);
    if (r != 0) {
        snprintf(server->note, 120, "libuv: cannot listen: %s", uv_strerror(r));
        sem_post(&server->ready);
        bu_on_stop(&server->stopper);
        uv_run(&server->loop, UV_RUN_DEFAULT);
        uv_loop_close(&server->loop);
        return NULL;
    }
    struct sockaddr_in bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&server->listener, (struct sockaddr *)&bound, &len);
    server->port = ntohs(bound.sin_port);
    sem_post(&server->ready);
    uv_run(&server->loop, UV_RUN_DEFAULT); /* until every handle is closed */
    uv_loop_close(&server->loop);
    return NULL;
}

static void *bu_start(unsigned *port, char *note) {
    bu_server *server = calloc(1, sizeof *server);
    if (!server) return NULL;
    server->note = note;
    sem_init(&server->ready, 0, 0);
    if (pthread_create(&server->thread, NULL, bu_server_main, server) != 0) {
        snprintf(note, 120, "libuv: cannot start a thread");
        free(server);
        return NULL;
    }
    sem_wait(&server->ready);
    if (server->port == 0) {
        pthread_join(server->thread, NULL);
        free(server);
        return NULL;
    }
    *port = server->port;
    return server;
}

static void bu_stop_server(void *p) {
    bu_server *server = p;
    uv_async_send(&server->stopper);
    pthread_join(server->thread, NULL);
    sem_destroy(&server->ready);
    free(server);
}

const bec_peer bec_peer_uv = {"libuv", bu_start, bu_stop_server, "none"};
