/* A timeline of a run in Chrome's trace event format (Perfetto,
 * chrome://tracing): `stoke train --trace FILE.json`, `stoke bench --trace`.
 *
 *     stk_trace_options o = {.wait_steps = 5, .active_steps = 20};
 *     STK_TRY(stk_trace_start(&o));                  // before the threads to trace start
 *     ...
 *     stk_trace_step(step);                      // the trainer, at each step: the schedule
 *     stk_trace_begin("forward", "step");        // any thread: a span, nested
 *     ...
 *     stk_trace_end();
 *     stk_trace_async_begin("read", "io", id);   // overlapping intervals (io_uring reads)
 *     stk_trace_counter("batches ready", 3);
 *     stk_trace_flow('s', batch_id);             // an arrow from the enclosing span ...
 *     stk_trace_flow('f', batch_id);             // ... to the enclosing span elsewhere
 *     ...
 *     stk_trace_summary sum;
 *     STK_TRY(stk_trace_finish("trace.json", &sum));  // once every traced thread is joined
 *
 * Cost. Off (no stk_trace_start): each call is one relaxed load and a
 * branch. On: events go to a buffer per thread (blocks of 4096, linked, never
 * moved), no lock after a thread's first event; at most 1M events per thread
 * (later ones are counted as dropped). Timestamps: CLOCK_MONOTONIC.
 * The schedule: with wait_steps W and active_steps A (0: unbounded), events
 * are recorded from step W to step W + A - 1 (before the first step too when
 * W is 0). A span is kept whole when it began while recording.
 * In CUDA builds every span is also an NVTX range (nvtx3, header-only), so
 * Nsight Systems shows the same names, whether or not a trace is recorded.
 *
 * Names and categories must be string constants (kept by pointer); `args`
 * strings are copied (up to 47 bytes). Flows whose two ends were not both
 * recorded are left out of the file.
 */
#pragma once

#include "common/status.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stk_trace_options {
    int64_t wait_steps, active_steps; /* the schedule; active 0: to the end */
    bool ops;                         /* per-op spans (engine layers, backward nodes) */
    bool start_paused;                /* record nothing before the first stk_trace_step */
} stk_trace_options;

typedef struct stk_trace_summary {
    uint64_t events, dropped, threads;
    double seconds; /* recorded span of time */
} stk_trace_summary;

/* 0 off, 1 configured (spans tracked, not recorded), 2 recording. */
extern int stk_trace_state_;
static inline bool stk_trace_enabled(void)
{
    return __atomic_load_n(&stk_trace_state_, __ATOMIC_RELAXED) != 0;
}
/* The same as a call, for code outside this library's objects (the CUDA
 * backend module reaches it through device/cuda_module_impl.h's table). */
bool stk_trace_active(void);

/* Start tracing (recording now unless wait_steps > 0). Errors: INVALID_ARG
 * (already started). */
stk_status stk_trace_start(const stk_trace_options *o);
/* Parse "WAIT,ACTIVE" (two counts >= 0) into o's schedule. Errors:
 * INVALID_ARG ("--trace-steps 5: expected WAIT,ACTIVE (two counts >= 0)"). */
stk_status stk_trace_parse_schedule(const char *text, stk_trace_options *o);
/* Per-op spans asked for (--trace-ops) and tracing on. */
bool stk_trace_ops(void);
/* A step begins (the trainer; `stoke bench`: a batch): switches recording
 * per the schedule, counting steps from stk_trace_start. */
void stk_trace_step(void);

/* The recorder behind the inline calls below (which return at once when
 * tracing is off, so that the loader's per-sample spans cost a load and a
 * branch; NVTX builds also push and pop their range). */
void stk_trace_begin_(const char *name, const char *cat, const char *args);
void stk_trace_end_(void);
void stk_trace_event_(char ph, const char *name, const char *cat, uint64_t id, double value);
#ifdef STOKE_NVTX
void stk_trace_nvtx_push_(const char *name);
void stk_trace_nvtx_pop_(void);
#else
static inline void stk_trace_nvtx_push_(const char *name) { (void)name; }
static inline void stk_trace_nvtx_pop_(void) {}
#endif

static inline void stk_trace_begin_args(const char *name, const char *cat, const char *args)
{
    stk_trace_nvtx_push_(name);
    if (stk_trace_enabled()) stk_trace_begin_(name, cat, args);
}
static inline void stk_trace_begin(const char *name, const char *cat)
{
    stk_trace_begin_args(name, cat, NULL);
}
static inline void stk_trace_end(void)
{
    stk_trace_nvtx_pop_();
    if (stk_trace_enabled()) stk_trace_end_();
}
/* Overlapping intervals keyed by id (unique among spans of the same name). */
static inline void stk_trace_async_begin(const char *name, const char *cat, uint64_t id)
{
    if (stk_trace_enabled()) stk_trace_event_('b', name, cat, id, 0);
}
static inline void stk_trace_async_end(const char *name, const char *cat, uint64_t id)
{
    if (stk_trace_enabled()) stk_trace_event_('e', name, cat, id, 0);
}
/* A counter's value now (evaluate an expensive value only when
 * stk_trace_enabled()). */
static inline void stk_trace_counter(const char *name, double value)
{
    if (stk_trace_enabled()) stk_trace_event_('C', name, "counter", 0, value);
}
/* phase 's' (start), 't' (a step through), 'f' (finish): bound to the
 * innermost open span of the calling thread. */
static inline void stk_trace_flow(char phase, uint64_t id)
{
    if (stk_trace_enabled()) stk_trace_event_(phase, "batch", "flow", id, 0);
}
/* A span measured elsewhere (a device's copy stream, timed with its events)
 * on a track of its own named `track` (a constant), from t0_ns to t1_ns on
 * CLOCK_MONOTONIC (stk_clock_ns); flow: a flow id to pass through it ('t'),
 * 0 for none. Spans of one track must not overlap. */
void stk_trace_track_span(const char *track, const char *name, const char *cat, uint64_t t0_ns,
                          uint64_t t1_ns, uint64_t flow);
/* This thread's name in the trace ("loader worker 0"); copied, kept for
 * the thread's later traces too. */
void stk_trace_thread_name(const char *name);

/* Stop, write the JSON file (rank: the trace's process id), free every
 * buffer. Call when the threads that traced are joined or idle. Errors: IO
 * (naming the file), NOMEM; tracing is off afterwards either way. */
stk_status stk_trace_finish(const char *path, stk_trace_summary *out);
/* Stop and drop everything (error paths). */
void stk_trace_discard(void);

#ifdef __cplusplus
}
#endif
