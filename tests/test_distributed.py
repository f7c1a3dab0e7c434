"""myir.distributed on 2 MPI processes (`mpiexec -n 2`, from the `dist` extra): data-parallel
gradients equal full-batch ones, training on 2 processes follows training on 1, collectives
reduce and broadcast nested trees, trees that differ between ranks raise on every rank, and a
rank that raises ends the job.  Each launch runs the programs of tests/mpi_programs.py under
a timeout: a hang fails the test.  MPI missing fails the tests (CI installs `[dist]`)."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mpi4py  # noqa: F401  (the dist extra: its absence is a failure, not a skip)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 60


@pytest.fixture
def env(tmp_path):
    (tmp_path / "out").mkdir()
    return {**os.environ, "PYTHONPATH": ROOT, "MYIR_CACHE_DIR": str(tmp_path / "cache"),
            "MYIR_TEST_OUT": str(tmp_path / "out"),
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "TVM_NUM_THREADS": "1"}


def mpiexec(n: int, *command: str, env, check=True) -> subprocess.CompletedProcess:
    launcher = shutil.which("mpiexec")
    assert launcher, "mpiexec not found: pip install -e '.[dist]' (mpi4py and mpich)"
    out = subprocess.run([launcher, "-n", str(n), sys.executable, *command], env=env,
                         capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def run(program: str, env) -> list[dict]:
    """What each rank of tests/mpi_programs.py's `program` on 2 processes reported."""
    mpiexec(2, "-m", "tests.mpi_programs", program, env=env)
    return ranks(env)


def ranks(env) -> list[dict]:
    """What each rank reported (tests/mpi_programs.py), by rank."""
    out = env["MYIR_TEST_OUT"]
    found = [json.load(open(os.path.join(out, name))) for name in os.listdir(out)]
    return sorted(found, key=lambda r: r["rank"])


def test_the_data_parallel_gradient_is_the_full_batch_gradient(env):
    first, second = run("data_parallel_gradient", env)
    assert (first["rows"], second["rows"]) == (100, 99)      # uneven: 199 rows
    assert first["error"] < 1e-12 and second["error"] < 1e-12
    assert first["digest"] == second["digest"]


def test_two_processes_train_as_one_with_the_same_parameters_on_both(env, tmp_path):
    train = ["examples/distributed_train.py", "--steps", "200", "--lr", "0.3"]
    one = subprocess.run([sys.executable, *train, "--save", str(tmp_path / "one.npz")],
                         env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert one.returncode == 0, one.stderr
    two = mpiexec(2, *train, "--check", "--save", str(tmp_path / "two.npz"), env=env)
    assert "2 processes" in two.stdout and "1 process," in one.stdout
    one, two = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert one.files == two.files and len(one["losses"]) == 200
    for name in one.files:
        assert np.max(np.abs(one[name] - two[name])) <= 1e-9 * np.max(np.abs(one[name])), name


def test_allreduce_and_broadcast_of_nested_trees(env):
    results = run("reductions", env)
    for r in results:
        assert r["sum"] and r["mean"] and r["weighted"] and r["kinds"] and r["broadcast"] \
            and r["empty"] and r["pieces"] and r["held"] and r["reused"] \
            and r["direct"], r
    assert results[0]["digests"] == results[1]["digests"]   # the same bits on every rank


def test_trees_that_differ_between_ranks_raise_on_every_rank(env):
    results = run("mismatched", env)
    assert len(results) == 2
    for r in results:
        errors = r["errors"]
        assert set(errors) == {f"{case} {call}" for case in ("shape", "dtype", "structure", "not a number")
                               for call in ("allreduce", "broadcast")}
        assert "rank 0 has [1]: a float64 array of shape (2,); rank 1 has [1]: a float64 " \
               "array of shape (3,)" in errors["shape allreduce"]
        assert "rank 0 has ['a']: a float64 array" in errors["dtype broadcast"]
        assert "rank 1 has ['a']: a float32 array" in errors["dtype broadcast"]
        assert "rank 0 has ['b']" in errors["structure allreduce"]
        assert "rank 1 has [1]: str 'two', not a number" in errors["not a number broadcast"]
        assert r["weights"] == [
            "allreduce(op='mean'): every weight is 0: the weights are the numbers of rows, "
            "at least one of them above 0",
            "allreduce(op='mean'): rank 1's weight is -1.0: the weights are the numbers of "
            "rows, at least one of them above 0"]
        assert r["after"] == [2.0, 2.0]
    assert results[0]["errors"] == results[1]["errors"]


def test_a_rank_whose_compiled_step_raises_ends_the_job(env):
    out = mpiexec(2, "-m", "tests.mpi_programs", "raising", env=env, check=False)
    assert out.returncode != 0
    assert re.search(r'mpi_programs\.py", line \d+, in failing_step\n'
                     r'    raise ValueError\("rank 1 fails at step 3"\)\n', out.stderr)  # located
    assert "ValueError: rank 1 fails at step 3" in out.stderr
    assert "myir.distributed: rank 1 of 2 raised ValueError; ending the job" in out.stderr
    assert not os.listdir(env["MYIR_TEST_OUT"])     # no rank finished


def test_a_rank_that_exits_alone_ends_the_job_under_mpi4pys_runner(env):
    """Python runs no hook for sys.exit: the README sends such scripts to `-m mpi4py`."""
    out = mpiexec(2, "-m", "mpi4py", "-m", "tests.mpi_programs", "exiting", env=env,
                  check=False)
    assert out.returncode == 3, out.stderr
    assert not os.listdir(env["MYIR_TEST_OUT"])     # no rank finished


def test_one_rank_compiles_and_the_other_loads(env):
    env = {**env, "MYIR_PROGRAM_CACHE": "on"}
    first, second = run("compile_once", env)
    assert (first["saved"], first["loaded"]) == (1, 0)
    assert (second["saved"], second["loaded"]) == (0, 1)
    assert first["digest"] == second["digest"]


def test_without_mpiexec_a_script_is_one_process_and_bad_arguments_raise(env):
    out = subprocess.run([sys.executable, "-m", "tests.mpi_programs", "single"], env=env,
                         capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    (result,) = ranks(env)
    assert (result["rank"], result["size"], result["same"]) == (0, 1, True)
    assert result["layouts"] and result["leaf_freed"]
    errors = result["errors"]
    assert "the ops are 'sum' and 'mean'" in errors["op"]
    assert "need the same number of rows; they have (15, 2), (3, 2)" in errors["rows"]
    assert "allreduce(op='sum'): ['b'] is str 'text', not a number" in errors["leaf"]
    assert "a mean of integers is not an integer" in errors["integer mean"]
    assert "allreduce(op='mean'): every weight is 0" in errors["weight"]


def test_the_mpi_pool_executor_maps_a_compiled_gradient_in_order(env):
    mpiexec(2, "-m", "mpi4py.futures", "-m", "tests.mpi_programs", "pool_map", env=env)
    (master,) = ranks(env)
    assert master["same"]
