"""Detects a local CUDA toolkit with NCCL and exposes it as @local_cuda.

Writes @local_cuda//:defs.bzl with HAVE_CUDA (bool) and CUDA_PATH (string), and a BUILD with
cuda_headers, cudart, cublas and nccl targets (empty libraries when CUDA is absent). The toolkit root
is $CUDA_PATH, default /usr/local/cuda; it counts as present when bin/nvcc, include/nccl.h and
lib64/libnccl.so (or lib/) exist; otherwise the build falls back to the CPU-only (Gloo) variant.
"""

def _find_lib_dir(rctx, root):
    for d in ["lib64", "lib"]:
        if rctx.path(root + "/" + d + "/libcudart.so").exists:
            return root + "/" + d
    return None

def _cuda_configure_impl(rctx):
    root = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    have = (rctx.path(root + "/bin/nvcc").exists and
            rctx.path(root + "/include/nccl.h").exists and
            rctx.path(root + "/include/cuda_runtime.h").exists)
    libdir = _find_lib_dir(rctx, root) if have else None
    if libdir == None:
        have = False
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("defs.bzl", "HAVE_CUDA = %s\nCUDA_PATH = \"%s\"\n" % (have, root if have else ""))
    if have:
        rctx.symlink(root + "/include", "include")
        build = """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda_headers", hdrs = glob(["include/**"]), includes = ["include"])
cc_library(name = "cudart", deps = [":cuda_headers"],
           linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcudart"])
cc_library(name = "cublas", deps = [":cuda_headers"],
           linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcublas"])
cc_library(name = "nccl", deps = [":cuda_headers"],
           linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lnccl"])
""".format(lib = libdir)
    else:
        build = """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda_headers")
cc_library(name = "cudart")
cc_library(name = "cublas")
cc_library(name = "nccl")
"""
    rctx.file("BUILD", build)

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    local = True,
    environ = ["CUDA_PATH"],
)
