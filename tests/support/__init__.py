"""Test support code: oracles, strategies, servers, harnesses."""
