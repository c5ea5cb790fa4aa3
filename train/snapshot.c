/* The weights' host copy (snapshot_impl.h). */
#include "train/snapshot_impl.h"

#include <stdlib.h>

static size_t param_bytes(const stk_tensor *t)
{
    return (size_t)stk_tensor_numel(t) * stk_dtype_size(stk_tensor_dtype(t));
}

stk_status stk_weights_snapshot_take(stk_weights_snapshot *s, stk_model *m)
{
    if (!s->host) {
        s->n = stk_model_param_count(m);
        if (!(s->host = calloc((size_t)(s->n ? s->n : 1), sizeof *s->host)))
            return stk_error(STK_ERR_NOMEM, "no memory for a copy of the model's weights");
    }
    for (int i = 0; i < s->n; i++) {
        stk_tensor *t = stk_model_param(m, i)->value;
        size_t bytes = param_bytes(t);
        if (!s->host[i] && !(s->host[i] = malloc(bytes ? bytes : 1)))
            return stk_error(STK_ERR_NOMEM, "no memory for a copy of the model's weights");
        STK_TRY(stk_tensor_to_host(t, s->host[i], bytes));
    }
    return STK_OK;
}

stk_status stk_weights_snapshot_restore(const stk_weights_snapshot *s, stk_model *m)
{
    for (int i = 0; i < s->n; i++) {
        stk_tensor *t = stk_model_param(m, i)->value;
        STK_TRY(stk_tensor_copy_from_host(t, s->host[i], param_bytes(t)));
    }
    return STK_OK;
}

void stk_weights_snapshot_free(stk_weights_snapshot *s)
{
    for (int i = 0; s->host && i < s->n; i++) free(s->host[i]);
    free(s->host);
}
