"""Test doubles, named for what they are: InMemoryStore (in_memory_store, with its
reads, corrections and dead letters in in_memory_reads, in_memory_corrections and
in_memory_dead_letters), both store interfaces in plain Python for the unit tests of
pure logic; tests/contract holds it to PostgresStore's answers. Not the product:
nothing of worker imports it (tests/unit/repo/test_import_boundaries.py)."""
