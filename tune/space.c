/* Search spaces (space.h): parsing Ray Tune's distributions, drawing trials. */
#include "tune/space.h"

#include "common/rng.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dist_names[] = {"uniform", "quniform", "loguniform", "qloguniform",
                                         "randint", "choice",   "grid"};

const char *stk_dist_name(stk_dist d) { return dist_names[d]; }

void stk_number_text(double x, char buf[32])
{
    /* plain decimals where they are short enough (20, not 2e+01; 0.001) */
    if (isfinite(x) && fabs(x) < 1e15 && (x == 0 || fabs(x) >= 1e-5))
        for (int dec = 0; dec <= 20; dec++) {
            int n = snprintf(buf, 32, "%.*f", dec, x);
            if (n < 25 && strtod(buf, NULL) == x) return;
        }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) return;
    }
}

static void key_free(stk_space_key *k)
{
    free(k->name);
    for (int i = 0; i < k->n_values; i++) free(k->values[i]);
    memset(k, 0, sizeof *k);
}

void stk_space_free(stk_space *s)
{
    for (int i = 0; i < s->n; i++) key_free(&s->keys[i]);
    s->n = 0;
}

static stk_status number(const char *key, const char *text, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    if (!*text || *end || errno || !isfinite(*out))
        return stk_error(STK_ERR_INVALID_ARG, "--space %s: '%s' is not a number", key, text);
    return STK_OK;
}

/* The arguments of "DIST(a,b,c)" into args (pointers into buf, trimmed); a
 * value in single quotes may hold commas ('rrc:64,flip'). */
