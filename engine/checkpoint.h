/* Checkpoints: a model's state dict, optionally its optimizer's state, and
 * metadata, in one safetensors file (docs/FORMAT.md).
 *
 *     const char *keys[] = {"epoch", "step"}, *values[] = {"3", "1407"};
 *     STK_TRY(stk_checkpoint_save("run/last.safetensors", model, opt, 2, keys, values));
 *
 *     stk_load_report rep;
 *     STK_TRY(stk_checkpoint_load("run/last.safetensors", model, opt, true, &rep));
 *     // transfer learning: strict = false loads what matches and says what did not
 *     stk_checkpoint_load("imagenet.safetensors", model, NULL, false, &rep);
 *     fprintf(stderr, "%s\n", rep.text);
 *
 * Names are the model's state-dict names (torchvision's for resnet18), so
 * `model.load_state_dict(safetensors.torch.load_file(path))` works in
 * PyTorch once the "optim." entries are dropped. BatchNorm's
 * num_batches_tracked is stored as I64, as PyTorch keeps it.
 * Saving is atomic (safetensors.h). Loading validates every name, shape and
 * dtype before it changes anything: a failed strict load leaves the model
 * and optimizer as they were.
 */
#pragma once

#include "engine/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STK_CHECKPOINT_FORMAT  "stoke-checkpoint"
#define STK_CHECKPOINT_VERSION 1

/* Save model (and opt, when not NULL) with extra metadata pairs. Stoke adds
 * format, format_version, model, in_channels, classes, image_size and,
 * with an optimizer, optimizer, lr and optimizer_steps. */
stk_status stk_checkpoint_save(const char *path, const stk_model *m, const stk_optim *opt,
                               int n_meta, const char *const *keys, const char *const *values);

/* The moving average of the weights (train/ema.h) beside the model's: one
 * tensor per model parameter, buffers included, in the model's order, each
 * saved as "ema." + the parameter's name. */
#define STK_CHECKPOINT_EMA_PREFIX "ema."
/* A model imported from ONNX keeps its file in its checkpoints (not in
 * weights-only files) as this U8 tensor: eval, predict, export, info and
 * --resume need nothing else. */
#define STK_CHECKPOINT_ONNX_TENSOR "stoke.onnx_file"
stk_status stk_checkpoint_save_with_ema(const char *path, const stk_model *m, const stk_optim *opt,
                                        stk_tensor *const *ema, int n_meta, const char *const *keys,
                                        const char *const *values);
/* Whether the file holds a moving average ("ema." tensors). */
bool stk_checkpoint_has_ema(const char *path);
/* The file's "ema." tensors into into[i], one per model parameter (the
 * model's own tensors, to evaluate or export the average; or an average's
 * tensors, to resume it): every one must be there with the parameter's
 * shape, checked before anything is copied. Errors: IO, FORMAT (missing,
 * another shape), CORRUPT, NOMEM. */
stk_status stk_checkpoint_load_ema(const char *path, const stk_model *m, stk_tensor *const *into);

/* The model's tensors alone, as PyTorch's state dict (torchvision's names
 * and layouts, num_batches_tracked as I64) with "format": "pt" (what
 * safetensors' PyTorch tooling expects), Stoke's model metadata (model,
 * in_channels, classes, image_size) and the extra pairs: `stoke export
 * --format safetensors`. Stoke's loader does not take it back (no format
 * version): it is for other tools. */
stk_status stk_checkpoint_save_weights(const char *path, const stk_model *m, int n_meta,
                                       const char *const *keys, const char *const *values);

typedef struct stk_load_report {
    int loaded;      /* tensors copied into the model */
    int missing;     /* model tensors absent from the file */
    int unexpected;  /* file tensors the model does not have */
    int mismatched;  /* same name, other shape or dtype: skipped */
    bool optimizer;  /* optimizer state restored */
    char text[4096]; /* a human-readable summary naming what was not loaded */
} stk_load_report;

/* Load into m (and opt, when not NULL and the file has its state). strict:
 * every name, shape and dtype must match and the file's model name (when
 * recorded) must be m's, else nothing changes and the error names the first
 * offending tensor. Not strict: matching tensors are loaded, the rest are
 * counted and named in the report; a PyTorch state dict (metadata "format":
 * "pt", as safetensors.torch.save_file writes: torchvision's weights) is
 * taken too, and not strict is how --init loads them.
 * Errors: STK_ERR_IO, STK_ERR_FORMAT
 * (not a checkpoint, newer format version, mismatch in strict mode),
 * STK_ERR_CORRUPT, STK_ERR_NOMEM. */
stk_status stk_checkpoint_load(const char *path, stk_model *m, stk_optim *opt, bool strict,
                               stk_load_report *report);

/* Before building a model from a checkpoint's metadata (model, in_channels,
 * classes, image_size), check that the checkpoint's own tensors have the
 * shapes that metadata gives the input layer and the classifier, so a
 * metadata value that does not match its tensors (an image_size of 2048 for
 * a 28 px mlp: a 12.9 GB model) is refused before anything large is
 * allocated. Errors: STK_ERR_FORMAT naming the file, the tensor and both
 * shapes. */
struct stk_safetensors;
stk_status stk_checkpoint_check_config(const struct stk_safetensors *f,
                                       const stk_model_config *cfg);

#ifdef __cplusplus
}
#endif
