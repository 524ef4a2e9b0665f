"""The `_pm` format: byte layout, descriptions, reader, writer, compaction, CRC."""
