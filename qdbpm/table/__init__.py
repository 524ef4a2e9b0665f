"""Tables: partitions, byte-range plans and fetches, reads of surviving chunks."""
