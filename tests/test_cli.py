"""The command line: option names, defaults, and one-line failures."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from wyoming_pocket_tts import __version__
from wyoming_pocket_tts.__main__ import build_parser, config_from_args, default_data_dir, idle_threads_sleep
from wyoming_pocket_tts.core import GenerationOptions
from wyoming_pocket_tts.settings import SETTINGS
from wyoming_pocket_tts.voices import VoiceLibraryConfig

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "wyoming_pocket_tts", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def config(*args: str):
    return config_from_args(build_parser().parse_args(list(args)))


# Runs the command line in a fresh interpreter, then reports whether torch was imported.
_TORCH_PROBE = """
import runpy, sys
sys.argv = ["wyoming-pocket-tts", *sys.argv[1:]]
try:
    runpy.run_module("wyoming_pocket_tts", run_name="__main__")
except SystemExit:
    pass
print("torch loaded:", "torch" in sys.modules, file=sys.stderr)
"""


def cli_torch_probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _TORCH_PROBE, *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO)  # fmt: skip


def test_version_and_help_do_not_load_torch():
    result = cli_torch_probe("--version")
    assert result.stdout.strip() == f"wyoming-pocket-tts {__version__}"
    assert "torch loaded: False" in result.stderr
    result = cli_torch_probe("--help")
    assert "torch loaded: False" in result.stderr
    for option in ("--uri", "--model", "--language", "--voice", "--voices", "--voices-dir",
                   "--no-predefined-voices", "--data-dir", "--hf-token", "--temperature", "--decode-steps",
                   "--eos-threshold", "--quantize", "--no-quantize", "--threads", "--voice-cache-size", "--voice-cache-mb",
                   "--disk-cache-mb", "--max-concurrent", "--zeroconf", "--debug", "--version"):  # fmt: skip
        assert option in result.stdout, option


def test_server_cli_and_voices_config_import_no_torch():
    code = ("import sys, wyoming_pocket_tts.__main__, wyoming_pocket_tts.server, wyoming_pocket_tts.voices.config;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_every_setting_is_an_option_with_its_declared_default(tmp_path):
    args = build_parser().parse_args([])
    for setting in SETTINGS:
        assert setting.option in build_parser().format_help()
        assert getattr(args, setting.name) == setting.default, setting.name


def test_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    cfg = config()
    assert cfg.uri == "tcp://0.0.0.0:10200"
    assert cfg.model == "english"
    assert cfg.data_dir == tmp_path / "xdg" / "wyoming-pocket-tts"
    assert cfg.data_dir.is_dir()
    assert cfg.hf_token is None
    assert cfg.library == VoiceLibraryConfig(tmp_path / "xdg" / "wyoming-pocket-tts")
    assert cfg.max_concurrent == 4
    assert cfg.precision == "auto"
    assert cfg.zeroconf_name is None and cfg.language is None and cfg.threads is None
    assert cfg.generation == GenerationOptions()


def test_default_data_dir_without_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_data_dir() == tmp_path / ".local" / "share" / "wyoming-pocket-tts"


def test_options_are_passed_through(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "env-token")
    voices = tmp_path / "voices.yaml"
    voices.write_text("voices: {}\n")
    recording = tmp_path / "me.wav"
    recording.write_bytes(b"RIFF")
    cfg = config("--uri", "unix:///tmp/x.sock", "--model", "demo", "--voice", str(recording),
                 "--voices", str(voices), "--voices-dir", str(tmp_path), "--no-predefined-voices",
                 "--data-dir", str(tmp_path / "d"), "--temperature", "0.5", "--decode-steps", "2",
                 "--eos-threshold", "-3", "--quantize", "--threads", "1", "--voice-cache-size", "3",
                 "--voice-cache-mb", "64", "--disk-cache-mb", "0", "--max-concurrent", "1",
                 "--debug")  # fmt: skip
    assert cfg.uri == "unix:///tmp/x.sock" and cfg.model == "demo"
    assert cfg.library == VoiceLibraryConfig(
        tmp_path / "d", default_voice=str(recording), voices_file=voices, voices_dir=tmp_path,
        include_predefined=False, cache_size=3, cache_mb=64.0, disk_cache_mb=0.0,
    )  # fmt: skip
    assert cfg.hf_token == "env-token"
    assert cfg.generation == GenerationOptions(temperature=0.5, decode_steps=2, eos_threshold=-3.0)
    assert cfg.precision == "int8" and cfg.threads == 1
    assert cfg.max_concurrent == 1
    assert config("--hf-token", "cli-token").hf_token == "cli-token"
    assert config("--voice", "marius").library.default_voice == "marius"  # a name needs no file
    assert config("--language", "pt-BR").language == "pt-BR"
    assert config("--uri", "stdio://").uri == "stdio://"


@pytest.mark.parametrize(
    ("args", "precision"),
    [((), "auto"), (("--quantize",), "int8"), (("--no-quantize",), "float32"), (("--quantize", "auto"), "auto"),
     (("--quantize", "int8"), "int8"), (("--quantize", "float32"), "float32"),
     (("--quantize", "--no-quantize"), "float32"), (("--no-quantize", "--quantize"), "int8")],
)  # fmt: skip
def test_the_precision_forms(args, precision, tmp_path):
    assert config(*args, "--data-dir", str(tmp_path)).precision == precision


def test_openmp_threads_sleep_when_idle_unless_told_otherwise():
    environ: dict[str, str] = {}
    idle_threads_sleep(environ)
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE"}
    told = {"OMP_WAIT_POLICY": "ACTIVE"}
    idle_threads_sleep(told)
    assert told == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_the_server_process_sets_the_wait_policy_before_torch(tmp_path):
    code = ("import os, sys; from wyoming_pocket_tts.__main__ import main; sys.argv[1:] = ['--version'];\n"
            "import atexit; atexit.register(lambda: print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules))\n"
            "main()")  # fmt: skip
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert result.stdout.split()[-2:] == ["PASSIVE", "False"], result.stdout + result.stderr


def test_zeroconf_name(monkeypatch):
    monkeypatch.setattr("wyoming_pocket_tts.__main__.zeroconf_available", lambda: True)
    assert config("--zeroconf").zeroconf_name == "pocket-tts"
    assert config("--zeroconf", "kitchen").zeroconf_name == "kitchen"


def test_hf_token_never_shown_in_help():
    result = cli("--help", env={"HF_TOKEN": "hf_secret_value"})
    assert "hf_secret_value" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--threads", "0"], "--threads: must be at least 1"),
        (["--quantize", "fast"], "--quantize: 'fast' is not one of auto, int8, float32"),
        (["--max-concurrent", "x"], "--max-concurrent: must be a whole number"),
        (["--language", "English"], "--language: 'English' is not valid"),
        (["--temperature", "-1"], "--temperature: must be at least 0"),
        (["--voice-cache-mb", "0"], "--voice-cache-mb: must be greater than 0"),
        (["--uri", "http://host:1"], "use tcp://HOST:PORT"),
        (["--uri", "tcp://host"], "needs a host and a port"),
        (["--voices", "/nonexistent/voices.yaml"], "no such file"),
        (["--voices-dir", "/nonexistent/dir"], "no such directory"),
        (["--voice", "/nonexistent/me.wav"], "no such file"),
        (["--voice", "me.wav"], "no such file"),
        (["--model", "/nonexistent/config.yaml"], "no such file"),
        (["--zeroconf", "--uri", "unix:///tmp/s"], "--zeroconf needs a tcp:// --uri"),
    ],
)
def test_bad_options_fail_fast_with_one_line(args, message, tmp_path):
    # "Fast" is: refused before the engine (torch) is imported, not a time limit.
    result = cli_torch_probe(*args, "--data-dir", str(tmp_path))
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("wyoming-pocket-tts: error:")
    assert message in lines[0]
    assert lines[1] == "torch loaded: False"
    assert cli(*args, "--data-dir", str(tmp_path)).returncode == 2


def test_unwritable_data_dir_is_one_warning(tmp_path, caplog):
    """Issue 21: a data dir that cannot be written only costs the caches; the server starts."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with caplog.at_level(logging.WARNING):
        cfg = config("--data-dir", str(blocker / "sub"))
    assert cfg.data_dir == blocker / "sub"
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "--data-dir" in warnings[0] and "memory" in warnings[0]


