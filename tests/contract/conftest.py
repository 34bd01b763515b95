"""The two-store fixtures of test_store_contract, for every contract test module."""

from tests.contract.test_store_contract import server, store

__all__ = ["server", "store"]
