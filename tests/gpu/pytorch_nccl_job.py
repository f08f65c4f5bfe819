"""A one-GPU PyTorch job on the NCCL backend under the falcon package (and, from
run_pytorch_gpu.sh, the NCCL interposer by LD_PRELOAD): what the GPU path of docs/pytorch.md
promises, run for real.

Per step, inside fs.step(i): a CUDA matmul, an all_reduce and a broadcast on the NCCL world (the
interposer times them), and an all_reduce of a CPU tensor on a Gloo group (the package times it).
At the end: the session's validation GEMM on its device (CUDA events) beside the same GEMM on the
CPU, and a JSON line "result {...}" with what was issued, for run_pytorch_gpu.sh to compare with
what reached the agent.

  --init lazy   dist.init_process_group("nccl"): NCCL's communicator is made at the first op,
                after falcon.init.
  --init eager  init_process_group(..., device_id=...): torch makes the communicator at once,
                before falcon.init (the interposer must then use the package's session).

One rank (world size 1): NCCL refuses two ranks on one GPU. Needs torch with CUDA and a GPU.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import falcon
from falcon import validation


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--init", choices=("lazy", "eager"), required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--elements", type=int, default=1 << 20)
    p.add_argument("--gemm", type=int, default=4096)
    a = p.parse_args()

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    if a.init == "eager":
        dist.init_process_group("nccl", device_id=dev)
    else:
        dist.init_process_group("nccl")
    fs = falcon.init(global_micro_batches=1, required=True)
    gloo = dist.new_group([0], backend="gloo")
    gloo_id = fs.register_group(gloo, "dp", name="gloo-dp")
    world_id = fs.comm_id(None)  # The package's id for the NCCL world: it must time nothing.

    x = torch.ones(a.elements, device=dev)
    w = torch.randn(1024, 1024, device=dev)
    h = torch.ones(256)
    nccl_ops = gloo_ops = 0
    checksum = 0.0
    for i in range(a.steps):
        with fs.step(i):
            w = torch.matmul(w, w) / 1024.0
            x.fill_(1.0)
            dist.all_reduce(x)
            dist.broadcast(x, 0)
            nccl_ops += 2
            h.fill_(float(i))
            dist.all_reduce(h, group=gloo)
            gloo_ops += 1
            checksum += float(x.sum().item()) + float(h.sum().item())
    torch.cuda.synchronize()

    gpu_ns, gpu_flops = validation.gemm(a.gemm, a.gemm, a.gemm, 3, fs.now_ns, device=fs.device)
    cpu_n = 1024
    cpu_ns, cpu_flops = validation.gemm(cpu_n, cpu_n, cpu_n, 2, fs.now_ns, device="cpu")
    stats = fs.stats()
    fs.close()
    dist.destroy_process_group()
    print("result " + json.dumps({
        "init": a.init, "steps": a.steps, "nccl_ops": nccl_ops, "gloo_ops": gloo_ops,
        "gloo_comm": str(gloo_id), "package_world_comm": str(world_id),
        "device": str(fs.device), "checksum": checksum,
        "gpu_gemm": {"n": a.gemm, "ns": gpu_ns, "tflops": gpu_flops / 1e12},
        "cpu_gemm": {"n": cpu_n, "ns": cpu_ns, "tflops": cpu_flops / 1e12},
        "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "shim_stats": {k: v for k, v in stats.items() if isinstance(v, int)},
    }), flush=True)
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    print(f"pytorch_nccl_job: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    sys.exit(rc)
