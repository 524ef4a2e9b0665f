"""qdbpm on Spark through PySpark: distributed generation and pruning (`jobs`), the Python data
source `qdbpm` with filter pushdown (`source`, `filters`), and the Spark types of `_pm` columns
(`types`)."""

from .filters import convert_filter, exact_type
from .jobs import GENERATE_SCHEMA, PRUNE_SCHEMA, generate, prune, surviving_row_groups_udf
from .source import QdbpmDataSource, QdbpmPartition, QdbpmPushdownReader, QdbpmReader, register
from .types import spark_field, to_spark_arrow
from .writer import QdbpmCommitMessage, QdbpmWriter

__all__ = ["generate", "prune", "surviving_row_groups_udf", "register", "QdbpmDataSource", "QdbpmReader",
           "QdbpmPushdownReader",           "QdbpmPartition", "convert_filter", "exact_type", "spark_field", "to_spark_arrow",
           "GENERATE_SCHEMA", "PRUNE_SCHEMA", "QdbpmWriter", "QdbpmCommitMessage"]
