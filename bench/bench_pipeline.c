/* The pipeline schedules' idle time against the theory: K stages of equal,
 * synthetic cost (each forward sleeps F ms, each backward 2F ms, so the
 * stages do not compete for this machine's cores), M micro-batches, GPipe
 * and 1F1B; the measured bubble, 1 - mean busy / wall, beside
 * (K - 1) / (M + K - 1). The runner, hand-offs and threads are the ones
 * training uses (train/pipe_runner.h).
 *
 *   bench_pipeline [--ms F] [--rounds R]   (default 4 ms, 3 rounds: the median) */
#include "train/pipe_runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double op_ms = 4;

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000 * (time_t)(ms / 1000)) * 1e6)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static stk_status synthetic(void *ctx, stk_pipe_runner *r, int s, int i, bool backward)
{
    int k = *(int *)ctx;
    void *p;
    if (!backward && s > 0) STK_TRY(stk_pipe_recv(r, s, i, false, &p));
    if (backward && s < k - 1) STK_TRY(stk_pipe_recv(r, s, i, true, &p));
    sleep_ms(backward ? 2 * op_ms : op_ms);
    if (!backward && s < k - 1) return stk_pipe_send(r, s, i, false, r);
    if (backward && s > 0) return stk_pipe_send(r, s, i, true, r);
    return STK_OK;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rounds = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ms") && i + 1 < argc)
            op_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_pipeline [--ms F] [--rounds R]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 99 || !(op_ms > 0 && op_ms < 1000)) {
        fprintf(stderr, "bench_pipeline: --rounds 1..99, --ms in (0, 1000)\n");
        return 2;
    }
    int worst_ok = 1;
    printf("synthetic stages: forward %.1f ms, backward %.1f ms; median of %d rounds\n", op_ms,
           2 * op_ms, rounds);
    int ks[] = {2, 4}, ms[] = {4, 8, 16};
    for (int a = 0; a < 2; a++) {
        stk_pipe_runner *r;
        if (stk_pipe_runner_create(ks[a], NULL, NULL, &r) != STK_OK) {
            fprintf(stderr, "bench_pipeline: %s\n", stk_last_error());
            return 1;
        }
        for (int b = 0; b < 3; b++)
            for (int sched = 0; sched < 2; sched++) {
                double bub[99];
                stk_pipe_stats st = {0};
                for (int k = 0; k < rounds; k++) {
                    if (stk_pipe_runner_run(r, ms[b], (stk_pipe_schedule)sched, synthetic, &ks[a],
                                            NULL, &st) != STK_OK) {
                        fprintf(stderr, "bench_pipeline: %s\n", stk_last_error());
                        return 1;
                    }
                    bub[k] = st.bubble;
                }
                qsort(bub, (size_t)rounds, sizeof *bub, cmp);
                double theory = (double)(ks[a] - 1) / (ms[b] + ks[a] - 1), got = bub[rounds / 2];
                double off = (got - theory) / theory;
                int ok = off <= 0.10 && off >= -0.10;
                worst_ok &= ok;
                printf("K=%d M=%-2d %-5s bubble %5.1f%% (theory %5.1f%%, %+5.1f%%) %s; peak "
                       "activations per stage:",
                       ks[a], ms[b], stk_pipe_schedule_name((stk_pipe_schedule)sched), 100 * got,
                       100 * theory, 100 * off, ok ? "within 10%" : "OFF BY MORE THAN 10%");
                for (int s = 0; s < ks[a]; s++) printf(" %d", st.max_in_flight[s]);
                printf("; %lld transfers\n", (long long)st.transfers);
            }
        stk_pipe_runner_destroy(r);
    }
    return worst_ok ? 0 : 1;
}
