"""Keeping `_pm` in step with its Parquet file: generate, update, append in place, recover."""
