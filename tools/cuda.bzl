"""Helpers for targets that use CUDA/NCCL only when the toolkit is present and not disabled."""

load("@local_cuda//:defs.bzl", "CUDA_PATH", "HAVE_CUDA")

def if_cuda(if_true, if_false = []):
    """Selects if_true when CUDA was detected and --config=nocuda is not given."""
    if not HAVE_CUDA:
        return if_false
    return select({
        "//:cuda_off": if_false,
        "//conditions:default": if_true,
    })

def cuda_only():
    """target_compatible_with for CUDA-only targets: skipped by `bazel build //...` (not an error)
    without a CUDA toolkit or under --config=nocuda."""
    if not HAVE_CUDA:
        return ["//tools:cuda_disabled"]
    return select({
        "//:cuda_off": ["//tools:cuda_disabled"],
        "//conditions:default": [],
    })

def cuda_object(name, src, hdrs = [], copts = []):
    """Compiles one .cu file with nvcc for sm_90 (H100/H200) + PTX, as <name> (an object file)."""
    native.genrule(
        name = name,
        srcs = [src] + hdrs,
        outs = [src.replace(".cu", ".cu.o")],
        cmd = (CUDA_PATH + "/bin/nvcc -std=c++17 -O2 -Xcompiler -fPIC " +
               "-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 " +
               "-I. -I$(GENDIR) " + " ".join(copts) + " -c $(location " + src + ") -o $@"),
        tags = ["manual"],
    )