def test_port_in_use_is_one_line(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = cli("--model", "demo", "--uri", f"tcp://127.0.0.1:{port}", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"cannot listen on tcp://127.0.0.1:{port}" in errors[0]


def test_model_that_cannot_be_downloaded_is_one_line(tmp_path):
    # No network here, and an empty Hugging Face cache: the download must fail, clearly.
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_TOKEN": ""}
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    free = port.getsockname()[1]
    port.close()
    result = cli("--model", "english", "--uri", f"tcp://127.0.0.1:{free}", "--data-dir", str(tmp_path),
                 env=env, timeout=120)  # fmt: skip
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("wyoming-pocket-tts: error:"), result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("wyoming-pocket-tts: error:")]
    assert len(errors) == 1
    # It says what was tried and how to run offline on a local model config.
    assert "english" in last or "hf://" in last
    assert ".yaml" in last or "offline" in last.lower()


def test_unknown_model_name_is_one_line(tmp_path):
    result = cli("--model", "klingon", "--uri", "tcp://127.0.0.1:0", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("wyoming-pocket-tts: error:")]
    assert len(errors) == 1 and "klingon" in errors[0]


def test_language_is_the_language_of_the_models_voices(tmp_path):
    """--language reaches describe: every voice of the loaded model is offered in it."""
    from wyoming_pocket_tts.server.app import load_backend
    from wyoming_pocket_tts.server.model_facts import model_facts

    cfg = config("--model", "demo", "--language", "de", "--data-dir", str(tmp_path))
    backend = load_backend(cfg, model_facts(cfg.model, cfg.language).languages)
    try:
        assert backend.voices.voices and all(voice.languages == ("de",) for voice in backend.voices.voices)
    finally:
        backend.voices.close()
    plain = config("--model", "demo", "--data-dir", str(tmp_path))
    without = load_backend(plain, model_facts(plain.model, plain.language).languages)
    try:
        assert all(voice.languages == ("en",) for voice in without.voices.voices)  # the model's own
    finally:
        without.voices.close()
