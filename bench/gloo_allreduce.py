#!/usr/bin/python3
"""The all-reduce bandwidth of torch.distributed's gloo backend, sized and
printed like `bench_ddp allreduce`, for the same table:

    mpirun -np 2 /usr/bin/python3 bench/gloo_allreduce.py [--max-mb 64] [--seconds 0.5]

Ranks come from Open MPI's environment (OMPI_COMM_WORLD_RANK/SIZE); the
rendezvous is TCP on 127.0.0.1 (one machine)."""
import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-mb", type=float, default=64)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port, rank=rank,
                            world_size=world)
    torch.set_num_threads(1)
    if rank == 0:
        print("torch %s gloo, %d ranks" % (torch.__version__, world))
        print("%12s %10s %12s" % ("bytes", "gloo us", "gloo GB/s"))
    n = 1024
    max_n = int(a.max_mb * 1048576 / 4)
    while n <= max_n:
        buf = torch.ones(n)
        t0 = time.perf_counter()
        for _ in range(5):
            dist.all_reduce(buf)
        loop = torch.tensor([int(a.seconds / ((time.perf_counter() - t0) / 5)) + 1])
        dist.broadcast(loop, 0)  # the same count on every rank
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(int(loop)):
            dist.all_reduce(buf)
        t = (time.perf_counter() - t0) / int(loop)
        if rank == 0:
            print("%12d %10.1f %12.3f" % (n * 4, t * 1e6, n * 4 / t / 1e9))
        n *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
