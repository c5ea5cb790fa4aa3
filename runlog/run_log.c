#include "runlog/run_log.h"

#include "common/fs.h"
#include "common/text.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLUMNS 32
#define MAX_FILE    ((uint64_t)1 << 31)
#define MAX_POINTS  8192 /* kept per column: what a chart draws (svg_chart.h) */

/* One CSV file: its header's names and a column-major table of numbers. */
typedef struct table {
    int n_cols;
    char *names[MAX_COLUMNS];
    double *cols[MAX_COLUMNS]; /* n_rows each */
    size_t n_rows;
    stk_series series[MAX_COLUMNS];   /* column i against column 0 */
    stk_series at_steps[MAX_COLUMNS]; /* column i against column "step" */
} table;

struct stk_run_log {
    table metrics, steps;
};

static void table_free(table *t)
{
    for (int i = 0; i < t->n_cols; i++) {
        free(t->names[i]);
        free(t->cols[i]);
    }
    memset(t, 0, sizeof *t);
}

static int column_index(const table *t, const char *name)
{
    for (int i = 0; i < t->n_cols; i++)
        if (!strcmp(t->names[i], name)) return i;
    return -1;
}

/* One cell: the bytes [p, end) of a field, trimmed of blanks. Empty: NaN.
 * Parsed from a bounded copy, never past the field (the buffer has no NUL,
 * and strtod would skip a newline into the next row). */
static bool parse_cell(const char *p, const char *end, double *v)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
    *v = NAN;
    if (p == end) return true;
    char buf[64];
    size_t n = (size_t)(end - p);
    if (n >= sizeof buf) return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *after;
    errno = 0;
    *v = strtod(buf, &after);
    return after == buf + n && errno != ERANGE;
}

/* Parse `text` (len bytes) as CSV of numbers with a header line, in one
 * pass over the rows (linear time). Memory is bounded by what a chart can
 * draw: past MAX_POINTS rows, each kept point is the mean of a run of rows
 * (of the finite cells; NaN when none), as the chart would average them. */
static stk_status table_parse(const char *path, const char *text, size_t len, table *t)
{
    memset(t, 0, sizeof *t);
    const char *end = text + len, *p = text;
    const char *eol = memchr(p, '\n', len);
    if (!eol) return stk_error(STK_ERR_CORRUPT, "%s: no header line", path);
    while (p < eol) { /* the header */
        const char *c = memchr(p, ',', (size_t)(eol - p));
        if (!c) c = eol;
        if (t->n_cols == MAX_COLUMNS)
            return stk_error(STK_ERR_CORRUPT, "%s: more than %d columns", path, MAX_COLUMNS);
        if (!(t->names[t->n_cols++] = stk_text_printf("%.*s", (int)(c - p), p)))
            return stk_error(STK_ERR_NOMEM, "out of memory");
        p = c < eol ? c + 1 : c;
    }
    size_t rows = 0; /* complete rows: a torn last line (the run was cut off) is ignored */
    for (const char *q = eol + 1; q < end && (q = memchr(q, '\n', (size_t)(end - q))); q++) rows++;
    size_t per = (rows + MAX_POINTS - 1) / MAX_POINTS, points = per ? (rows + per - 1) / per : 0;
    if (per == 0) per = 1;
    double sum[MAX_COLUMNS], w = 1.0 / (double)per; /* scaled: sums of 1e308s stay finite */
    int count[MAX_COLUMNS];
    for (int i = 0; i < t->n_cols; i++)
        if (!(t->cols[i] = malloc((points ? points : 1) * sizeof(double))))
            return stk_error(STK_ERR_NOMEM, "out of memory");
    size_t line = 1, in_bucket = 0;
    for (p = eol + 1; p < end && (eol = memchr(p, '\n', (size_t)(end - p))); p = eol + 1) {
        line++;
        if (in_bucket == 0)
            for (int i = 0; i < t->n_cols; i++) sum[i] = 0, count[i] = 0;
        const char *c = p;
        for (int i = 0; i < t->n_cols; i++) {
            const char *comma = c <= eol ? memchr(c, ',', (size_t)(eol - c)) : NULL;
            const char *cell_end = comma ? comma : eol;
            double v = NAN;
            if (c <= eol && !parse_cell(c, cell_end, &v))
                return stk_error(STK_ERR_CORRUPT, "%s: line %zu: %s is not a number", path, line,
                                 t->names[i]);
            if (isfinite(v)) sum[i] += v * w, count[i]++;
            c = comma ? comma + 1 : eol + 1; /* past eol: the row's missing cells are empty */
        }
        if (++in_bucket == per || line - 1 == rows) {
            for (int i = 0; i < t->n_cols; i++)
                t->cols[i][t->n_rows] =
                    count[i] ? fmin(fmax(sum[i] * ((double)per / count[i]), -DBL_MAX), DBL_MAX)
                             : NAN;
            t->n_rows++;
            in_bucket = 0;
        }
    }
    int step = column_index(t, "step");
    for (int i = 0; i < t->n_cols; i++) {
        t->series[i] = (stk_series){t->cols[0], t->cols[i], t->n_rows};
        if (step >= 0) t->at_steps[i] = (stk_series){t->cols[step], t->cols[i], t->n_rows};
    }
    return STK_OK;
}

