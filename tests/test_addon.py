"""The Home Assistant add-on and the Docker image, checked without a Docker engine.

- config.yaml / repository.yaml / translations against the Supervisor's own rules,
  transcribed below from supervisor/addons/validate.py and options.py. A config the
  Supervisor rejects makes the add-on vanish from the store silently, hence the tests.
- The run script: sample options.json files -> exact server command lines, and the
  whole start (fake server, stub Supervisor on 127.0.0.1) -> discovery message.
- The Dockerfile, .dockerignore and script/setup: the image installs what we test.
- icon.png / logo.png sizes, DOCS.md and CHANGELOG.md contents.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ADDON_DIR = ROOT / "addon"
DATA = Path(__file__).resolve().parent / "data" / "addon"
FAKE_SERVER_PATH = DATA / "fake_server"

sys.path.insert(0, str(ADDON_DIR))

import addon_options  # noqa: E402
import healthcheck  # noqa: E402
import run  # noqa: E402
import supervisor_api  # noqa: E402
import wyoming_probe  # noqa: E402
from addon_options import Layout, OptionsError, build_command, load_options, normalize_options  # noqa: E402

from wyoming_pocket_tts.settings import ADDON as ADDON_SETTINGS  # noqa: E402

# ---------------------------------------------------------------------------------------
# The Supervisor's rules (supervisor/addons/options.py, validate.py, const.py)
# ---------------------------------------------------------------------------------------

RE_SCHEMA_ELEMENT = re.compile(
    r"^(?:"
    r"|bool"
    r"|email"
    r"|url"
    r"|port"
    r"|device(?:\((?P<filter>subsystem=[a-z]+)\))?"
    r"|str(?:\((?P<s_min>\d+)?,(?P<s_max>\d+)?\))?"
    r"|password(?:\((?P<p_min>\d+)?,(?P<p_max>\d+)?\))?"
    r"|int(?:\((?P<i_min>-?\d+)?,(?P<i_max>-?\d+)?\))?"
    r"|float(?:\((?P<f_min>-?\d*\.?\d+)?,(?P<f_max>-?\d*\.?\d+)?\))?"
    r"|match\((?P<match>.*)\)"
    r"|list\((?P<list>.+)\)"
    r")\??$"
)
RE_SLUG = re.compile(r"^[-_.A-Za-z0-9]+$")
RE_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
RE_PORT_KEY = re.compile(r"^\d+/(?:tcp|udp)$")
REQUIRED = ("name", "version", "slug", "description", "arch")
ARCHES = {"amd64", "aarch64", "armv7", "armhf", "i386"}
MAP_TYPES = {
    "data", "config", "ssl", "addons", "backup", "share", "media",
    "homeassistant_config", "all_addon_configs", "addon_config",
}  # fmt: skip
STARTUP = {"initialize", "system", "services", "application", "once"}
BOOT = {"auto", "manual", "manual_only"}


def value_problem(typ: str, value: Any) -> str | None:
    """Why the Supervisor would refuse `value` for schema type `typ` (None: accepted)."""
    match = RE_SCHEMA_ELEMENT.match(typ)
    if not match:
        return f"unknown type {typ!r}"
    if value is None:
        return "no value"
    base = typ.rstrip("?")

    def in_range(number: float, low: str | None, high: str | None) -> bool:
        return (low is None or number >= float(low)) and (high is None or number <= float(high))

    if base.startswith(("str", "password")):
        if not isinstance(value, str):
            return f"{value!r} is not a string"
        low, high = (match.group("s_min"), match.group("s_max")) if base.startswith("str") else (
            match.group("p_min"), match.group("p_max"))  # fmt: skip
        return None if in_range(len(value), low, high) else f"length of {value!r} out of range"
    if base.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{value!r} is not an int"
        return None if in_range(value, match.group("i_min"), match.group("i_max")) else f"{value} out of range"
    if base.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{value!r} is not a number"
        return None if in_range(value, match.group("f_min"), match.group("f_max")) else f"{value} out of range"
    if base == "bool":
        return None if isinstance(value, bool) else f"{value!r} is not a bool"
    if base.startswith("list"):
        choices = match.group("list").split("|")
        return None if str(value) in choices else f"{value!r} not in {choices}"
    if base == "port":
        return None if isinstance(value, int) and 1 <= value <= 65535 else f"{value!r} is not a port"
    if base.startswith("match"):
        return None if re.match(match.group("match"), str(value)) else f"{value!r} does not match"
    return None  # email, url: not used by this add-on


def supervisor_start_problems(config: dict, saved: dict) -> list[str]:
    """Why the Supervisor would refuse to start the add-on with the user's `saved` options
    (its persisted ones, merged over the new version's defaults, then validated against the
    new schema at every start and before an automatic update: apps/app.py write_options,
    test_update_schema; apps/options.py). Keys the schema lacks are dropped, not refused."""
    schema, merged = config.get("schema") or {}, {**(config.get("options") or {}), **saved}
    problems = []
    for key, value in merged.items():
        if key in schema:
            typ = schema[key]
            values, element = (value, typ[0]) if isinstance(typ, list) else ([value], typ)
            problems += [f"{key}: {why}" for item in values if (why := value_problem(element, item))]
    for key, typ in schema.items():
        element = typ[0] if isinstance(typ, list) else typ
        if key not in merged and not element.endswith("?"):
            problems.append(f"missing option {key!r}")
    return problems


def supervisor_options_file(config: dict, saved: dict) -> dict:
    """The options.json the Supervisor writes for `saved` (validated: unknown keys dropped,
    a bool for a bool type)."""
    assert supervisor_start_problems(config, saved) == []
    schema = config["schema"]
    return {key: value for key, value in {**config["options"], **saved}.items() if key in schema}


def supervisor_problems(config: dict, translations: dict) -> list[str]:
    """Everything in config.yaml (+ translations) that the Supervisor would reject or hide."""
    problems: list[str] = []
    for key in REQUIRED:
        if not config.get(key):
            problems.append(f"missing required key {key!r}")
    if not isinstance(config.get("version"), str) or not RE_VERSION.match(config.get("version") or ""):
        problems.append(f"version {config.get('version')!r} is not a quoted x.y.z string")
    if not RE_SLUG.match(str(config.get("slug", ""))):
        problems.append(f"bad slug {config.get('slug')!r}")
    arch = config.get("arch") or []
    if not isinstance(arch, list) or not set(arch) <= ARCHES:
        problems.append(f"bad arch {arch!r}")
    if "url" in config and not str(config["url"]).startswith(("http://", "https://")):
        problems.append("url is not a URL")
    if config.get("startup", "application") not in STARTUP:
        problems.append(f"bad startup {config.get('startup')!r}")
    if config.get("boot", "auto") not in BOOT:
        problems.append(f"bad boot {config.get('boot')!r}")
    if not isinstance(config.get("init", True), bool):
        problems.append("init must be a bool")
    if "homeassistant" in config and not RE_VERSION.match(str(config["homeassistant"])):
        problems.append(f"bad homeassistant version {config['homeassistant']!r}")
    for key in ("ingress", "panel_admin", "ingress_stream"):
        if key in config and not isinstance(config[key], bool):
            problems.append(f"{key} must be a bool")
    if "ingress_port" in config and not (isinstance(config["ingress_port"], int) and 0 <= config["ingress_port"] <= 65535):
        problems.append("ingress_port must be a port number")
    for key in ("panel_icon", "panel_title"):
        if key in config and not isinstance(config[key], str):
            problems.append(f"{key} must be a string")
    if "panel_icon" in config and not str(config["panel_icon"]).startswith("mdi:"):
        problems.append("panel_icon must be an mdi: icon")
    for key in ("discovery", "backup_exclude"):
        if key in config and not (isinstance(config[key], list) and all(isinstance(v, str) for v in config[key])):
            problems.append(f"{key} must be a list of strings")
    # Known silent killers: the add-on disappears from the store, no error shown.
    if "options_description" in config:
        problems.append("options_description is not a Supervisor key")
    for entry in config.get("map") or []:
        kind = entry.get("type") if isinstance(entry, dict) else str(entry).split(":")[0]
        if kind not in MAP_TYPES:
            problems.append(f"bad map entry {entry!r}")
    ports = config.get("ports") or {}
    for key, value in ports.items():
        if not RE_PORT_KEY.match(str(key)) or not (value is None or isinstance(value, int)):
            problems.append(f"bad port mapping {key!r}: {value!r}")

    schema = config.get("schema") or {}
    options = config.get("options") or {}
    for key, typ in schema.items():
        # A list option is the element's type in a one-item list: `["list(a|b)"]`.
        element = typ[0] if isinstance(typ, list) and len(typ) == 1 else typ
        if not isinstance(element, str) or not RE_SCHEMA_ELEMENT.match(element):
            problems.append(f"schema {key}: type {typ!r} is not in the Supervisor's grammar")
    for key in options:
        if key not in schema:
            problems.append(f"option {key!r} has no schema entry")
    for key, typ in schema.items():
        element = typ[0] if isinstance(typ, list) and len(typ) == 1 else typ
        if key not in options:
            # Only an optional type ("str?", ["str?"]) may go without (_check_missing_options).
            if not (isinstance(element, str) and element.endswith("?")):
                problems.append(f"schema {key!r} has no default in options")
        elif isinstance(typ, str) and (why := value_problem(typ, options[key])):
            problems.append(f"default of {key!r} refused: {why}")
        elif isinstance(typ, list):
            values = options[key]
            whys = [why for value in values if (why := value_problem(typ[0], value))] if isinstance(
                values, list) else [f"{values!r} is not a list"]  # fmt: skip
            problems.extend(f"default of {key!r} refused: {why}" for why in whys)

    configuration = (translations or {}).get("configuration") or {}
    for key in schema:
        entry = configuration.get(key) or {}
        if not entry.get("name") or not entry.get("description"):
            problems.append(f"option {key!r} has no English name and description")
    for key in configuration:
        if key not in schema:
            problems.append(f"translation for unknown option {key!r}")
    for key in (translations or {}).get("network") or {}:
        if key not in ports:
            problems.append(f"network translation for unknown port {key!r}")
    return problems


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def translations() -> dict:
    return yaml.safe_load((ROOT / "translations" / "en.yaml").read_text(encoding="utf-8"))


def test_config_passes_supervisor_rules(config: dict, translations: dict) -> None:
    assert supervisor_problems(config, translations) == []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c, t: c["schema"].update(model="select(english|french)"), "not in the Supervisor's grammar"),
        (lambda c, t: c.update(options_description={"model": "x"}), "options_description"),
        (lambda c, t: c.update(arch=["amd64", "arm64"]), "bad arch"),
        (lambda c, t: c.pop("version"), "missing required key 'version'"),
        (lambda c, t: c.update(version=0.1), "quoted x.y.z"),
        (lambda c, t: c["options"].pop("threads"), "'threads' has no default"),
        (lambda c, t: c["options"].update(extra=1), "'extra' has no schema entry"),
        (lambda c, t: c["options"].update(temperature=5.0), "default of 'temperature' refused"),
        (lambda c, t: c["options"].update(model="klingon"), "default of 'model' refused"),
        (lambda c, t: t["configuration"].pop("debug"), "'debug' has no English name"),
        (lambda c, t: c.update(map=["shared:rw"]), "bad map entry"),
        (lambda c, t: c.update(ingress="yes"), "ingress must be a bool"),
        (lambda c, t: c.update(panel_icon="account-voice"), "mdi: icon"),
    ],
)
def test_validator_catches_what_supervisor_rejects(config: dict, translations: dict, mutate, expected: str) -> None:
    bad_config, bad_translations = copy.deepcopy(config), copy.deepcopy(translations)
    mutate(bad_config, bad_translations)
    assert any(expected in problem for problem in supervisor_problems(bad_config, bad_translations))


def test_config_has_what_the_issue_asks(config: dict) -> None:
    assert config["arch"] == ["amd64", "aarch64"]
    assert config["init"] is False
    assert config["discovery"] == ["wyoming"]
    assert "10200/tcp" in config["ports"]
    assert {"type": "share", "read_only": False} in config["map"]
    assert config["homeassistant"] == "2025.7.0"  # streaming TTS over Wyoming
    assert "image" not in config  # Supervisor builds the Dockerfile on the device
    schema = config["schema"]
    assert schema["model"].startswith("list(")
    assert schema["hf_token"].rstrip("?") == "password"
    for key in ("model", "voice", "voices_file", "voices_dir", "hf_token", "precision", "quantize", "threads",
                "temperature", "voice_cache_size", "debug"):  # fmt: skip
        assert key in schema


def test_voices_page_behind_ingress(config: dict) -> None:
    """The add-on turns the voices page on by itself, on config.yaml's ingress port, for
    the Supervisor's ingress proxy only; a plain `docker run` gets no page."""
    from wyoming_pocket_tts.settings import ADDON_INGRESS_PORT

    assert config["ingress"] is True and config["ingress_port"] == ADDON_INGRESS_PORT
    assert config["panel_icon"].startswith("mdi:") and config["panel_title"]
    under_supervisor = build_command(addon_options.DEFAULTS, Layout(python=PY, ingress_port=ADDON_INGRESS_PORT))
    assert under_supervisor.argv[len(HEAD):len(HEAD) + 3] == ["--http", f"0.0.0.0:{ADDON_INGRESS_PORT}",
                                                              "--http-ingress"]  # fmt: skip
    args = _server_parser().parse_args(under_supervisor.argv[3:])
    assert (args.http, args.http_ingress) == (f"0.0.0.0:{ADDON_INGRESS_PORT}", "172.30.32.2")
    assert "--http" not in build_command(addon_options.DEFAULTS, LAYOUT).argv


