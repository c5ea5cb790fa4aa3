/* Loads a state dict (a torchvision model's, saved as safetensors) into
 * Stoke's model of that name the way `stoke train --init` does, and checks
 * the eval-mode logits for the input in IO against the ones IO holds.
 * Every tensor must load (none missing, unexpected or of another shape).
 *
 *   init_logits MODEL SIZE WEIGHTS.safetensors IO.safetensors  (IO: input, logits)
 * Prints the largest difference; exits 1 above 1e-4 of the largest logit
 * (or 1e-4 where the logits are all below 1). */
#include "engine/autograd.h"
#include "engine/checkpoint.h"
#include "engine/nn.h"
#include "storage/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != STK_OK) {                                                                    \
            fprintf(stderr, "init_logits: %s\n", stk_last_error());                                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* A f32 tensor of f as a Stoke tensor (its shape kept). */
static stk_status tensor_of(const stk_safetensors *f, const char *name, stk_tensor **out)
{
    const stk_st_entry *e = stk_safetensors_find(f, name);
    if (!e || e->dtype != STK_ST_F32)
        return stk_error(STK_ERR_FORMAT, "no f32 tensor '%s' in the io file", name);
    return stk_tensor_from_host(STK_F32, e->ndim, e->shape, stk_safetensors_data(f, e), out);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: init_logits MODEL SIZE WEIGHTS.safetensors IO.safetensors\n");
        return 2;
    }
    stk_model_config cfg = {
        .name = argv[1], .in_channels = 3, .classes = 10, .image_size = atoi(argv[2])};
    stk_model *m;
    CHECK(stk_model_create(&cfg, &m));
    stk_load_report rep;
    CHECK(stk_checkpoint_load(argv[3], m, NULL, false, &rep));
    if (rep.missing || rep.unexpected || rep.mismatched || rep.loaded != stk_model_param_count(m)) {
        fprintf(stderr, "init_logits: %s\n", rep.text);
        return 1;
    }
    stk_safetensors *io;
    CHECK(stk_safetensors_read(argv[4], &io));
    stk_tensor *x, *want, *y;
    CHECK(tensor_of(io, "input", &x));
    CHECK(tensor_of(io, "logits", &want));
    stk_model_train(m, false);
    stk_no_grad_begin();
    CHECK(stk_model_forward(m, x, &y));
    const float *a = stk_tensor_data(y), *b = stk_tensor_data(want);
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < stk_tensor_numel(want); i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    int rc =
        stk_tensor_numel(y) == stk_tensor_numel(want) && diff <= 1e-4 * fmax(1.0, scale) ? 0 : 1;
    printf(
        "%s at %s px: %d tensors loaded, max |logit - torchvision's| %.2e (logits up to %.2f)%s\n",
        argv[1], argv[2], rep.loaded, diff, scale, rc ? ": FAIL (> 1e-4 of the largest)" : "");
    stk_tensor_release(x);
    stk_tensor_release(want);
    stk_tensor_release(y);
    stk_safetensors_free(io);
    stk_model_destroy(m);
    return rc;
}
