"""JSON files the package and its launcher hand each other (restart requests, relaunch layouts):
read with errors that name the file, written atomically."""

import json
import os


def load(path, error):
    """The JSON value in the file at `path`; `error` (an exception class) naming the file when
    it is not UTF-8 JSON within Python's limits (digits, nesting); OSError when unreadable."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except RecursionError:
        raise error(f"{path}: JSON nested too deep") from None
    except ValueError as e:  # JSONDecodeError, and an integer over Python's digit limit.
        raise error(f"{path}: not JSON ({e})") from None


def write(path, value):
    """Writes `value` as JSON to `path` atomically (a temporary file, synced, then renamed: a
    reader never sees half of it). OSError when it cannot; no temporary file is left."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(value, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
