"""Finding and running the `schedgraph` command-line tool (no torch needed).

The package drives the binary through files (the graph format in, the
`--emit-graph` final graph out) rather than loading a library: no compiled
extension, the binary's own checks and messages, and nothing shared between
the Python process and the scheduler but the documented formats.

Which binary (the first that applies):
  1. the `binary=` argument of the call;
  2. the SCHEDGRAPH environment variable;
  3. `schedgraph` on PATH;
  4. when the package is imported from a checkout (python/schedgraph inside
     the repository), the repository's build folders: build/, then the other
     build*/ folders in name order (tools/schedgraph/schedgraph in each).
"""
import os
import shutil
import subprocess
import tempfile

ENV = "SCHEDGRAPH"


class SchedgraphError(RuntimeError):
    """schedgraph (or this package) refused the graph or could not run; the
    message names the file, node and field where the tool does."""


def _repo_candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    if not os.path.isfile(os.path.join(root, "tools", "schedgraph", "schedgraph.c")):
        return []
    builds = sorted(d for d in os.listdir(root) if d.startswith("build") and d != "build")
    return [os.path.join(root, d, "tools", "schedgraph", "schedgraph") for d in ["build"] + builds]


def find_binary(binary=None):
    """The path of the schedgraph executable, by the rule of this module's
    docstring; SchedgraphError when none is found."""
    if binary:
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise SchedgraphError(f"schedgraph binary '{binary}' (binary=) is not an executable file")
        return binary
    env = os.environ.get(ENV)
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise SchedgraphError(f"${ENV}='{env}' is not an executable file")
        return env
    on_path = shutil.which("schedgraph")
    if on_path:
        return on_path
    for c in _repo_candidates():
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise SchedgraphError(
        "schedgraph binary not found: pass binary=PATH, set $SCHEDGRAPH, put schedgraph on "
        "PATH, or build the repository (meson setup build && ninja -C build)")


def option_args(reorder=True, bucket=True, cluster=None, profile=None, bucket_cap=None,
                max_peak_increase=None, extra=()):
    """schedgraph command-line options for these settings (docs: `schedgraph --help`)."""
    args = []
    if not reorder:
        args.append("--no-reorder")
    if not bucket:
        args.append("--no-bucket")
    if cluster:
        args += ["--cluster", str(cluster)]
    if profile:
        args += ["--profile", str(profile)]
    if bucket_cap is not None:
        args += ["--bucket-cap", str(bucket_cap)]
    if max_peak_increase is not None:
        args += ["--max-peak-increase", str(max_peak_increase)]
    return args + [str(a) for a in extra]


def run(graph_path, options=(), binary=None, report=None, emit_graph=None, plan=None,
        timeout=None):
    """Runs `schedgraph [options] graph_path` with the outputs asked for
    (paths or None). Returns its stdout (the summary). Raises SchedgraphError
    with schedgraph's own message on a non-zero exit."""
    exe = find_binary(binary)
    cmd = [exe] + list(options)
    if report:
        cmd += ["--report", str(report)]
    if emit_graph:
        cmd += ["--emit-graph", str(emit_graph)]
    if plan:
        cmd += ["-o", str(plan)]
    cmd.append(str(graph_path))
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except OSError as e:
        raise SchedgraphError(f"cannot run {exe}: {e}") from e
    except subprocess.TimeoutExpired as e:
        raise SchedgraphError(f"{exe} did not finish in {timeout} s") from e
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip() or f"exit status {p.returncode}"
        raise SchedgraphError(msg)
    return p.stdout


def schedule_file(graph_path, options=(), binary=None, report=None, timeout=None):
    """Schedules the graph file and returns the final graph (a dict in the
    graph format: nodes in the scheduled order, bucket ops included)."""
    import json

    with tempfile.TemporaryDirectory(prefix="schedgraph-") as tmp:
        out = os.path.join(tmp, "final.json")
        run(graph_path, options, binary=binary, report=report, emit_graph=out, timeout=timeout)
        with open(out) as f:
            return json.load(f)
