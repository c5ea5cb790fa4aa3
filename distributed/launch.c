/* Reading the launcher's environment (comm.h): which rank this process is. */
#include "distributed/comm.h"

#include <stdlib.h>

/* The integer value of environment variable `name`, or -1. */
static int env_int(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < 0 || x > 1 << 24 ? -1 : (int)x;
}

stk_launch stk_launch_detect(void)
{
    /* (world, rank, local rank) variable names per launcher, most specific first */
    static const struct {
        const char *world, *rank, *local, *name;
    } kinds[] = {
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
         "mpirun (Open MPI)"},
        {"PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "mpiexec (MPICH)"},
        {"PMIX_SIZE", "PMIX_RANK", "PMIX_LOCAL_RANK", "PMIx"},
        {"SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", "srun"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        int world = env_int(kinds[i].world), rank = env_int(kinds[i].rank);
        if (world < 1 || rank < 0 || rank >= world) continue;
        int local = env_int(kinds[i].local);
        return (stk_launch){world, rank, local < 0 ? 0 : local, kinds[i].name};
    }
    return (stk_launch){1, 0, 0, NULL};
}
