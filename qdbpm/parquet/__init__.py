"""Parquet: numbers of the format (constants), the Thrift compact codec (compact) and its Cython
fast path (_thrift), footers read (footer, leaves), built (build) and extended (splice), bloom
filter headers (bloom_header), QuestDB type inference (schema)."""
