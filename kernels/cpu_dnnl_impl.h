/* The oneDNN engine and this thread's stream, shared by the primitives of
 * cpu_conv_dnnl.c and cpu_gemm_bf16.c. Streams and primitives are per
 * thread: Debian's oneDNN shares one scratchpad among primitives
 * (DNNL_ENABLE_CONCURRENT_EXEC=OFF), so a primitive must run in the thread
 * that made it. When a thread ends, its plans (through the functions each
 * file registers) and its stream are freed. */
#pragma once

#include <dnnl.h>

/* The CPU engine, or NULL when oneDNN could not make one. */
dnnl_engine_t cpu_dnnl_engine(void);
/* This thread's stream (made on first use), or NULL. */
dnnl_stream_t cpu_dnnl_stream(void);
/* A reorder primitive from `from` to `to`; *out NULL when they are the
 * same layout and type (nothing to do). */
dnnl_status_t cpu_dnnl_make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                    dnnl_primitive_t *out);
/* Run a primitive on this thread's stream and wait for it. */
dnnl_status_t cpu_dnnl_exec(dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args);

/* free_plans frees the calling thread's plans of one file: called in each
 * thread that ends, and at exit in the main thread. Registering the same
 * function again does nothing; at most 4 functions. */
void cpu_dnnl_on_thread_exit(void (*free_plans)(void));
