"""Parquet: the Thrift compact codec and its Cython fast path, footers, QuestDB type inference."""
