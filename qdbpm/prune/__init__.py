"""Pruning: predicate expressions, literal semantics, stats decoding, rules, the exact Arrow filter. No I/O."""
