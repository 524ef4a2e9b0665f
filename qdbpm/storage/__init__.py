"""Object-store access, in one place: what remote bytes are read through (`objects.reader_for`:
the direct S3 client of `s3.py` where it reproduces an s3fs filesystem, else the fsspec
filesystem itself), the one wrapper that turns a failed request into a `StorageError` naming the
object, the range and the cause (`objects.cat`, `objects.storage_errors`), and a seekable file of
exact range requests (`objects.RangeFile`). It sits just above `errors.py` and knows nothing of
`_pm` or Parquet, so the format reader, tables and sync all reach storage the same way.
"""
