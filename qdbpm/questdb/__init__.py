"""A QuestDB table directory, as a reader of its Parquet partitions needs it: the `_txn` commit
record (read with QuestDB's A/B protocol), the `_meta` header and columns, and the partition
directory names. The format only (like qdbpm/pm/ for `_pm`): no directory is listed and no `_pm`
opened here; qdbpm/table/ turns this into a table.
"""
