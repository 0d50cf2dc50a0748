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
