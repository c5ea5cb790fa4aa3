/* stoke devices: the compute devices this build and machine offer. */
#include "kernels/backend.h"
#include "device/device_query.h"
#include "common/json.h"
#include "tools/cli.h"
#include "tools/flags.h"

#include <inttypes.h>
#include <string.h>

typedef struct devices_args {
    bool json;
} devices_args;

static const stk_flag flags[] = {
    STK_FLAG_SECTION("options"),
    STK_FLAG_JSON(
        devices_args, json,
        "one JSON object: cpu (text), cpu_bf16 (the instruction set oneDNN\n"
        "runs bf16 with for --amp on the CPU, or null), cuda_built (the CUDA backend module\n"
        "loaded), cuda_module (its file, or why not), cuda_backend (what it was\n"
        "built with), cuda_runtime, cuda_driver,\n"
        "gpus [{name, memory_bytes, compute_capability, multiprocessors}],\n"
        "cuda_reason (when there is no GPU)"),
    STK_FLAG_END};

static const stk_cli cli = {
    .cmd = "devices",
    .usage = "stoke devices [--json]",
    .about = "List the devices stoke train can use: the CPU backend (cores, oneDNN and the\n"
             "instruction set it runs, and whether it has bf16 instructions for --amp) and every "
             "CUDA GPU (name, memory, compute capability,\n"
             "driver and runtime versions). The CUDA backend is a module, libstoke_cuda.so,\n"
             "loaded only by commands that use a GPU (and by this one): says which file was\n"
             "loaded, or plainly why no GPU is usable (no CUDA backend in this build, CUDA\n"
             "libraries missing, no NVIDIA driver, no device). STOKE_CUDA_MODULE=FILE loads\n"
             "the module from FILE instead of the library search path.\n",
    .flags = flags,
    .max_args = 0};

static int devices_main(int argc, char **argv)
{
    devices_args a = {0};
    char **pos;
    int n_pos;
    int parsed = stk_cli_parse(&cli, &a, argc, argv, &pos, &n_pos);
    if (parsed >= 0) return parsed;
    bool json = a.json;
    char cpu[256];
    stk_cpu_describe(cpu, sizeof cpu);
    stk_cuda_report r;
    stk_cuda_query(&r);
    if (json) {
        printf("{\"cpu\": ");
        stk_json_write_string(stdout, cpu);
        printf(", \"cpu_bf16\": ");
        if (stk_cpu_bf16_isa())
            stk_json_write_string(stdout, stk_cpu_bf16_isa());
        else
            printf("null");
        printf(", \"cuda_built\": %s, \"cuda_module\": ", r.built ? "true" : "false");
        stk_json_write_string(stdout, r.module);
        printf(", \"cuda_backend\": ");
        stk_json_write_string(stdout, r.backend);
        printf(", \"cuda_runtime\": %d, \"cuda_driver\": %d, \"gpus\": [", r.runtime_version,
               r.driver_version);
        for (int i = 0; i < r.count; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            stk_json_write_string(stdout, r.gpus[i].name);
            printf(", \"memory_bytes\": %" PRIu64 ", \"compute_capability\": \"%d.%d\", "
                   "\"multiprocessors\": %d}",
                   r.gpus[i].memory_bytes, r.gpus[i].cc_major, r.gpus[i].cc_minor,
                   r.gpus[i].multiprocessors);
        }
        printf("]");
        if (!r.count) {
            printf(", \"cuda_reason\": ");
            stk_json_write_string(stdout, r.reason);
        }
        printf("}\n");
        return STK_EXIT_OK;
    }
    printf("cpu     %s\n", cpu);
    if (r.built) {
        printf("cuda    %s, loaded from %s\n", r.backend, r.module);
        if (r.driver_version)
            printf("        runtime %d.%d, driver %d.%d\n", r.runtime_version / 1000,
                   r.runtime_version % 1000 / 10, r.driver_version / 1000,
                   r.driver_version % 1000 / 10);
        else
            printf("        runtime %d.%d, no driver\n", r.runtime_version / 1000,
                   r.runtime_version % 1000 / 10);
    } else {
        printf("cuda    backend %s\n", r.module);
    }
    for (int i = 0; i < r.count; i++)
        printf("gpu %d   %s, %.1f GiB, compute capability %d.%d, %d SMs\n", i, r.gpus[i].name,
               r.gpus[i].memory_bytes / 1073741824.0, r.gpus[i].cc_major, r.gpus[i].cc_minor,
               r.gpus[i].multiprocessors);
    if (!r.count) printf("gpu     none: %s\n", r.reason);
    return STK_EXIT_OK;
}

const stk_command stk_cmd_devices = {"devices", "list the CPU and the CUDA GPUs training can use",
                                     &cli, devices_main};
