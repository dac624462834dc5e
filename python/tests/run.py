"""Runs the Python package's tests: `run.py core [SCHEDGRAPH]` (no torch
needed) or `run.py torch [SCHEDGRAPH]` (exits 77, skip, when torch is not
importable). SCHEDGRAPH: the binary to test (else $SCHEDGRAPH, else the
package's lookup rule). SCHEDGRAPH_TEST_PYTHON names another interpreter to
run under (one with torch, e.g. a venv outside the repository).
SCHEDGRAPH_MKRING: tests/runtime/mkring, for the ring tests (test_ring.py;
else the one beside the binary's build, else they are skipped).
Prints 'N passed, N failed' last; exit status 0 when all passed."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("core", "torch"):
        print(__doc__)
        return 2
    other = os.environ.pop("SCHEDGRAPH_TEST_PYTHON", None)
    if other:  # once: the variable is gone in the new process
        os.execve(other, [other] + sys.argv, os.environ)
    if len(sys.argv) > 2:
        os.environ["SCHEDGRAPH"] = os.path.abspath(sys.argv[2])
    sys.path.insert(0, os.path.dirname(HERE))
    sys.path.insert(0, HERE)
    which = sys.argv[1]
    if which == "torch":
        try:
            import torch  # noqa: F401
        except ImportError:
            print(f"SKIP: torch is not importable by {sys.executable} "
                  f"(set SCHEDGRAPH_TEST_PYTHON to an interpreter with torch)")
            return 77
    names = {"core": ["test_core"], "torch": ["test_torch", "test_ring"]}[which]
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    bad = len(result.failures) + len(result.errors)
    skipped = len(result.skipped)
    print(f"{result.testsRun - bad - skipped} passed, {bad} failed, {skipped} skipped")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
