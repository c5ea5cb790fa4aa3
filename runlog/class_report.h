/* Per-class figures from a confusion matrix, as scikit-learn's
 * classification_report and confusion_matrix give them, and the matrix as
 * CSV, JSON or Markdown text (`stoke eval --per-class`, TensorBoard).
 *
 *     uint64_t cm[C * C];                // cm[true * C + predicted]
 *     STK_TRY(stk_trainer_evaluate_per_class(t, loader, NULL, &r, cm));
 *     stk_class_figures f[C];
 *     stk_class_report(cm, C, f);         // f[k].precision, .recall, .f1
 *     char *csv = stk_class_confusion_csv(cm, C, names);
 */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_class_figures {
    uint64_t images;    /* of this class (row sum; sklearn's "support") */
    uint64_t predicted; /* predicted as this class (column sum) */
    uint64_t correct;   /* both (the diagonal) */
    double recall;      /* correct / images: the class's top-1 accuracy */
    double precision;   /* correct / predicted */
    double f1;          /* 2 precision recall / (precision + recall) */
} stk_class_figures;

/* Each class's figures; a ratio whose denominator is 0 is NaN (undefined:
 * sklearn reports 0 with a warning). */
void stk_class_report(const uint64_t *confusion, int classes, stk_class_figures *out);

/* The class's name: names[k], or its index when names is NULL (buf). */
const char *stk_class_name(const char *const *names, int k, char buf[16]);

/* malloc'd text (NULL: out of memory). CSV: a header "true\predicted" then
 * the names, one row per true class; JSON: {"classes": [...], "matrix":
 * [[...], ...], "per_class": [{"class", "images", "predicted", "correct",
 * "precision", "recall", "f1"}, ...]} (NaN as null); Markdown: a table of
 * the per-class figures (TensorBoard's text tab). Names are quoted or
 * escaped as each format needs. */
char *stk_class_confusion_csv(const uint64_t *confusion, int classes, const char *const *names);
char *stk_class_report_json(const uint64_t *confusion, int classes, const char *const *names);
char *stk_class_report_markdown(const uint64_t *confusion, int classes, const char *const *names);

#ifdef __cplusplus
}
#endif
