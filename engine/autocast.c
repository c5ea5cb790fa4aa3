/* The autocast scope (autocast.h) and the f16 operand copies of the ops. */
#include "engine/autocast.h"

#include "engine/ops_impl.h"

static _Thread_local int autocast_depth;

void stk_autocast_begin(void) { autocast_depth++; }

void stk_autocast_end(void)
{
    if (autocast_depth > 0) autocast_depth--;
}

bool stk_autocast_active(void) { return autocast_depth > 0; }

bool eng_autocast_f16(const stk_backend *be) { return autocast_depth > 0 && be->gemm_batched_f16; }

bool eng_autocast_bf16(const stk_backend *be)
{
    return autocast_depth > 0 && !be->gemm_batched_f16 && be->gemm_batched_bf16;
}

stk_status eng_half_copy(const stk_backend *be, const stk_tensor *t, stk_tensor **out)
{
    stk_status st = eng_tensor_new(stk_tensor_device(t), STK_F16, t->ndim, t->shape, false, out);
    if (st == STK_OK)
        be->convert(STK_F16, tensor_ptr(*out), STK_F32, tensor_ptr(t), stk_tensor_numel(t));
    return st;
}