def test_repository_yaml(config: dict) -> None:
    repository = yaml.safe_load((ROOT / "repository.yaml").read_text(encoding="utf-8"))
    assert repository.get("name")
    assert str(repository.get("url", "")).startswith("https://")
    assert repository.get("maintainer")
    assert repository["url"] == config["url"]


def _package_version() -> str:
    text = (ROOT / "wyoming_pocket_tts" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', text, re.MULTILINE)
    assert match, "no __version__ in wyoming_pocket_tts/__init__.py"
    return match.group(1)


def test_version_matches_package(config: dict) -> None:
    # A regex rather than tomllib, which Python 3.10 (still supported) lacks.
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8").split("[project]", 1)[1].split("\n[", 1)[0]
    pyproject_version = re.search(r'^version\s*=\s*"([^"]+)"', project, re.MULTILINE)
    assert pyproject_version, "no version in pyproject.toml's [project] table"
    assert config["version"] == _package_version() == pyproject_version.group(1)


def test_changelog_starts_with_this_version(config: dict) -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^##\s+\[?(\d+\.\d+\.\d+)", text, re.MULTILINE)
    assert first and first.group(1) == config["version"]


def test_model_list_is_the_engine_catalog(config: dict) -> None:
    catalog_file = ROOT / "wyoming_pocket_tts" / "engine" / "catalog.json"
    catalog = json.loads(catalog_file.read_text(encoding="utf-8"))
    listed = RE_SCHEMA_ELEMENT.match(config["schema"]["model"]).group("list").split("|")
    assert listed[0] == "english" == config["options"]["model"]
    assert sorted(listed) == sorted(catalog)


def test_run_script_defaults_equal_config_options(config: dict) -> None:
    assert addon_options.DEFAULTS == config["options"]


def test_addon_options_agree_with_the_settings_declaration(config: dict, translations: dict) -> None:
    """config.yaml, translations/en.yaml and the option mapping cannot drift from settings.py."""
    names = [setting.addon.name for setting in ADDON_SETTINGS] + list(addon_options.MORE_OPTIONS)
    former = {setting.addon.former.name: setting.addon.former for setting in ADDON_SETTINGS if setting.addon.former}
    assert set(config["options"]) == set(names)  # a former option has no default: it is optional
    assert set(config["schema"]) == set(names) | set(former)
    assert set(translations["configuration"]) == set(names) | set(former)
    for name, option in former.items():
        assert config["schema"][name] == option.schema and option.schema.endswith("?"), name
    assert config.get("configuration", translations["configuration"]) == translations["configuration"]
    for setting in ADDON_SETTINGS:
        name = setting.addon.name
        assert config["options"][name] == setting.addon_default, name
        entry = translations["configuration"][name]
        assert entry.get("name") and entry.get("description"), name
        if setting.addon.schema == "catalog":
            continue  # the model list: test_model_list_is_the_engine_catalog
        assert config["schema"][name] == setting.addon_schema, name
        # Every value the add-on's form accepts at its bounds, the server accepts too.
        match = RE_SCHEMA_ELEMENT.match(config["schema"][name])
        for bound in (match.group("i_min"), match.group("i_max"), match.group("f_min"), match.group("f_max")):
            if bound is not None and float(bound) != setting.addon.unset:
                setting.check(bound)


def test_every_addon_option_reaches_the_server_command_line() -> None:
    """Each option, set away from its default, changes the server's command line or env."""
    samples = {bool: True, int: 3, float: 0.5, str: "x.wav"}
    baseline = build_command(addon_options.DEFAULTS, LAYOUT)
    for setting in ADDON_SETTINGS:
        name = setting.addon.name
        value = "en" if setting.pattern else samples[setting.kind if setting.kind in samples else str]
        if setting.kind is bool:
            value = not addon_options.DEFAULTS[name]  # normalize_text is on by default
        if setting.addon.schema == "catalog":
            value = "french"
        if setting.choices:
            value = next(choice for choice in setting.choices if choice != addon_options.DEFAULTS[name])
        command = build_command({**addon_options.DEFAULTS, name: value}, LAYOUT)
        assert (command.argv, command.env) != (baseline.argv, baseline.env), name
        if setting.addon.place != "env":
            assert setting.option in command.argv, name


def test_backup_excludes_weights_but_keeps_the_rest(config: dict) -> None:
    # Supervisor matches each pattern with PurePath.match against the host-side path of
    # every entry under the add-on's data folder, and skips excluded folders whole.
    host_data = PurePosixPath("/data/addons/data/abcd1234_pocket_tts")

    def excluded(relative: str) -> bool:
        path = host_data / relative
        return any(path.match(pattern) for pattern in config["backup_exclude"])

    env = build_command(addon_options.DEFAULTS, Layout(python="python3")).env
    weights = PurePosixPath(env["HF_HOME"]).relative_to("/data")
    assert excluded(str(weights))
    assert not excluded("options.json")
    assert not excluded("voices")


# ---------------------------------------------------------------------------------------
# options.json -> server command line
# ---------------------------------------------------------------------------------------

PY = "/opt/venv/bin/python3"
LAYOUT = Layout(python=PY)
HEAD = [PY, "-m", "wyoming_pocket_tts", "--uri", "tcp://0.0.0.0:10200", "--data-dir", "/data"]


@pytest.mark.parametrize(
    ("sample", "argv", "env"),
    [
        (
            "options_defaults.json",
            HEAD + ["--model", "english", "--voices-dir", "/share/pocket_tts/voices",
                    "--temperature", "0.3", "--voice-cache-size", "8"],
            {"HF_HOME": "/data/huggingface"},
        ),
        (
            "options_full.json",
            HEAD + ["--model", "french_24l", "--language", "fr-CA", "--voice", "mum", "--voices", "/share/pocket_tts/voices.yaml",
                    "--voices-dir", "/share/other_voices", "--temperature", "0.7", "--length-scale", "1.2",
                    "--sentence-silence", "0.5", "--no-normalize", "--quantize", "int8",
                    "--threads", "4", "--voice-cache-size", "16", "--debug"],
            {"HF_HOME": "/data/huggingface", "HF_TOKEN": "hf_secret_token_123"},
        ),
        (
            # Missing keys take defaults, an unknown key is dropped, a voice file is
            # looked up in the share folder, an empty voices folder means none.
            "options_sparse.json",
            HEAD + ["--model", "german", "--voice", "/share/pocket_tts/recordings/grandpa.wav",
                    "--temperature", "1", "--voice-cache-size", "8"],
            {"HF_HOME": "/data/huggingface"},
        ),
    ],
)  # fmt: skip
def test_options_file_gives_exact_command(sample: str, argv: list[str], env: dict[str, str]) -> None:
    command = build_command(load_options(DATA / sample), LAYOUT)
    assert command.argv == argv
    assert command.env == env


def test_token_never_on_the_command_line() -> None:
    command = build_command(load_options(DATA / "options_full.json"), LAYOUT, ["--hf-token", "hf_other"])
    assert "hf_secret_token_123" not in " ".join(command.argv)
    assert "hf_other" not in command.printable()
    assert "--hf-token ***" in command.printable()


def test_extra_arguments_are_appended() -> None:
    command = build_command(addon_options.DEFAULTS, LAYOUT, ["--max-concurrent", "1"])
    assert command.argv[-2:] == ["--max-concurrent", "1"]


GRANDPA = "/share/pocket_tts/recordings/grandpa.wav"  # options_sparse.json's voice


@pytest.mark.parametrize(
    ("extra", "models", "voice"),
    [
        (["--model", "english", "--voice", "alba"], ["english"], "alba"),  # DOCS.md's example
        (["--model", "french"], ["french"], GRANDPA),
        (["--model=french", "--model", "german"], ["french", "german"], GRANDPA),
        (["--mod", "french"], ["french"], GRANDPA),  # argparse's abbreviation of --model
        (["--voice", "alba"], ["german", "italian"], "alba"),
        ([], ["german", "italian"], GRANDPA),
    ],
)  # fmt: skip
def test_arguments_given_replace_the_options_value(extra: list[str], models: list[str], voice: str | None) -> None:
    options = load_options(DATA / "options_sparse.json")  # model german, a voice file
    options["more_models"] = ["italian"]
    command = build_command(options, LAYOUT, extra)
    assert command.argv[len(command.argv) - len(extra) :] == extra
    args = _server_parser().parse_args(command.argv[3:])
    assert (args.model if isinstance(args.model, list) else [args.model]) == models
    assert args.voice == voice


def test_arguments_given_replace_the_fixed_ones_and_the_token() -> None:
    options = load_options(DATA / "options_full.json")
    command = build_command(options, Layout(python=PY, ingress_port=8099),
                            ["--uri", "tcp://127.0.0.1:10300", "--hf-token", "hf_x", "--no-quantize"])  # fmt: skip
    assert command.argv.count("--uri") == 1 and "tcp://0.0.0.0:10200" not in command.argv
    assert "HF_TOKEN" not in command.env
    assert "--quantize" not in command.argv  # the options' int8: --no-quantize sets the same setting
    assert command.argv[command.argv.index("--http") : command.argv.index("--http") + 3] == [
        "--http", "0.0.0.0:8099", "--http-ingress"]  # fmt: skip


def test_unknown_option_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    normalize_options({"retired_option": 1})
    assert "retired_option" in caplog.text


def test_missing_options_file_gives_defaults(tmp_path: Path) -> None:
    assert load_options(tmp_path / "options.json") == addon_options.DEFAULTS


@pytest.mark.parametrize(
    "content",
    ['{"threads": "four"}', '{"quantize": "yes"}', '{"precision": "fast"}', '{"temperature": true}', "[1, 2]",
     "{not json"],
)
def test_bad_options_file_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "options.json"
    path.write_text(content)
    with pytest.raises(OptionsError):
        load_options(path)


def test_main_exits_2_on_bad_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "options.json").write_text('{"threads": "four"}')
    monkeypatch.setenv("POCKET_TTS_OPTIONS", str(tmp_path / "options.json"))
    assert run.main([]) == 2


def _server_parser():
    from wyoming_pocket_tts.__main__ import build_parser

    return build_parser()


@pytest.mark.parametrize("sample", ["options_defaults.json", "options_full.json", "options_sparse.json"])
def test_real_server_accepts_the_command_line(sample: str) -> None:
    parser = _server_parser()
    options = load_options(DATA / sample)
    command = build_command(options, LAYOUT)
    args = parser.parse_args(command.argv[3:])  # a flag it does not know exits here
    assert args.model == options["model"]
    assert args.quantize == options["precision"]
    assert args.debug is options["debug"]
    assert args.voice_cache_size == options["voice_cache_size"]
    assert args.temperature == pytest.approx(options["temperature"])
    assert args.length_scale == pytest.approx(options["length_scale"])
    assert args.sentence_silence == pytest.approx(options["sentence_silence"])
    assert args.normalize is options["normalize_text"]
    assert args.threads == (options["threads"] or None)
    assert args.language == (options["language"] or None)


# ---------------------------------------------------------------------------------------
# Configurations saved by earlier versions (quantize: a bool, now precision: a list)
# ---------------------------------------------------------------------------------------

OLD_SAVED = [{}, {"quantize": False}, {"quantize": True}, {"quantize": True, "voice": "alba", "threads": 2},
             json.loads((DATA / "options_full.json").read_text()), json.loads((DATA / "options_defaults.json").read_text())]


@pytest.mark.parametrize("saved", OLD_SAVED)
def test_a_configuration_saved_by_an_earlier_version_still_starts(config: dict, saved: dict) -> None:
    assert supervisor_start_problems(config, saved) == []


def test_changing_the_type_of_the_saved_option_would_stop_the_add_on(config: dict) -> None:
    """Why `quantize` stays in the schema as an optional bool beside `precision`: the
    Supervisor refuses to start an add-on whose saved value has another type than the
    schema says (and skips its automatic update)."""
    retyped = copy.deepcopy(config)
    retyped["schema"]["quantize"] = retyped["schema"].pop("precision")
    retyped["options"]["quantize"] = retyped["options"].pop("precision")
    assert supervisor_start_problems(retyped, {"quantize": True})
    assert supervisor_start_problems(retyped, {"quantize": False})


@pytest.mark.parametrize(
    ("saved", "precision"),
    [
        ({}, "auto"),
        ({"quantize": False}, "auto"),  # the old default: most users never chose it
        ({"quantize": True}, "int8"),  # chosen: it still means int8
        ({"quantize": True, "precision": "float32"}, "float32"),  # the new option, set, wins
        ({"quantize": False, "precision": "int8"}, "int8"),
        ({"precision": "float32"}, "float32"),
        ({"precision": "auto"}, "auto"),
    ],
)  # fmt: skip
def test_a_saved_quantize_means_what_the_user_meant(config: dict, tmp_path: Path, saved: dict, precision: str) -> None:
    path = tmp_path / "options.json"
    path.write_text(json.dumps(supervisor_options_file(config, saved)))
    command = build_command(load_options(path), LAYOUT)
    expected = [] if precision == "auto" else ["--quantize", precision]
    index = command.argv.index("--quantize") if "--quantize" in command.argv else None
    assert (command.argv[index : index + 2] if index is not None else []) == expected
    assert _server_parser().parse_args(command.argv[3:]).quantize == precision


# ---------------------------------------------------------------------------------------
# Supervisor API and discovery, against a stub Supervisor on 127.0.0.1
# ---------------------------------------------------------------------------------------


class StubSupervisor:
    """Records requests; answers /addons/self/info and /discovery like the Supervisor."""

    def __init__(self, ip_address: str | None = "172.30.33.7", discovery_failures: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.ip_address = ip_address
        self.discovery_failures = discovery_failures
        self.discovered = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                entry = {"method": self.command, "path": self.path, "auth": self.headers.get("Authorization"),
                         "body": body}  # fmt: skip
                stub.requests.append(entry)
                return entry

            def do_GET(self) -> None:  # noqa: N802
                self._record()
                if self.path == "/addons/self/info":
                    self._reply(200, {"result": "ok", "data": {"slug": "pocket_tts", "ip_address": stub.ip_address}})
                else:
                    self._reply(404, {"result": "error", "message": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                self._record()
                if self.path != "/discovery":
                    self._reply(404, {"result": "error", "message": "not found"})
                elif stub.discovery_failures > 0:
                    stub.discovery_failures -= 1
                    self._reply(500, {"result": "error", "message": "busy"})
                else:
                    stub.discovered.set()  # before replying: the client may return at once
                    self._reply(200, {"result": "ok", "data": {"uuid": "0123"}})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def posts(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "POST"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[StubSupervisor]:
    server = StubSupervisor()
    yield server
    server.close()


def test_discovery_payload() -> None:
    assert supervisor_api.discovery_payload("tcp://172.30.33.7:10200") == {
        "service": "wyoming",
        "config": {"uri": "tcp://172.30.33.7:10200"},
    }


def test_announce_posts_ipv4_uri_with_token(stub: StubSupervisor) -> None:
    client = supervisor_api.SupervisorClient("secret-token", stub.url)
    assert run.announce(client, 10200) == "tcp://172.30.33.7:10200"
    assert stub.posts() == [{
        "method": "POST", "path": "/discovery", "auth": "Bearer secret-token",
        "body": {"service": "wyoming", "config": {"uri": "tcp://172.30.33.7:10200"}},
    }]  # fmt: skip
    assert all(r["auth"] == "Bearer secret-token" for r in stub.requests)


def test_discovery_is_retried() -> None:
    stub = StubSupervisor(discovery_failures=2)
    try:
        client = supervisor_api.SupervisorClient("t", stub.url)
        client.register_wyoming("tcp://172.30.33.7:10200", attempts=3, delay_s=0.01)
        assert len(stub.posts()) == 3 and stub.discovered.is_set()
    finally:
        stub.close()


def test_discovery_gives_up_after_its_attempts() -> None:
    stub = StubSupervisor(discovery_failures=100)
    try:
        client = supervisor_api.SupervisorClient("t", stub.url)
        with pytest.raises(supervisor_api.SupervisorError):
            client.register_wyoming("tcp://1.2.3.4:10200", attempts=2, delay_s=0.01)
    finally:
        stub.close()


def test_ipv4_falls_back_to_the_route_when_supervisor_has_none() -> None:
    stub = StubSupervisor(ip_address=None)
    try:
        client = supervisor_api.SupervisorClient("t", stub.url)
        # The route towards the Supervisor's host; here the stub is on loopback.
        assert supervisor_api.container_ipv4(client, supervisor_host="127.0.0.1") == "127.0.0.1"
    finally:
        stub.close()


def test_ipv6_from_supervisor_is_not_advertised() -> None:
    stub = StubSupervisor(ip_address="fd00::5")
    try:
        assert supervisor_api.SupervisorClient("t", stub.url).own_ipv4() is None
    finally:
        stub.close()


def test_no_supervisor_no_discovery(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    assert run.announce(None, 10200) is None
    assert "No SUPERVISOR_TOKEN" in caplog.text


# ---------------------------------------------------------------------------------------
# The whole start: run.py -> (fake) server -> describe -> discovery -> SIGTERM
# ---------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class RunScript:
    """run.py in a subprocess; its log collected line by line as it comes."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def logged(self, text: str) -> bool:
        return text in self.output

    def stop(self) -> int:
        """SIGTERM (as docker stop sends), then the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        return self.proc.returncode


def start_run_script(tmp_path: Path, options_sample: str, port: int, extra_env: dict[str, str]) -> RunScript:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SUPERVISOR_", "HF_"))}
    env.update({
        "PYTHONPATH": str(FAKE_SERVER_PATH),  # shadows the real server
        "POCKET_TTS_OPTIONS": str(DATA / options_sample),
        "POCKET_TTS_DATA_DIR": str(tmp_path / "data"),
        "POCKET_TTS_SHARE_DIR": str(tmp_path / "share"),
        "POCKET_TTS_PORT": str(port),
        "FAKE_SERVER_RECORD": str(tmp_path / "record.json"),
        **extra_env,
    })  # fmt: skip
    return RunScript([sys.executable, str(ADDON_DIR / "run.py")], tmp_path, env)


def test_start_registers_discovery_and_stops_cleanly(tmp_path: Path, stub: StubSupervisor) -> None:
    port = free_port()
    script = start_run_script(tmp_path, "options_full.json", port, {
        "SUPERVISOR_TOKEN": "secret-token", "POCKET_TTS_SUPERVISOR_URL": stub.url,
    })  # fmt: skip
    try:
        wait_for(lambda: script.logged("Registered with Home Assistant as"), 30, "the discovery")
        # The server really answers describe on the port it was given.
        assert wyoming_probe.tts_voice_names(wyoming_probe.describe("127.0.0.1", port)) == ["alba"]
    finally:
        code = script.stop()
    output = script.output
    assert code == 0, output
    assert stub.posts() == [{
        "method": "POST", "path": "/discovery", "auth": "Bearer secret-token",
        "body": {"service": "wyoming", "config": {"uri": f"tcp://172.30.33.7:{port}"}},
    }]  # fmt: skip

    record = json.loads((tmp_path / "record.json").read_text())
    layout = Layout(python=sys.executable, data_dir=PurePosixPath(tmp_path / "data"),
                    share_dir=PurePosixPath(tmp_path / "share"), port=port, ingress_port=8099)  # fmt: skip
    expected = build_command(load_options(DATA / "options_full.json"), layout)
    assert [sys.executable] + record["argv"] == [expected.argv[0]] + expected.argv[3:]
    assert record["env"] == {"HF_TOKEN": "hf_secret_token_123", "HF_HOME": str(tmp_path / "data" / "huggingface")}
    assert "hf_secret_token_123" not in output
    assert "Ready: 1 voice(s): alba" in output
    assert "Server stopped" in output


def test_start_outside_home_assistant_skips_discovery(tmp_path: Path, stub: StubSupervisor) -> None:
    port = free_port()
    script = start_run_script(tmp_path, "options_defaults.json", port, {"POCKET_TTS_SUPERVISOR_URL": stub.url})
    try:
        wait_for(lambda: script.logged("No SUPERVISOR_TOKEN"), 30, "the server to be ready")
    finally:
        code = script.stop()
    assert code == 0, script.output
    assert stub.requests == []
    assert "Ready: 1 voice(s): alba" in script.output
    # The voices folder is created so that users see where recordings go.
    assert (tmp_path / "share" / "voices").is_dir()


def test_failing_server_exit_code_is_passed_on(tmp_path: Path, stub: StubSupervisor) -> None:
    script = start_run_script(tmp_path, "options_defaults.json", free_port(), {
        "SUPERVISOR_TOKEN": "t", "POCKET_TTS_SUPERVISOR_URL": stub.url, "FAKE_SERVER_EXIT": "3",
    })  # fmt: skip
    wait_for(lambda: script.proc.poll() is not None, 30, "run.py to exit")
    assert script.stop() == 3
    assert "exited with code 3" in script.output
    assert stub.posts() == []


def _answers(port: int) -> bool:
    try:
        wyoming_probe.describe("127.0.0.1", port, timeout=1.0)
    except wyoming_probe.ProbeError:
        return False
    return True


def test_real_server_end_to_end_with_demo_model(tmp_path: Path, stub: StubSupervisor) -> None:
    """run.py with the real server on its built-in demo model (random weights, offline)."""
    _server_parser()
    options = tmp_path / "options.json"
    options.write_text(json.dumps({**addon_options.DEFAULTS, "model": "demo", "voice_cache_size": 2}))
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SUPERVISOR_", "HF_"))}
    env.update({
        "PYTHONPATH": str(ROOT), "POCKET_TTS_OPTIONS": str(options), "POCKET_TTS_PORT": str(port),
        "POCKET_TTS_DATA_DIR": str(tmp_path / "data"), "POCKET_TTS_SHARE_DIR": str(tmp_path / "share"),
        "SUPERVISOR_TOKEN": "t", "POCKET_TTS_SUPERVISOR_URL": stub.url, "HF_HUB_OFFLINE": "1",
        "POCKET_TTS_INGRESS_PORT": str(free_port()),
    })  # fmt: skip
    # A demo voice, so that the server has one to list (the demo model has no predefined voices).
    (tmp_path / "share" / "voices").mkdir(parents=True)
    _write_tone(tmp_path / "share" / "voices" / "tone.wav")
    script = RunScript([sys.executable, str(ADDON_DIR / "run.py")], tmp_path, env)
    try:
        wait_for(lambda: stub.discovered.is_set() or script.proc.poll() is not None, 120, "discovery")
    finally:
        code = script.stop()
    assert stub.discovered.is_set(), script.output
    assert code == 0, script.output
    assert stub.posts()[0]["body"]["config"]["uri"] == f"tcp://172.30.33.7:{port}"


def _write_tone(path: Path, seconds: float = 2.0, rate: int = 24000) -> None:
    import math
    import wave

    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 220 * n / rate))) for n in range(int(seconds * rate))
    )
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(frames)


# ---------------------------------------------------------------------------------------
# Health check and the describe probe
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_server() -> Iterator[int]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(FAKE_SERVER_PATH)}
    proc = subprocess.Popen([sys.executable, "-m", "wyoming_pocket_tts", "--uri", f"tcp://127.0.0.1:{port}"],
                            cwd=DATA, env=env)  # fmt: skip
    try:
        wait_for(lambda: _answers(port), 30, "the fake server")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_healthcheck_healthy(fake_server: int) -> None:
    assert healthcheck.main(["127.0.0.1", str(fake_server)]) == 0


def test_healthcheck_nothing_listening(capsys: pytest.CaptureFixture[str]) -> None:
    assert healthcheck.main(["127.0.0.1", str(free_port())]) == 1
    assert "unhealthy" in capsys.readouterr().err


def test_healthcheck_port_from_environment(fake_server: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POCKET_TTS_PORT", str(fake_server))
    assert healthcheck.main([]) == 0


def test_probe_times_out_on_a_silent_server() -> None:
    # Accepts connections, never answers: a wedged event loop looks like this.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        # A probe that hung would be stopped by pytest's own timeout of the whole run; the
        # behaviour checked is that it gives up with ProbeError rather than waiting forever.
        with pytest.raises(wyoming_probe.ProbeError):
            wyoming_probe.describe("127.0.0.1", listener.getsockname()[1], timeout=0.3)


def test_probe_reads_info_with_data_and_payload() -> None:
    import io

    data = json.dumps({"tts": [{"installed": True, "voices": [{"name": "a"}, {"name": "b", "installed": False}]}]})
    stream = io.BytesIO(
        b'{"type": "ping", "version": "1", "payload_length": 3}\nxyz'
        + json.dumps({"type": "info", "version": "1", "data_length": len(data)}).encode() + b"\n" + data.encode()
    )
    assert wyoming_probe.tts_voice_names(wyoming_probe._read_info(stream)) == ["a"]


def test_wait_until_ready_stops_when_server_dies() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert run.wait_until_ready(proc, "127.0.0.1", free_port(), poll_s=0.01) is None


# ---------------------------------------------------------------------------------------
# Dockerfile, .dockerignore, script/setup, README
# ---------------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, rest = full.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    assert not pending, "Dockerfile ends inside a continued line"
    return instructions


def test_dockerfile_has_explicit_multiarch_debian_base() -> None:
    instructions = dockerfile_instructions()
    first_from = next(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    args_before = dict(
        rest.split("=", 1) for keyword, rest in instructions[:first_from] if keyword == "ARG" and "=" in rest
    )
    default = args_before.get("BUILD_FROM", "")
    assert default, "ARG BUILD_FROM needs a default: Supervisor 2026.04+ no longer passes it"
    assert instructions[first_from][1].split()[0] in ("${BUILD_FROM}", "$BUILD_FROM")
    # One default for every arch in config.yaml: a multi-arch manifest, not amd64-...
    assert "debian" in default
    assert not re.search(r"(?:amd64|aarch64|armv7|armhf|i386)-", default)


def test_dockerfile_installs_with_script_setup_and_cpu_torch() -> None:
    instructions = dockerfile_instructions()
    runs = [rest for keyword, rest in instructions if keyword == "RUN"]
    assert any(re.search(r"(?:^|[\s;&|])(?:\./)?script/setup(?:\s|$)", rest) for rest in runs)
    # script/setup finds the CPU build by itself; the build argument is only an override
    assert ("ARG", "TORCH_INDEX_URL=") in instructions
    assert 'CPU_INDEX_URL="https://download.pytorch.org/whl/cpu"' in (ROOT / "script" / "setup").read_text()
    assert not any("pip install" in rest for rest in runs), "install steps belong in script/setup"
    assert any("venv" in rest for rest in runs)


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The instructions of each stage (from its FROM on), in order."""
    stages: list[list[tuple[str, str]]] = []
    for keyword, rest in dockerfile_instructions():
        if keyword == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((keyword, rest))
    return stages


def test_dockerfile_image_holds_the_installed_venv_not_the_source() -> None:
    # A COPY of the source stays in its layer even when a later RUN deletes it: only the
    # build stage copies it, the image takes the venv from there.
    stages = dockerfile_stages()
    assert len(stages) >= 2
    final_copies = [rest.split() for keyword, rest in stages[-1] if keyword == "COPY"]
    assert ["--from=build", "/opt/venv", "/opt/venv"] in final_copies
    assert all(copy[0].startswith("--from=") or copy[:-1] == ["addon"] for copy in final_copies)
    assert not any(keyword == "RUN" for keyword, _ in stages[-1])


def test_dockerfile_leaves_no_apt_cache() -> None:
    # base-debian deletes apt's docker-clean hook: every install must clean up itself.
    for keyword, rest in dockerfile_instructions():
        if keyword == "RUN" and "apt-get install" in rest:
            assert "apt-get clean" in rest and "rm -rf /var/lib/apt/lists/*" in rest, rest


def test_dockerfile_takes_pips_settings_as_build_arguments() -> None:
    declared = {rest.split("=")[0] for keyword, rest in dockerfile_instructions() if keyword == "ARG"}
    assert {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"} <= declared
    # declared without a value: not set (and so not overriding a pip.conf) unless given
    for keyword, rest in dockerfile_instructions():
        if keyword == "ARG" and rest.startswith("PIP_"):
            assert "=" not in rest, rest


def test_dockerfile_installs_the_pinned_versions() -> None:
    copies = [rest.split()[:-1] for keyword, rest in dockerfile_instructions() if keyword == "COPY"]
    assert any("constraints.txt" in sources for sources in copies)


def test_dockerfile_imports_torch_only_where_the_build_runs_natively() -> None:
    # Under qemu (an aarch64 image built on x86) torch's import crashes: the check that
    # always runs reads the packages' metadata; the import is conditional.
    build = dockerfile_stages()[-2]
    run = " ".join(rest for keyword, rest in build if keyword == "RUN")
    assert "script/setup" in run and "pip check" in run and "importlib.metadata" in run
    guarded = re.search(r"if \[\[(.*?)\]\]; then\s*python3 -P -c \"import torch", run)
    assert guarded and "x86_64" in guarded[1] and "IMPORT_TORCH_CHECK" in guarded[1]
    assert run.count("import torch") == 1


def test_dockerfile_healthcheck_exposes_and_entrypoint() -> None:
    instructions = dockerfile_instructions()
    assert ("EXPOSE", "10200/tcp") in instructions or ("EXPOSE", "10200") in instructions
    copies = {rest.split()[-1]: rest.split()[:-1] for keyword, rest in instructions if keyword == "COPY"}
    assert copies.get("/opt/addon") == ["addon"]
    health = next(rest for keyword, rest in instructions if keyword == "HEALTHCHECK")
    exec_form = json.loads(health.split("CMD", 1)[1])
    assert exec_form[-1] == "/opt/addon/healthcheck.py" and (ADDON_DIR / "healthcheck.py").is_file()
    entrypoint = json.loads(next(rest for keyword, rest in instructions if keyword == "ENTRYPOINT"))
    assert entrypoint[-1] == "/opt/addon/run.py" and (ADDON_DIR / "run.py").is_file()


def dockerignored(relative: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; a match on a parent folder counts."""
    parts = relative.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.strip("/")
        regex = re.escape(body).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, candidate) for candidate in candidates):
            ignored = not negate
    return ignored


def test_dockerignore_sends_what_the_build_needs_and_nothing_else() -> None:
    patterns = [
        line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]  # fmt: skip
    for keyword, rest in dockerfile_instructions():
        if keyword == "COPY" and not rest.startswith("--from="):  # a stage's files are not the context's
            for source in rest.split()[:-1]:
                assert not dockerignored(source, patterns), f"COPY {source} is excluded by .dockerignore"
    for needed in ("wyoming_pocket_tts/__init__.py", "wyoming_pocket_tts/engine/catalog.json", "addon/run.py",
                   "constraints.txt"):
        assert not dockerignored(needed, patterns)
    for unwanted in (".git/config", "tests/test_addon.py", "bench/x.py", "addon/__pycache__/run.cpython-313.pyc",
                     "wyoming_pocket_tts/__pycache__/x.pyc", "icon.png"):  # fmt: skip
        assert dockerignored(unwanted, patterns), unwanted


def run_setup(
    tmp_path: Path, env: dict[str, str], fail: str = "", say: str = "", output: list[str] | None = None
) -> tuple[int, list[str]]:
    """Run script/setup with a stand-in interpreter that records how it was called (and
    the PIP_CONSTRAINT it was given) and fails the calls whose arguments match the shell
    pattern `fail`, printing `say` on stderr. Its inline scripts show as "-": "- URL
    SECONDS" asks the CPU index, "- REPORT" reads pip's dry run (CPU or CUDA build), a
    lone "-" prints what was installed. `output` receives script/setup's stderr lines."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "fake-python"
    failing = f'case "$*" in {fail}) echo "{say}" >&2; exit 1;; esac\n' if fail else ""
    fake.write_text(f'#!/bin/sh\necho "$(pwd) $*" >> "{log}"\necho "$PIP_CONSTRAINT" >> "{log}.pins"\n{failing}')
    fake.chmod(0o755)
    clean = {key: value for key, value in os.environ.items()
             if key not in ("TORCH_INDEX_URL", "EXTRAS", "CONSTRAINTS", "PIP_CONSTRAINT")}  # fmt: skip
    result = subprocess.run(
        [str(ROOT / "script" / "setup")], check=False, cwd=tmp_path, env={**clean, "PYTHON": str(fake), **env},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if output is not None:
        output.extend(result.stderr.splitlines())
    calls = log.read_text().splitlines() if log.exists() else []
    if calls:
        pins = set(Path(f"{log}.pins").read_text().splitlines())
        assert pins == {env.get("PIP_CONSTRAINT_EXPECTED", str(ROOT / "constraints.txt"))}, pins
    # the dry run's report is a temporary file: its name varies
    return result.returncode, [re.sub(r"--report \S+", "--report REPORT", re.sub(r" - /\S+$", " - REPORT", call))
                               for call in calls]


CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE = f"{ROOT} - {CPU_INDEX}/torch/ 10"
DRY_RUN = f"{ROOT} -m pip install --quiet --dry-run --ignore-installed --report REPORT torch==2.13.0"
# On Linux x86_64 and aarch64 (PyPI's torch is the CUDA build there) the script looks for the CPU build.
LOOKS_FOR_CPU = platform.system() == "Linux" and platform.machine() in ("x86_64", "aarch64")


def test_setup_plain_takes_the_cpu_index_when_it_answers(tmp_path: Path) -> None:
    assert os.access(ROOT / "script" / "setup", os.X_OK)
    code, calls = run_setup(tmp_path, {})
    assert code == 0
    if LOOKS_FOR_CPU:
        assert calls == [PROBE, f"{ROOT} -m pip install --no-deps torch==2.13.0 --index-url {CPU_INDEX}",
                         f"{ROOT} -m pip install .", f"{ROOT} -"]  # fmt: skip
    else:
        assert calls == [f"{ROOT} -m pip install --no-deps torch==2.13.0", f"{ROOT} -m pip install .", f"{ROOT} -"]


@pytest.mark.skipif(not LOOKS_FOR_CPU, reason="elsewhere PyPI's torch is CPU-only and the script asks nothing")
def test_setup_without_the_cpu_index_takes_a_cpu_build_that_pip_offers(tmp_path: Path) -> None:
    code, calls = run_setup(tmp_path, {}, fail="'- https://'*")
    assert code == 0
    assert calls == [PROBE, DRY_RUN, f"{ROOT} - REPORT", f"{ROOT} -m pip install --no-deps torch==2.13.0",
                     f"{ROOT} -m pip install .", f"{ROOT} -"]  # fmt: skip


@pytest.mark.skipif(not LOOKS_FOR_CPU, reason="elsewhere PyPI's torch is CPU-only and the script asks nothing")
def test_setup_stops_rather_than_install_the_cuda_build(tmp_path: Path) -> None:
    code, calls = run_setup(tmp_path, {}, fail="'- https://'* | '- /'*")
    assert code != 0
    assert calls == [PROBE, DRY_RUN, f"{ROOT} - REPORT"]


@pytest.mark.skipif(not LOOKS_FOR_CPU, reason="elsewhere PyPI's torch is CPU-only and the script asks nothing")
@pytest.mark.parametrize(
    ("pip_says", "reported"),
    [
        ("SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed'))",
         "a TLS failure"),
        ("NewConnectionError('<urllib3.connection.HTTPSConnection>: Failed to establish a new connection: "
         "[Errno -3] Temporary failure in name resolution')", "a network failure"),
        ("ProxyError('Cannot connect to proxy.')", "a proxy failure"),
    ],
)  # fmt: skip
def test_setup_says_what_failed_when_pip_cannot_reach_its_index(tmp_path: Path, pip_says: str, reported: str) -> None:
    output: list[str] = []
    code, calls = run_setup(tmp_path, {}, fail="'- https://'* | *--dry-run*", say=pip_says, output=output)
    assert code != 0
    assert calls == [PROBE, DRY_RUN]
    text = "\n".join(output)
    assert reported in text and pip_says in text
    assert "CUDA" not in text


def test_setup_installs_the_pins_or_none(tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    code, _ = run_setup(tmp_path / "none", {"TORCH_INDEX_URL": "default", "CONSTRAINTS": "none",
                                            "PIP_CONSTRAINT": "/x", "PIP_CONSTRAINT_EXPECTED": ""})  # fmt: skip
    assert code == 0
    (tmp_path / "missing").mkdir()
    code, calls = run_setup(tmp_path / "missing", {"TORCH_INDEX_URL": "default",
                                                   "CONSTRAINTS": str(tmp_path / "missing.txt")})  # fmt: skip
    assert code != 0 and calls == []


def test_constraints_pin_every_package_and_torch_as_setup_does() -> None:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version and " " not in version and "+" not in version, line
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    setup = (ROOT / "script" / "setup").read_text()
    assert pins["torch"] == re.search(r'TORCH_VERSION="([^"]+)"', setup)[1]
    names = re.findall(r'^\s*"([A-Za-z0-9_.-]+)', (ROOT / "pyproject.toml").read_text(), re.M)
    for name in names:  # every direct dependency and extra, and the build backend
        assert re.sub(r"[-_.]+", "-", name).lower() in pins, name
    assert {"setuptools", "wheel"} <= pins.keys()


def test_setup_cpu_index_and_extras(tmp_path: Path) -> None:
    code, calls = run_setup(tmp_path, {"TORCH_INDEX_URL": "https://mirror.example/whl/cpu", "EXTRAS": "test"})
    assert code == 0
    assert calls == [
        f"{ROOT} -m pip install --no-deps torch==2.13.0 --index-url https://mirror.example/whl/cpu",
        f"{ROOT} -m pip install .[test]",
        f"{ROOT} -",
    ]


def test_setup_default_index_is_pips_own_unchecked(tmp_path: Path) -> None:
    code, calls = run_setup(tmp_path, {"TORCH_INDEX_URL": "default"})
    assert code == 0
    assert calls == [f"{ROOT} -m pip install --no-deps torch==2.13.0", f"{ROOT} -m pip install .", f"{ROOT} -"]


def test_setup_stops_at_the_first_failure(tmp_path: Path) -> None:
    code, calls = run_setup(tmp_path, {"TORCH_INDEX_URL": "default"}, fail="*")
    assert code != 0
    assert len(calls) == 1


def _fenced_lines(text: str) -> list[str]:
    lines, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line)
    return lines


def test_readme_install_command_is_script_setup() -> None:
    readme = ROOT / "README.md"
    assert any("script/setup" in line for line in _fenced_lines(readme.read_text(encoding="utf-8"))), (
        "README.md must install with script/setup, like the Dockerfile"
    )


def test_ci_installs_with_script_setup() -> None:
    assert "script/setup" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    # So that CI installs what the README installs, on the same pins (constraints.txt).
    readme = _fenced_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    command = next(line for line in readme if "EXTRAS=test script/setup" in line and "pytest" in line)
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


# ---------------------------------------------------------------------------------------
# Images and documentation
# ---------------------------------------------------------------------------------------


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk; also checks the image data decompresses."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    ihdr = data[16:29]
    (crc,) = struct.unpack(">I", data[29:33])
    assert zlib.crc32(b"IHDR" + ihdr) == crc
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    idat, offset = b"", 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        if kind == b"IDAT":
            idat += data[offset + 8 : offset + 8 + length]
        offset += 12 + length
    if depth == 8 and interlace == 0:
        assert len(zlib.decompress(idat)) == height * (1 + width * channels)
    return width, height


def test_icon_is_128_square() -> None:
    assert png_size(ROOT / "icon.png") == (128, 128)


def test_logo_is_about_250_by_100() -> None:
    width, height = png_size(ROOT / "logo.png")
    assert 200 <= width <= 300 and 80 <= height <= 120


def test_docs_cover_what_users_need() -> None:
    docs = (ROOT / "DOCS.md").read_text(encoding="utf-8")
    for needed in (
        "Repositories",  # where the repository URL is added
        "https://github.com/wyoming-pocket-tts/wyoming-pocket-tts",
        "Wyoming Protocol",
        "/share/pocket_tts",
        "voices.yaml",
        "kyutai/pocket-tts",
        "Read",  # token role
        "Raspberry Pi 5",
        "mini PC",
        "estimate",
        "real-time factor",
        "Troubleshooting",
        "docker run",
    ):
        assert needed.lower() in docs.lower(), needed
    # The voices.yaml example in the docs parses as YAML with the documented keys.
    blocks = re.findall(r"```yaml\n(.*?)```", docs, re.DOTALL)
    examples = [yaml.safe_load(block) for block in blocks]
    assert any(isinstance(e, dict) and isinstance(e.get("voices"), list) for e in examples)
