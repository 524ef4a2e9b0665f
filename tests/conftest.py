import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# Apache parquet-testing files (Apache License 2.0, LICENSE.txt beside them), shipped with the tests.
PEER_DATA = os.path.join(HERE, "data", "parquet-testing")
GOLDEN = os.path.join(HERE, "golden")


@pytest.fixture
def pm_path(tmp_path):
    return str(tmp_path / "_pm")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


from fixtures_infra import s3_bucket, s3_server, spark  # noqa: E402,F401  (real SeaweedFS and Spark)
