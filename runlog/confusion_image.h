/* The confusion matrix as a picture: a heatmap of each true class's row
 * (the share of its images predicted as each class: white 0, dark blue 1),
 * the counts in the cells where they fit, class names down the left and
 * class numbers along the top (`stoke eval --confusion cm.png`, TensorBoard
 * under `stoke train --per-class`).
 *
 *     uint8_t *rgb; int w, h;
 *     STK_TRY(stk_confusion_image(cm, classes, names, &rgb, &w, &h));
 *     STK_TRY(stk_png_encode(rgb, w, h, 3, &png, &n));
 */
#pragma once

#include "common/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* *rgb: malloc'd, *width x *height x 3 bytes. Cells shrink with many
 * classes (at least 4 px: up to 1000 classes fit in ~4,200 px). Errors:
 * INVALID_ARG (classes outside 1..1000), NOMEM. */
stk_status stk_confusion_image(const uint64_t *confusion, int classes, const char *const *names,
                               uint8_t **rgb, int *width, int *height);

#ifdef __cplusplus
}
#endif
