"""The test tiers (conftest.py): `python -m pytest -q` deselects the slow tier, RUN_SLOW=1 keeps it,
and `--trainer-flags` (docs/forking.md's check that a flag stays exact) keeps it too: every
exactness test is slow, so without that the documented command would run nothing."""

import types

import conftest


class Item:
    def __init__(self, name, slow):
        self.name, self.slow = name, slow

    def get_closest_marker(self, name):
        return name == "slow" and self.slow


def select(monkeypatch, run_slow, trainer_flags):
    monkeypatch.setattr(conftest, "RUN_SLOW", run_slow)
    deselected = []
    config = types.SimpleNamespace(
        getoption=lambda name: trainer_flags if name == "--trainer-flags" else None,
        hook=types.SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)),
    )
    items = [Item("fast", False), Item("exact", True)]
    conftest.pytest_collection_modifyitems(config, items)
    return [i.name for i in items], [i.name for i in deselected]


def test_the_fast_tier_deselects_the_slow_tests_and_says_so(monkeypatch):
    assert select(monkeypatch, False, "") == (["fast"], ["exact"])


def test_run_slow_and_trainer_flags_keep_the_slow_tests(monkeypatch):
    assert select(monkeypatch, True, "") == (["fast", "exact"], [])
    assert select(monkeypatch, False, "--label-smoothing 0.1") == (["fast", "exact"], [])
