import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _memplan_found():
    from memplan_torch import command
    try:
        command.executable()
    except command.MemplanError as e:  # the package needs the C++ command; say so, do not skip silently
        pytest.fail(str(e))


@pytest.fixture
def memplan_calls(monkeypatch):
    """The memplan processes the package starts during a test, by subcommand ("plan", "check", ...)."""
    from memplan_torch import command
    calls = []
    run = command.run

    def counting(args, check=True):
        calls.append(args[0])
        return run(args, check)
    monkeypatch.setattr(command, "run", counting)
    return calls
