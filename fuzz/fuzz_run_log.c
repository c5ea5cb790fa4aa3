/* stoke plot's input: a run directory's metrics.csv and steps.csv (the
 * input: the two files' bytes split at the first NUL; no NUL: no
 * steps.csv), parsed and drawn as stoke plot draws them (any numbers:
 * NaN, infinities, huge, one point, no point). */
#include "runlog/run_log.h"
#include "runlog/svg_chart.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nul = memchr(text, 0, size);
    size_t m_len = nul ? (size_t)(nul - text) : size;
    stk_run_log *log;
    if (stk_run_log_parse("run", text, m_len, nul ? nul + 1 : NULL, nul ? size - m_len - 1 : 0,
                          &log) != STK_OK)
        return 0;
    stk_chart_line lines[4] = {{stk_run_log_epoch(log, "train_loss"), "red", false},
                               {stk_run_log_epoch_at_steps(log, "val_loss"), "blue", true},
                               {stk_run_log_step(log, "loss"), "green", false},
                               {stk_run_log_step(log, "lr"), "black", true}};
    stk_svg *s;
    if (stk_svg_begin(400, 300, &s) == STK_OK) {
        stk_svg_panel(s, (stk_rect){50, 30, 300, 200}, "t", "x", lines, 4);
        char *svg;
        size_t len;
        if (stk_svg_end(s, &svg, &len) == STK_OK) free(svg);
    }
    stk_run_log_free(log);
    return 0;
}
