"""A real local Spark session for tests (PySpark 4.3, Java 17).

    spark = make_spark()
    try:
        ...
    finally:
        stop_spark(spark)

How to stop it cleanly: call :func:`stop_spark` (not only ``spark.stop()``).
``spark.stop()`` stops the SparkContext but leaves the driver JVM (started by
``spark-submit`` as the py4j gateway) running until this Python process exits.
``stop_spark`` stops the session, shuts the py4j gateway down, closes the JVM's
stdin (the gateway exits on EOF), waits for the JVM (kills it after a timeout),
clears PySpark's class-level gateway/JVM/session handles so a later
``make_spark()`` starts a fresh JVM, and removes the session's temp dir.

Loopback only: driver host/bind address are 127.0.0.1 and SPARK_LOCAL_IP is set.
Everything Spark writes (warehouse, local dir, derby/ivy, java.io.tmpdir,
checkpoints) lives under one temp dir. The in-memory catalog is used, so no Hive
metastore or Derby database is started at all.
"""

import os
import shutil
import sys
import tempfile
import warnings

# log4j2 config: errors only, to stderr (no startup banners or WARNs in test output).
_LOG4J2 = """\
# Root at WARN but the console only lets ERROR through. PySpark runs as an
# "interpreter": Spark then forces the shell level to WARN and prints "Setting
# default log level to ..." unless the root level already is WARN.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = error
"""


# Environment variables make_spark() sets for the JVM / workers; stop_spark() restores them.
_ENV_KEYS = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME")


def make_spark(app_name="qdbpm-tests", root=None, extra_conf=None):
    """Start a local[2] SparkSession configured for fast, quiet, hermetic tests.

    ``root``: directory for everything Spark writes (default: a new temp dir,
    removed by :func:`stop_spark`). ``extra_conf``: more/overriding Spark confs.
    Sets PYSPARK_PYTHON etc. in ``os.environ`` (restored by :func:`stop_spark`).
    """
    from pyspark.sql import SparkSession

    py = sys.executable
    saved_env = {k: os.environ.get(k) for k in _ENV_KEYS}
    # Workers (and the driver, for consistency) run this interpreter, so they see the
    # same packages (pyarrow, pandas, qdbpm) as the tests.
    os.environ["PYSPARK_PYTHON"] = py
    os.environ["PYSPARK_DRIVER_PYTHON"] = py
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # no hostname lookup / loopback warning
    # A stray PYSPARK_SUBMIT_ARGS (or SPARK_CONF_DIR, replaced below) from the
    # developer's shell would change what spark-submit launches.
    os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
    os.environ.pop("SPARK_HOME", None)  # use the jars of the installed pyspark

    own_root = root is None
    root = root or tempfile.mkdtemp(prefix="qdbpm-spark-")
    dirs = {d: os.path.join(root, d) for d in ("warehouse", "local", "tmp", "derby", "ivy", "conf")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    log4j = os.path.join(dirs["conf"], "log4j2.properties")
    with open(log4j, "w") as f:
        f.write(_LOG4J2)
    # An empty conf dir: no spark-defaults.conf / spark-env.sh from elsewhere.
    os.environ["SPARK_CONF_DIR"] = dirs["conf"]

    java_opts = " ".join(
        [
            "-Dlog4j2.configurationFile=file:" + log4j,
            "-Djava.io.tmpdir=" + dirs["tmp"],
            "-Dderby.system.home=" + dirs["derby"],
            "-Duser.timezone=UTC",
            # Faster JVM startup; tests run small jobs.
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
        ]
    )
    conf = {
        "spark.master": "local[2]",
        "spark.app.name": app_name,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.executorEnv.PYSPARK_PYTHON": py,
        "spark.pyspark.python": py,
        "spark.pyspark.driver.python": py,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.ui.retainedExecutions": "1",
        "spark.eventLog.enabled": "false",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": dirs["warehouse"],
        "spark.local.dir": dirs["local"],
        "spark.jars.ivy": dirs["ivy"],
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    }
    conf.update(extra_conf or {})

    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark._qdbpm_root = root if own_root else None
    spark._qdbpm_saved_env = saved_env
    return spark


def stop_spark(spark, timeout=30.0):
    """Stop the session and its driver JVM; wait for the JVM to exit. Idempotent."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession, SQLContext

    if getattr(spark, "_qdbpm_stopped", False):
        return
    spark._qdbpm_stopped = True
    root = getattr(spark, "_qdbpm_root", None)
    gateway = SparkContext._gateway
    try:
        with warnings.catch_warnings():
            # stop() warns (RuntimeWarning) only if the JVM is already gone.
            warnings.simplefilter("ignore", RuntimeWarning)
            spark.stop()
    finally:
        proc = getattr(gateway, "proc", None) if gateway is not None else None
        if gateway is not None:
            try:
                gateway.shutdown()
            except Exception:
                pass
        if proc is not None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()  # the JVM exits when its stdin closes
            except OSError:
                pass
            try:
                proc.wait(timeout)
            except Exception:
                proc.kill()
                proc.wait()
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        SQLContext._instantiatedContext = None
        for k, v in (getattr(spark, "_qdbpm_saved_env", None) or {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if root:
            shutil.rmtree(root, ignore_errors=True)
