#include "watch/run_log.h"

#include "common/fs.h"
#include "common/text.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COLUMNS 32
#define MAX_FILE    ((uint64_t)1 << 31)

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

/* Parse `text` (len bytes) as CSV of numbers with a header line. */
static stk_status table_parse(const char *path, const char *text, size_t len, table *t)
{
    memset(t, 0, sizeof *t);
    const char *end = text + len, *p = text;
    const char *eol = memchr(p, '\n', len);
    if (!eol) return stk_error(STK_ERR_CORRUPT, "%s: no header line", path);
    while (p < eol) { /* the header */
        const char *c = p;
        while (c < eol && *c != ',') c++;
        if (t->n_cols == MAX_COLUMNS)
            return stk_error(STK_ERR_CORRUPT, "%s: more than %d columns", path, MAX_COLUMNS);
        if (!(t->names[t->n_cols++] = stk_text_printf("%.*s", (int)(c - p), p)))
            return stk_error(STK_ERR_NOMEM, "out of memory");
        p = c < eol ? c + 1 : c;
    }
    size_t rows = 0;
    for (const char *q = eol + 1; q < end; q++) rows += *q == '\n';
    for (int i = 0; i < t->n_cols; i++)
        if (!(t->cols[i] = malloc((rows ? rows : 1) * sizeof(double))))
            return stk_error(STK_ERR_NOMEM, "out of memory");
    size_t line = 1;
    for (p = eol + 1; p < end; p = eol + 1) {
        line++;
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) break; /* a torn last line (the run was cut off): ignored */
        for (int i = 0; i < t->n_cols; i++) {
            double v = NAN;
            if (p < eol && *p != ',') {
                char *after;
                errno = 0;
                v = strtod(p, &after);
                if (after == p || (after < eol && *after != ',') || errno == ERANGE)
                    return stk_error(STK_ERR_CORRUPT, "%s: line %zu: %s is not a number", path,
                                     line, t->names[i]);
                p = after;
            }
            t->cols[i][t->n_rows] = v;
            if (p < eol && *p == ',') p++;
        }
        t->n_rows++;
    }
    int step = column_index(t, "step");
    for (int i = 0; i < t->n_cols; i++) {
        t->series[i] = (stk_series){t->cols[0], t->cols[i], t->n_rows};
        if (step >= 0) t->at_steps[i] = (stk_series){t->cols[step], t->cols[i], t->n_rows};
    }
    return STK_OK;
}

static stk_status table_read(const char *path, table *t, bool required)
{
    uint8_t *text;
    size_t len;
    stk_status st = stk_file_read_all(path, MAX_FILE, &text, &len);
    if (st == STK_ERR_IO && !required) return STK_OK;
    if (st != STK_OK) return stk_error_prefix(st, "%s", path);
    st = table_parse(path, (const char *)text, len, t);
    free(text);
    return st;
}

stk_status stk_run_log_read(const char *dir, stk_run_log **out)
{
    *out = NULL;
    stk_run_log *log = calloc(1, sizeof *log);
    char *metrics = stk_text_printf("%s/metrics.csv", dir);
    char *steps = stk_text_printf("%s/steps.csv", dir);
    stk_status st = STK_OK;
    if (!log || !metrics || !steps) {
        st = stk_error(STK_ERR_NOMEM, "out of memory");
    } else if ((st = table_read(metrics, &log->metrics, true)) == STK_ERR_IO) {
        st = stk_error(STK_ERR_IO, "%s: no metrics.csv (not a stoke train run directory?): %s", dir,
                       stk_last_error());
    } else if (st == STK_OK && column_index(&log->metrics, "epoch") != 0) {
        st = stk_error(STK_ERR_CORRUPT, "%s: the first column is not epoch", metrics);
    } else if (st == STK_OK) {
        st = table_read(steps, &log->steps, false);
        if (st == STK_OK && log->steps.n_cols && column_index(&log->steps, "step") != 0)
            st = stk_error(STK_ERR_CORRUPT, "%s: the first column is not step", steps);
    }
    free(metrics);
    free(steps);
    if (st != STK_OK) {
        stk_run_log_free(log);
        return st;
    }
    *out = log;
    return STK_OK;
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
