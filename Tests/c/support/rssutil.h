/* rssutil.h — the process's resident set, read so that two readings can be
 * compared: by test_churn (memory given back after churn) and by
 * bench/bench_memory.c (memory per object). Header-only (static inline)
 * so that the bench, which links none of the test support, shares it.
 *
 * Two things make a naive reading wrong by a few hundred KiB, which is
 * what these measurements are about:
 *   - /proc/self/statm's count is the kernel's per-CPU approximate
 *     counter: right after threads exit it was seen 192 KiB below the page
 *     tables, catching up a read later. rl_rss_bytes reads the "Rss:" of
 *     /proc/self/smaps_rollup, which the kernel sums from the page tables.
 *   - A code page first run between two readings is charged to what ran
 *     (and the kernel maps up to 16 pages around each fault): a path of
 *     libc's first taken by the 100th iteration, not the first.
 *     rl_rss_prefault_code reads every page of every executable file
 *     mapping once, before the first reading. */
#ifndef RL_TEST_RSSUTIL_H
#define RL_TEST_RSSUTIL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The resident set in bytes, or -1 if /proc cannot tell. Allocates
 * nothing: a reading does not grow the heap it measures. */
static inline long rl_rss_bytes(void) {
    char buf[2048];
    int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *rss = strstr(buf, "\nRss:");
    if (!rss)
        return -1;
    char *end;
    long kb = strtol(rss + 5, &end, 10);
    return end == rss + 5 || kb <= 0 ? -1 : kb * 1024;
}

/* Faults in every page of every executable file mapping (the program, libc,
 * every library loaded so far): call it before the first reading. Not
 * under valgrind (its own code is mapped into the process, and a read of
 * it is an error valgrind reports) nor ASan (a page's first byte may be in
 * a global's redzone where read-only data shares the mapping): what they
 * run is not measured anyway. */
static inline void rl_rss_prefault_code(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return;
    char line[4096];
    long page = sysconf(_SC_PAGESIZE);
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        int path = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path) < 3 || path == 0)
            continue;
        if (perms[0] != 'r' || perms[2] != 'x' || line[path] != '/')
            continue;
        for (unsigned long a = lo; a < hi; a += (unsigned long)page) (void)*(volatile const char *)a;
    }
    fclose(f);
}

#endif
