"""What each command loads before it answers, in a fresh interpreter: `--help` and usage errors
load neither numpy nor pyarrow, reading one `_pm` (inspect, verify) loads no pyarrow, a local
prune of a QuestDB-style table (partition directories named by day) loads neither pandas
(pyarrow's `pa.array` / `pa.scalar` and `pyarrow.acero` would, wherever it is installed: ~0.27 s)
nor fsspec nor the S3 client, and a filtered scan of it no pandas; hive keys (`day=1`) are read
with pyarrow.dataset, whose import loads pandas. Checked by the modules present, not by time."""

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qdbpm.sync.generate import generate

from conftest import GOLDEN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WATCHED = ("numpy", "pyarrow", "pandas", "fsspec", "qdbpm.storage.s3")
DRIVER = (
    "import json, sys\n"
    "from qdbpm.cli.main import main\n"
    "try:\n"
    "    code = main(sys.argv[1:])\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    f"print(json.dumps([code, [m for m in {WATCHED!r} if m in sys.modules]]), file=sys.stderr)\n"
)


def loaded(*args):
    """(exit code, the watched modules loaded) of `qdbpm ARGS` in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, env=env, timeout=120)
    code, mods = json.loads(p.stderr.strip().splitlines()[-1])
    return code, set(mods)


def test_pandas_is_installed_here():
    """The prune check below means something only where pandas can load (the test extra has it)."""
    import pandas  # noqa: F401


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("startup"))
    for d in range(3):
        part = os.path.join(root, f"2024-01-0{d + 1}")
        os.makedirs(part)
        pq.write_table(pa.table({"x": pa.array(np.arange(100) + 100 * d, pa.int64())}),
                       os.path.join(part, "data.parquet"), row_group_size=25)
        generate(os.path.join(part, "data.parquet"))
    return root


@pytest.mark.parametrize("args", [["--help"], ["prune", "--help"], [], ["nosuch"]])
def test_help_and_usage_errors_load_no_numpy_or_pyarrow(args):
    code, mods = loaded(*args)
    assert code in (0, 2) and not mods, mods


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_reading_one_pm_loads_no_pyarrow(command):
    code, mods = loaded(command, os.path.join(GOLDEN, "example_b.pm"))
    assert code == 0 and mods == {"numpy"}, mods


def test_local_prune_loads_no_pandas_fsspec_or_s3_client(table):
    code, mods = loaded("prune", table, "--where", "x >= 130 AND x < 160", "--json")
    assert code == 0 and mods == {"numpy", "pyarrow"}, mods


@pytest.mark.parametrize("mode", [["--count"], ["--head", "3"]])
@pytest.mark.parametrize("where", ["x >= 130 AND x < 160 OR x = 7",
                                   "x + 1 > 131 AND CASE WHEN x > 150 THEN false ELSE true END"])  # a residual
def test_local_filtered_scan_loads_no_pandas(table, mode, where):
    code, mods = loaded("scan", table, "--where", where, *mode)
    assert code == 0 and mods == {"numpy", "pyarrow", "fsspec"}, mods


def test_first_filtered_read_in_a_process_loads_no_pandas(table):
    code = ("import sys, qdbpm\n"
            "t = qdbpm.read_table(sys.argv[1], None, 'x >= 130 AND x < 160 OR x = 7')\n"
            "print(t.num_rows, 'pandas' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, table], capture_output=True, text=True, env=env,
                         timeout=120, check=True).stdout.split()
    assert out == ["31", "False"]


THREADS = (
    "import json, os, sys\n"
    "from qdbpm.cli.main import command, main\n"
    "run = command if sys.argv[1] == 'command' else main\n"
    "try:\n"
    "    code = run(sys.argv[2:])\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    "print(json.dumps([code, 'numpy' in sys.modules, os.environ.get('OPENBLAS_NUM_THREADS'),\n"
    "                  len(os.listdir('/proc/self/task'))]), file=sys.stderr)\n"
)


@pytest.mark.parametrize("entry, user, want", [("command", None, "1"), ("command", "2", "2"), ("main", None, None)])
def test_the_command_keeps_numpy_to_one_blas_thread(entry, user, want):
    """numpy's OpenBLAS starts a thread per core as numpy loads, spinning on the cores qdbpm's own
    threads need; qdbpm calls no BLAS. The command asks for one (this process then runs no thread
    but its own: `inspect` starts none), unless its user set it; `main` called from a program
    leaves the environment alone."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("OPENBLAS_NUM_THREADS", None)
    if user is not None:
        env["OPENBLAS_NUM_THREADS"] = user
    p = subprocess.run([sys.executable, "-c", THREADS, entry, "inspect", os.path.join(GOLDEN, "example_b.pm")],
                       capture_output=True, text=True, env=env, timeout=120)
    code, numpy_loaded, got, tasks = json.loads(p.stderr.strip().splitlines()[-1])
    assert code == 0 and numpy_loaded and got == want
    if want == "1":
        assert tasks == 1


def test_local_prune_answers_the_same(table):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "qdbpm.cli", "prune", table, "--where", "x >= 130 AND x < 160",
                        "--json"], capture_output=True, text=True, env=env, timeout=120, check=True)
    kept = json.loads(p.stdout)["kept"]
    assert kept == [{"partition": "2024-01-02", "row_group": 1, "num_rows": 25},
                    {"partition": "2024-01-02", "row_group": 2, "num_rows": 25}]
