"""`python3 -m falcon.launch TORCHRUN_ARGS... script.py ARGS...`: torchrun, made to work on
Debian 12.

torchrun 1.13 on Python 3.11 fails parsing its default stdio redirects (its `Std` enum lookup); it
works when given `--redirects` and `--tee` explicitly. This adds `--redirects 1 --tee 1` (rank
stdout and stderr to files under the log dir, and still to the console) unless the command line
sets them, then runs torch.distributed.run in this process, exactly as `torchrun` would.
"""

import sys


def torchrun_argv(argv):
    """argv with the redirect flags added before the script when absent."""
    argv = list(argv)
    script_at = next((i for i, a in enumerate(argv) if a.endswith(".py") or a in ("-m",)),
                     len(argv))
    launcher = argv[:script_at]

    def has(flag):
        return any(a == flag or a.startswith(flag + "=") for a in launcher)

    extra = []
    if not has("--redirects") and not has("-r"):
        extra += ["--redirects", "1"]
    if not has("--tee") and not has("-t"):
        extra += ["--tee", "1"]
    return launcher + extra + argv[script_at:]


def main(argv=None):
    from torch.distributed import run
    run.main(torchrun_argv(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
