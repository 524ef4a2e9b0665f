"""Random descriptions: write -> read -> identical; re-encoding what was read is byte-identical."""

import pytest
from hypothesis import HealthCheck, given, settings

import qdbpm
from qdbpm.pm.encoder import encode_file

from conftest import read_bytes
from support.pm_strategies import assert_matches, descriptions


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(d=descriptions())
def test_random_description_round_trip(tmp_path, d):
    path = str(tmp_path / "_pm")
    size = qdbpm.write_new(path, d)
    data = read_bytes(path)
    assert size == len(data) == int.from_bytes(data[:8], "little")
    with qdbpm.open(path) as pm:
        assert_matches(pm, d)
        assert pm.snapshots() == [d.parquet_size]
        again = pm.to_description()
    assert encode_file(again) == data


def test_external_bloom_length_must_be_whole_blocks(tmp_path):
    """Readers refuse an external bitset whose length is not whole 32-byte blocks, so the writer
    never writes one."""
    import dataclasses

    from support.golden_cases import external_bloom
    from qdbpm.pm.description import ByteRefs
    from qdbpm.errors import PmError

    d = external_bloom()
    length = d.blooms.length.copy()
    length[0, 2] = 33
    d = dataclasses.replace(d, blooms=ByteRefs(d.blooms.data, d.blooms.start, length))
    with pytest.raises(PmError, match="multiple of 32"):
        qdbpm.write_new(str(tmp_path / "_pm"), d)
    assert not (tmp_path / "_pm").exists()
