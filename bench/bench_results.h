/*
 * bench_results.h — the results file of a C benchmark, for the charts
 * (scripts/bench-chart.py, `make bench-chart`): one CSV line per row and
 * peer,
 *
 *   group,row,peer,ratio,ratio_min,ratio_max,ours,peer_value,unit
 *
 * where ratio is the median over rounds of the per-round time ratio
 * ours/peer (below 1: ours is faster or lighter; for a rate, peer/ours)
 * and ratio_min/ratio_max its spread. The file is named by the BENCH_CSV
 * environment variable (the make targets set it to
 * build/.../bench/results/NAME.csv); without it nothing is written.
 * Header-only: each bench is one program.
 */
#ifndef BENCH_RESULTS_H
#define BENCH_RESULTS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The results file named by BENCH_CSV, with its header written; NULL when
 * BENCH_CSV is unset (or the file cannot be made: said on stderr). */
static inline FILE *bench_results_open(void) {
    const char *path = getenv("BENCH_CSV");
    if (!path || !*path)
        return NULL;
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return NULL;
    }
    fputs("group,row,peer,ratio,ratio_min,ratio_max,ours,peer_value,unit\n", f);
    return f;
}

/* One CSV field, quoted (commas and quotes in labels are common). */
static inline void bench_results_text(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static inline int bench_results_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One row of f for one peer: the time ratios ours/peer of each round
 * (non-finite ones are left out), and the two medians shown beside them.
 * A row whose every ratio is unusable gets empty ratio fields: the chart
 * then says that this peer has no result for it. ours or peer_value NaN:
 * an empty field. */
static inline void bench_results_row(FILE *f, const char *group, const char *row, const char *peer,
                                     const double *ratios, int n, double ours, double peer_value, const char *unit) {
    if (!f)
        return;
    double v[256];
    int k = 0;
    for (int i = 0; i < n && k < (int)(sizeof v / sizeof v[0]); i++)
        if (isfinite(ratios[i]) && ratios[i] > 0)
            v[k++] = ratios[i];
    bench_results_text(f, group);
    fputc(',', f);
    bench_results_text(f, row);
    fputc(',', f);
    bench_results_text(f, peer);
    if (k > 0) {
        qsort(v, (size_t)k, sizeof v[0], bench_results_cmp);
        double med = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
        fprintf(f, ",%.6g,%.6g,%.6g", med, v[0], v[k - 1]);
    } else {
        fputs(",,,", f);
    }
    /* A value the run does not have (NaN) is an empty field. */
    if (isfinite(ours))
        fprintf(f, ",%.6g", ours);
    else
        fputc(',', f);
    if (isfinite(peer_value))
        fprintf(f, ",%.6g,", peer_value);
    else
        fputs(",,", f);
    bench_results_text(f, unit);
    fputc('\n', f);
}

/* Closes f. */
static inline void bench_results_close(FILE *f) {
    if (!f)
        return;
    if (fclose(f) != 0)
        perror("bench results");
}

#endif /* BENCH_RESULTS_H */
