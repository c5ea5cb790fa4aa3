#include "common/progress.h"

#include "common/clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void stk_format_duration(double seconds, char *buf, size_t size)
{
    if (!(seconds >= 0) || seconds > 1e8) {
        snprintf(buf, size, "--:--");
        return;
    }
    long s = lround(seconds);
    if (s >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
}

void stk_progress_init(stk_progress *p, const char *label, uint64_t total, FILE *out)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    snprintf(p->label, sizeof p->label, "%s", label);
    p->total = total;
    p->start = stk_clock_sec();
    p->last_draw = p->start;
    p->plain_interval = 5.0;
    p->enabled = out != NULL;
    p->tty = out && isatty(fileno(out));
    const char *mode = getenv("STOKE_PROGRESS");
    if (mode && strcmp(mode, "plain") == 0) p->tty = false;
    if (mode && strcmp(mode, "tty") == 0) p->tty = true;
    if (mode && strcmp(mode, "off") == 0) p->enabled = false;
}

void stk_progress_set_extra(stk_progress *p, const char *text)
{
    snprintf(p->extra, sizeof p->extra, "%s", text ? text : "");
}

static void draw(stk_progress *p, double now, bool final)
{
    double elapsed = now - p->start;
    double rate = elapsed > 0 ? (double)p->done / elapsed : 0;
    char eta[32];
    if (final)
        stk_format_duration(elapsed, eta, sizeof eta);
    else
        stk_format_duration(rate > 0 ? (double)(p->total - p->done) / rate : -1, eta, sizeof eta);
    const char *eta_label = final ? "in" : "ETA";
    const char *sep = p->extra[0] ? "  " : "";
    if (p->tty) {
        enum { WIDTH = 24 };
        char bar[WIDTH + 1];
        int fill = p->total ? (int)((double)p->done / (double)p->total * WIDTH) : WIDTH;
        for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
        bar[WIDTH] = '\0';
        fprintf(p->out, "\r%s [%s] %llu/%llu %.0f/s %s %s%s%s\033[K%s", p->label, bar,
                (unsigned long long)p->done, (unsigned long long)p->total, rate, eta_label, eta,
                sep, p->extra, final ? "\n" : "");
    } else {
        double pct = p->total ? 100.0 * (double)p->done / (double)p->total : 100.0;
        fprintf(p->out, "%s: %llu/%llu (%.0f%%) %.0f/s %s %s%s%s\n", p->label,
                (unsigned long long)p->done, (unsigned long long)p->total, pct, rate, eta_label,
                eta, sep, p->extra);
    }
    fflush(p->out);
    p->last_draw = now;
}

void stk_progress_update(stk_progress *p, uint64_t done)
{
    p->done = done;
    if (!p->enabled) return;
    double now = stk_clock_sec();
    double interval = p->tty ? 0.1 : p->plain_interval;
    if (now - p->last_draw >= interval) draw(p, now, false);
}

void stk_progress_finish(stk_progress *p)
{
    if (!p->enabled) return;
    draw(p, stk_clock_sec(), true);
    p->enabled = false;
}

void stk_progress_clear(stk_progress *p)
{
    if (p->enabled && p->tty && p->out) fputs("\r\033[K", p->out);
}
