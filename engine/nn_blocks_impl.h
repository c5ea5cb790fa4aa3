/* Private: the forward of nn_impl.h's composite modules (nn_blocks.c),
 * called by nn.c's forward with the modules' tensors. */
#pragma once

#include "engine/ops.h"

/* x * gate(conv1x1(w2, b2)(act(conv1x1(w1, b1)(mean over H, W of x)))) */
stk_status eng_se_forward(stk_tensor *x, stk_tensor *w1, stk_tensor *b1, stk_tensor *w2,
                          stk_tensor *b2, stk_activation act, stk_activation gate,
                          stk_tensor **out);
/* self-attention over [N, S, D] (torch.nn.MultiheadAttention's parameters) */
stk_status eng_attention_forward(stk_tensor *x, stk_tensor *in_w, stk_tensor *in_b,
                                 stk_tensor *out_w, stk_tensor *out_b, int heads, stk_tensor **out);
stk_status eng_tokens_forward(stk_tensor *x, stk_tensor **out);
stk_status eng_class_token_forward(stk_tensor *token, stk_tensor *x, stk_tensor **out);
stk_status eng_pos_embed_forward(stk_tensor *pos, stk_tensor *x, stk_tensor **out);
stk_status eng_select_token_forward(stk_tensor *x, stk_tensor **out);
