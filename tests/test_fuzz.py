"""Hostile `_pm` bytes: only PmError subclasses, never another exception, crash or hang; memory
stays proportional to the file whatever its counts claim."""

import glob
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qdbpm.fuzz import exercise, fix_crc, hostile_allocation_ok, mutate

from conftest import GOLDEN, read_bytes

SEEDS = [read_bytes(p) for p in sorted(glob.glob(os.path.join(GOLDEN, "*.pm")))]


@settings(max_examples=3000, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), base=st.sampled_from(range(len(SEEDS))), rounds=st.integers(1, 3))
def test_mutated_pm_files_raise_only_pm_errors(tmp_path, seed, base, rounds):
    rnd = random.Random(seed)
    data = SEEDS[base]
    for _ in range(rounds):
        data = mutate(data, rnd)
    exercise(data, str(tmp_path / "_pm"))  # any non-PmError propagates and fails the test


def test_mutations_reach_deep_checks(tmp_path):
    """The fuzzer is not just tripping the CRC: repaired-CRC mutations hit structural errors and
    some mutants are still valid files."""
    from qdbpm.fuzz import run

    counts = run(SEEDS, 3000, seed=5)
    assert counts.get("ok", 0) > 0
    assert counts.get("CorruptFileError", 0) > 100 and counts.get("ChecksumError", 0) > 100
    assert len(counts) >= 4, counts


@pytest.mark.parametrize("field_at,width", [(24, 4), (20, 4)])
def test_hostile_counts_do_not_allocate(tmp_path, field_at, width):
    """A header claiming 4 billion columns or sorting columns allocates nothing proportional."""
    data = bytearray(SEEDS[0])
    data[field_at : field_at + width] = b"\xff" * width
    peak = hostile_allocation_ok(bytes(fix_crc(data)), str(tmp_path / "_pm"))
    assert peak < 2 * 1024 * 1024


def test_hostile_row_group_count_does_not_allocate(tmp_path):
    data = bytearray(SEEDS[0])
    size = int.from_bytes(data[:8], "little")
    footer = size - 4 - int.from_bytes(data[size - 4 : size], "little")
    data[footer + 12 : footer + 16] = b"\xff\xff\xff\xff"
    peak = hostile_allocation_ok(bytes(fix_crc(data)), str(tmp_path / "_pm"))
    assert peak < 2 * 1024 * 1024