static int split_args(char *buf, char **args, int max)
{
    int n = 0;
    char *p = buf;
    while (n < max) {
        while (isspace((unsigned char)*p)) p++;
        char *end;
        if (*p == '\'' && (end = strchr(p + 1, '\''))) {
            args[n++] = p + 1;
            *end = '\0';
            p = end + 1;
            while (isspace((unsigned char)*p)) p++;
            if (*p != ',') break;
            p++;
            continue;
        }
        args[n++] = p;
        char *comma = strchr(p, ',');
        end = comma ? comma : p + strlen(p);
        while (end > p && isspace((unsigned char)end[-1])) end--;
        *end = '\0';
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

/* One entry KEY=DIST(ARGS) (its text in `e`, modified) into k. */
static stk_status parse_entry(char *e, stk_space_key *k)
{
    char *eq = strchr(e, '=');
    if (!eq || eq == e)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--space '%s': expected KEY=DIST(ARGS), e.g. lr=loguniform(1e-3,0.3)", e);
    *eq = '\0';
    const char *key = e;
    char *dist = eq + 1, *open = strchr(dist, '('), *close = strrchr(dist, ')');
    if (!open || !close || close < open || close[1])
        return stk_error(STK_ERR_INVALID_ARG,
                         "--space %s: expected DIST(ARGS) after '=', e.g. uniform(0.8,0.99)", key);
    *open = *close = '\0';
    int d = -1;
    for (int i = 0; i < (int)(sizeof dist_names / sizeof *dist_names); i++)
        if (!strcmp(dist, dist_names[i])) d = i;
    if (d < 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--space %s: no distribution '%s' (uniform, quniform, loguniform, "
                         "qloguniform, randint, choice, grid)",
                         key, dist);
    char *args[STK_SPACE_MAX_VALUES + 1];
    int n = split_args(open + 1, args, STK_SPACE_MAX_VALUES + 1);
    if (!(k->name = strdup(key))) return stk_error(STK_ERR_NOMEM, "out of memory");
    k->dist = (stk_dist)d;
    if (d == STK_DIST_CHOICE || d == STK_DIST_GRID) {
        if (n > STK_SPACE_MAX_VALUES)
            return stk_error(STK_ERR_INVALID_ARG, "--space %s: more than %d values", key,
                             STK_SPACE_MAX_VALUES);
        for (int i = 0; i < n; i++) {
            if (!*args[i])
                return stk_error(STK_ERR_INVALID_ARG, "--space %s: %s() with an empty value", key,
                                 dist);
            if (strlen(args[i]) >= STK_SPACE_VALUE_MAX)
                return stk_error(STK_ERR_INVALID_ARG, "--space %s: a value longer than %d bytes",
                                 key, STK_SPACE_VALUE_MAX - 1);
            if (!(k->values[k->n_values++] = strdup(args[i])))
                return stk_error(STK_ERR_NOMEM, "out of memory");
        }
        return STK_OK;
    }
    int want = d == STK_DIST_QUNIFORM || d == STK_DIST_QLOGUNIFORM ? 3 : 2;
    if (n != want)
        return stk_error(STK_ERR_INVALID_ARG, "--space %s: %s takes %d numbers (%s), not %d", key,
                         dist, want, want == 3 ? "low, high, q" : "low, high", n);
    STK_TRY(number(key, args[0], &k->lo));
    STK_TRY(number(key, args[1], &k->hi));
    if (want == 3) STK_TRY(number(key, args[2], &k->q));
    if (!(k->lo < k->hi))
        return stk_error(STK_ERR_INVALID_ARG, "--space %s: empty range [%g, %g)", key, k->lo,
                         k->hi);
    if ((d == STK_DIST_LOGUNIFORM || d == STK_DIST_QLOGUNIFORM) && k->lo <= 0)
        return stk_error(STK_ERR_INVALID_ARG,
                         "--space %s: %s needs bounds above 0 (the log of %g is not defined)", key,
                         dist, k->lo);
    if (want == 3 && !(k->q > 0))
        return stk_error(STK_ERR_INVALID_ARG, "--space %s: q %g: must be above 0", key, k->q);
    if (d == STK_DIST_RANDINT && (k->lo != floor(k->lo) || k->hi != floor(k->hi)))
        return stk_error(STK_ERR_INVALID_ARG, "--space %s: randint takes integer bounds", key);
    return STK_OK;
}

stk_status stk_space_parse(stk_space *s, const char *text)
{
    char *buf = strdup(text);
    if (!buf) return stk_error(STK_ERR_NOMEM, "out of memory");
    int first = s->n;
    stk_status st = STK_OK;
    char *p = buf;
    while (st == STK_OK && *p) {
        while (*p == ';' || isspace((unsigned char)*p)) p++;
        if (!*p) break;
        /* the entry ends at ';' or white space outside parentheses and quotes */
        char *e = p;
        int depth = 0;
        bool quoted = false;
        while (*p && (depth > 0 || quoted || (*p != ';' && !isspace((unsigned char)*p)))) {
            if (*p == '\'')
                quoted = !quoted;
            else if (!quoted)
                depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
            p++;
        }
        if (*p) *p++ = '\0';
        if (s->n == STK_SPACE_MAX_KEYS) {
            st = stk_error(STK_ERR_INVALID_ARG, "--space: more than %d keys", STK_SPACE_MAX_KEYS);
            break;
        }
        stk_space_key *k = &s->keys[s->n];
        memset(k, 0, sizeof *k);
        st = parse_entry(e, k);
        for (int i = 0; st == STK_OK && i < s->n; i++)
            if (!strcmp(s->keys[i].name, k->name))
                st = stk_error(STK_ERR_INVALID_ARG, "--space %s: given twice", k->name);
        if (st != STK_OK)
            key_free(k);
        else
            s->n++;
    }
    if (st != STK_OK) /* all of `text` or none of it */
        while (s->n > first) key_free(&s->keys[--s->n]);
    free(buf);
    return st;
}

/* The grid's points, or -1 past STK_SPACE_MAX_TRIALS (checked at each
 * factor: 11 keys of 64 values would wrap an int64). */
static int64_t grid_size(const stk_space *s)
{
    int64_t g = 1;
    for (int i = 0; i < s->n; i++)
        if (s->keys[i].dist == STK_DIST_GRID) {
            g *= s->keys[i].n_values;
            if (g > STK_SPACE_MAX_TRIALS) return -1;
        }
    return g;
}

int64_t stk_space_trials(const stk_space *s, int64_t samples)
{
    int64_t g = grid_size(s);
    if (g < 0 || samples < 1 || samples > STK_SPACE_MAX_TRIALS / g) return -1;
    return samples * g;
}

/* A numeric key's value for the uniform draw u, as text. */
static void sample_number(const stk_space_key *k, double u, char *v)
{
    double x;
    switch (k->dist) {
    case STK_DIST_RANDINT: x = floor(k->lo + u * (k->hi - k->lo)); break;
    case STK_DIST_UNIFORM:
    case STK_DIST_QUNIFORM: x = k->lo + u * (k->hi - k->lo); break;
    default: x = exp(log(k->lo) + u * (log(k->hi) - log(k->lo))); break;
    }
    if (k->dist == STK_DIST_QUNIFORM || k->dist == STK_DIST_QLOGUNIFORM) x = round(x / k->q) * k->q;
    stk_number_text(x, v);
}

void stk_space_draw(const stk_space *s, uint64_t seed, int64_t trial, stk_trial_params *out)
{
    memset(out, 0, sizeof *out);
    stk_rng r;
    /* a domain of its own: the same --seed also orders the data */
    stk_rng_init(&r, seed ^ 0x74756e6573706163ull, (uint64_t)trial, 0);
    int64_t point = trial % grid_size(s);
    /* the grid point's digits, the last grid key fastest */
    int64_t digit[STK_SPACE_MAX_KEYS];
    for (int i = s->n - 1; i >= 0; i--)
        if (s->keys[i].dist == STK_DIST_GRID) {
            digit[i] = point % s->keys[i].n_values;
            point /= s->keys[i].n_values;
        }
    for (int i = 0; i < s->n; i++) {
        const stk_space_key *k = &s->keys[i];
        char *v = out->value[i];
        out->key[i] = k->name;
        double u = stk_rng_uniform(&r);
        if (k->dist == STK_DIST_GRID)
            snprintf(v, STK_SPACE_VALUE_MAX, "%s", k->values[digit[i]]);
        else if (k->dist == STK_DIST_CHOICE)
            snprintf(v, STK_SPACE_VALUE_MAX, "%s", k->values[(int)(u * k->n_values) % k->n_values]);
        else
            sample_number(k, u, v);
    }
    out->n = s->n;
}

void stk_space_explore(const stk_space *s, stk_rng *r, double resample_p,
                       const stk_trial_params *from, stk_trial_params *out)
{
    *out = *from;
    for (int i = 0; i < s->n && i < from->n; i++) {
        const stk_space_key *k = &s->keys[i];
        char *v = out->value[i];
        bool resample = stk_rng_uniform(r) < resample_p;
        if (k->dist == STK_DIST_CHOICE || k->dist == STK_DIST_GRID) {
            int at = -1;
            for (int j = 0; j < k->n_values; j++)
                if (!strcmp(k->values[j], from->value[i])) at = j;
            if (resample || at < 0) {
                snprintf(v, STK_SPACE_VALUE_MAX, "%s",
                         k->values[stk_rng_below(r, (uint32_t)k->n_values)]);
            } else { /* a neighbour, clipped to the list */
                int to = at + (stk_rng_below(r, 2) ? 1 : -1);
                to = to < 0 ? 0 : to >= k->n_values ? k->n_values - 1 : to;
                snprintf(v, STK_SPACE_VALUE_MAX, "%s", k->values[to]);
            }
        } else if (resample) {
            sample_number(k, stk_rng_uniform(r), v);
        } else { /* Ray's perturbation factors */
            double x = strtod(from->value[i], NULL) * (stk_rng_below(r, 2) ? 0.8 : 1.2);
            if (k->dist == STK_DIST_RANDINT) x = trunc(x); /* int(x), as Ray for integers */
            stk_number_text(x, v);
        }
    }
}
