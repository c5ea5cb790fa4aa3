/* The oneDNN engine and per-thread streams (cpu_dnnl_impl.h). */
#include "kernels/cpu_dnnl_impl.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

static dnnl_engine_t engine;
static _Thread_local dnnl_stream_t stream;
static pthread_key_t thread_exit_key; /* frees a thread's plans when it ends */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*plan_freers[4])(void);
static int n_plan_freers;

void cpu_dnnl_on_thread_exit(void (*free_plans)(void))
{
    pthread_mutex_lock(&registry_lock);
    bool known = false;
    for (int i = 0; i < n_plan_freers; i++) known |= plan_freers[i] == free_plans;
    if (!known && n_plan_freers < 4) plan_freers[n_plan_freers++] = free_plans;
    pthread_mutex_unlock(&registry_lock);
}

static void free_thread(void)
{
    pthread_mutex_lock(&registry_lock);
    int n = n_plan_freers;
    pthread_mutex_unlock(&registry_lock);
    for (int i = 0; i < n; i++) plan_freers[i]();
    if (stream) dnnl_stream_destroy(stream);
    stream = NULL;
}

static void on_thread_exit(void *unused)
{
    (void)unused;
    free_thread();
}

static void once_init(void)
{
    if (pthread_key_create(&thread_exit_key, on_thread_exit) != 0) return;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) engine = NULL;
}

dnnl_engine_t cpu_dnnl_engine(void)
{
    pthread_once(&once, once_init);
    return engine;
}

dnnl_stream_t cpu_dnnl_stream(void)
{
    if (!stream && cpu_dnnl_engine()) {
        if (dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success)
            stream = NULL;
        else
            pthread_setspecific(thread_exit_key, &stream); /* any non-NULL value */
    }
    return stream;
}

dnnl_status_t cpu_dnnl_make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                    dnnl_primitive_t *out)
{
    *out = NULL;
    if (dnnl_memory_desc_equal(from, to)) return dnnl_success;
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, cpu_dnnl_engine(), to,
                                                         cpu_dnnl_engine(), NULL);
    if (s != dnnl_success) return s;
    s = dnnl_primitive_create(out, pd);
    dnnl_primitive_desc_destroy(pd);
    return s;
}

dnnl_status_t cpu_dnnl_exec(dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args)
{
    dnnl_status_t s = dnnl_primitive_execute(prim, stream, nargs, args);
    if (s == dnnl_success) s = dnnl_stream_wait(stream);
    return s;
}

/* Free the main thread's plans at exit (other threads' go as they end) so
 * that LeakSanitizer reports only real leaks. */
__attribute__((destructor)) static void free_main_thread(void)
{
    free_thread();
    if (engine) dnnl_engine_destroy(engine);
    engine = NULL;
}
