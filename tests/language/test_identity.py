"""`identity.uncounted`: counting is off inside it, nested or left by an exception, and as it was after."""

import pytest

from corral.language import identity


@pytest.mark.parametrize('active', [True, False])
def test_uncounted_turns_counting_off_and_restores_it(monkeypatch, active):
    monkeypatch.setattr(identity, '_active', active)
    seen = []
    with identity.uncounted():
        seen.append(identity._active)
        with identity.uncounted():
            seen.append(identity._active)
        seen.append(identity._active)
    seen.append(identity._active)
    with pytest.raises(ValueError), identity.uncounted():
        seen.append(identity._active)
        raise ValueError
    seen.append(identity._active)
    assert seen == [False, False, False, active, False, active]