/* The columns every file must start with. */
static stk_status check_first(const table *t, const char *path, const char *name)
{
    if (t->n_cols && column_index(t, name) != 0)
        return stk_error(STK_ERR_CORRUPT, "%s: the first column is not %s", path, name);
    return STK_OK;
}

static stk_status parse_both(stk_run_log *log, const char *dir, const char *metrics,
                             size_t metrics_len, const char *steps, size_t steps_len)
{
    char *pm = stk_text_printf("%s/metrics.csv", dir), *ps = stk_text_printf("%s/steps.csv", dir);
    stk_status st = pm && ps ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    if (st == STK_OK) st = table_parse(pm, metrics, metrics_len, &log->metrics);
    if (st == STK_OK) st = check_first(&log->metrics, pm, "epoch");
    if (st == STK_OK && steps) st = table_parse(ps, steps, steps_len, &log->steps);
    if (st == STK_OK) st = check_first(&log->steps, ps, "step");
    free(pm);
    free(ps);
    return st;
}

stk_status stk_run_log_parse(const char *dir, const char *metrics, size_t metrics_len,
                             const char *steps, size_t steps_len, stk_run_log **out)
{
    *out = NULL;
    stk_run_log *log = calloc(1, sizeof *log);
    if (!log) return stk_error(STK_ERR_NOMEM, "out of memory");
    stk_status st = parse_both(log, dir, metrics, metrics_len, steps, steps_len);
    if (st != STK_OK) {
        stk_run_log_free(log);
        return st;
    }
    *out = log;
    return STK_OK;
}

stk_status stk_run_log_read(const char *dir, stk_run_log **out)
{
    *out = NULL;
    char *pm = stk_text_printf("%s/metrics.csv", dir), *ps = stk_text_printf("%s/steps.csv", dir);
    uint8_t *m = NULL, *s = NULL;
    size_t m_len = 0, s_len = 0;
    stk_status st = pm && ps ? STK_OK : stk_error(STK_ERR_NOMEM, "out of memory");
    if (st == STK_OK && (st = stk_file_read_all(pm, MAX_FILE, &m, &m_len)) != STK_OK)
        st = st == STK_ERR_IO ? stk_error(STK_ERR_IO,
                                          "%s: no metrics.csv (not a stoke train run "
                                          "directory?): %s: %s",
                                          dir, pm, stk_last_error())
                              : stk_error_prefix(st, "%s", pm);
    if (st == STK_OK && (st = stk_file_read_all(ps, MAX_FILE, &s, &s_len)) != STK_OK) {
        if (st == STK_ERR_IO) /* steps.csv is optional (runs from before it) */
            st = STK_OK;
        else
            st = stk_error_prefix(st, "%s", ps);
    }
    if (st == STK_OK)
        st = stk_run_log_parse(dir, (const char *)m, m_len, (const char *)s, s_len, out);
    free(pm);
    free(ps);
    free(m);
    free(s);
    return st;
}

void stk_run_log_free(stk_run_log *log)
{
    if (!log) return;
    table_free(&log->metrics);
    table_free(&log->steps);
    free(log);
}

const stk_series *stk_run_log_epoch(const stk_run_log *log, const char *column)
{
    int i = column_index(&log->metrics, column);
    return i < 0 ? NULL : &log->metrics.series[i];
}

const stk_series *stk_run_log_step(const stk_run_log *log, const char *column)
{
    int i = column_index(&log->steps, column);
    return i < 0 ? NULL : &log->steps.series[i];
}

const stk_series *stk_run_log_epoch_at_steps(const stk_run_log *log, const char *column)
{
    int i = column_index(&log->metrics, column);
    return i < 0 || column_index(&log->metrics, "step") < 0 ? NULL : &log->metrics.at_steps[i];
}
