"""The engine contract (`wyoming_pocket_tts.core.contract`): the engine and the server's
test fakes implement it, so the server tests exercise what the real engine provides."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from server_fixtures import FakeModel, FakeVoices, FakeVoiceState

from wyoming_pocket_tts.core import ModelLike, SessionLike, VoiceSource, VoiceStateLike

TESTS = Path(__file__).resolve().parent


def test_fakes_have_the_contracts_members():
    model = FakeModel()
    state = FakeVoiceState("alba")
    assert isinstance(model, ModelLike)
    assert isinstance(state, VoiceStateLike)
    assert isinstance(model.session(state), SessionLike)
    assert isinstance(FakeVoices(), VoiceSource)


def test_the_real_engine_has_the_contracts_members(demo_model):
    state = demo_model.voice_from_predefined(demo_model.predefined_voices[0])
    assert isinstance(demo_model, ModelLike)
    assert isinstance(state, VoiceStateLike)
    assert isinstance(demo_model.session(state), SessionLike)


def test_a_fake_missing_a_member_is_not_a_model():
    class Incomplete:
        sample_rate = 24000

    assert not isinstance(Incomplete(), ModelLike)


_TYPE_CHECK = textwrap.dedent('''
    from pathlib import Path

    from server_fixtures import FakeModel, FakeSession, FakeVoices, FakeVoiceState
    from wyoming_pocket_tts.core.contract import ModelLike, SessionLike, VoiceSource, VoiceStateLike

    model: ModelLike = FakeModel()
    state: VoiceStateLike = FakeVoiceState("alba")
    session: SessionLike = FakeSession(FakeModel(), FakeVoiceState("alba"), None)
    voices: VoiceSource = FakeVoices()
''')


def test_fakes_type_check_against_the_contract(tmp_path):
    """mypy: signatures too (argument and return types), not only member names."""
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")
    check = tmp_path / "contract_check.py"
    check.write_text(_TYPE_CHECK)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
         "--no-error-summary", "--cache-dir", str(tmp_path / ".mypy_cache"), str(check)],
        capture_output=True, text=True, timeout=300, cwd=TESTS.parent,
        env={"MYPYPATH": f"{TESTS}:{TESTS.parent}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
