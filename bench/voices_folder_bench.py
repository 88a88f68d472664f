"""What the voices folder and file can cost a server (issue 27, item 5), two code trees side by side.

    git archive b38ca94 | (mkdir -p /tmp/base && tar -x -C /tmp/base)
    python bench/voices_folder_bench.py /tmp/base .          # the previous commit, then this tree
    python bench/voices_folder_bench.py . --repeat 3         # one tree, three runs per scenario

Each scenario starts a real server (`python -m wyoming_pocket_tts --model demo`, run from
each tree in turn, alternating: tree A, tree B, tree A...) on a fresh data directory:
  * 10k: a voices folder of 10,000 recordings (hard links to one 1 s WAV). Reported:
    describe latency at rest (20 describes: median, worst), just after a change (a file
    added and one removed before each of 5 describes: median, worst), and a burst of 50
    describes at once (worst, and how many were answered within 10 s).
  * long: a 30 s recording is encoded, then a sparse 1 GiB WAV (6.2 hours, 0.5 MB on
    disk) and a one-hour FLAC are added. Reported: the server's peak RSS (VmHWM) after
    the 30 s recording and after the two long ones, and the worst describe meanwhile.
  * fifo: two models (the demo and a random-weight 7M English config), a voices file
    naming a FIFO for each. Reported: the worst of 12 describes, and how long a request
    for the second model's voice took (its model is loaded for it) or "none in 60 s".
A describe with no answer within 5 s counts as 5 s. Prints a Markdown table. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from attack_fixtures import timed_describe  # noqa: E402
from engine_fixtures import local_architecture  # noqa: E402 -- the tests' builders
from server_fixtures import ServerProcess, describe, free_port, one_shot, peak_rss_mb  # noqa: E402
from voices_attack_fixtures import long_flac, many_files, sparse_wav, voice_samples  # noqa: E402

DESCRIBE_TIMEOUT_S = 5.0


def start(tree: Path, work: Path, *extra: str) -> ServerProcess:
    port = free_port()
    log_path = work / f"server-{port}.log"
    model = [] if "--model" in extra else ["--model", "demo"]
    cmd = [sys.executable, "-m", "wyoming_pocket_tts", *model, "--uri", f"tcp://127.0.0.1:{port}",
           "--data-dir", str(work / "data"), *extra]  # fmt: skip
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tree,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    return ServerProcess(proc, port, log_path)


def latency(server: ServerProcess) -> float:
    try:
        return asyncio.run(describe(server.port, timeout=DESCRIBE_TIMEOUT_S))[1]
    except (OSError, asyncio.TimeoutError, AssertionError):
        return DESCRIBE_TIMEOUT_S


def ready(server: ServerProcess, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info, _ = asyncio.run(describe(server.port, timeout=DESCRIBE_TIMEOUT_S))
            if info.tts[0].voices and "(loading)" not in (info.tts[0].description or ""):
                return
        except (OSError, asyncio.TimeoutError, AssertionError):
            pass
        if server.proc.poll() is not None:
            raise RuntimeError(server.log()[-2000:])
        time.sleep(0.2)
    raise RuntimeError(f"not ready in {timeout} s")


def wait_log(server: ServerProcess, pattern: str, count: int, timeout: float, worst: list[float]) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(re.findall(pattern, server.log())) >= count:
            return True
        worst.append(latency(server))
        time.sleep(0.2)
    return False


def write_voice(path: Path, seconds: float) -> None:
    import soundfile

    soundfile.write(str(path), voice_samples(seconds), 24000, subtype="PCM_16")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def scenario_10k(tree: Path, work: Path) -> dict[str, str]:
    folder = many_files(work / "voices", 10_000)
    server = start(tree, work, "--voices-dir", str(folder))
    try:
        ready(server)
        steady = [latency(server) for _ in range(20)]
        changed = []
        for index in range(5):
            write_voice(folder / f"aaa{index}.wav", 1.0)
            (folder / f"voice{index + 10:05d}.wav").unlink()
            changed.append(latency(server))

        async def burst() -> list[float]:
            # From four addresses: a newer server lets one hold at most half the connections.
            return list(await asyncio.gather(*(timed_describe(server.port, f"127.0.0.{1 + n % 4}", timeout=10.0)
                                               for n in range(50))))  # fmt: skip

        bursted = [took if took < 10.0 else float("inf") for took in asyncio.run(burst())]
    finally:
        server.stop()
    answered = [took for took in bursted if took != float("inf")]
    return {
        "describe at rest (median / worst)": f"{ms(statistics.median(steady))} / {ms(max(steady))}",
        "describe after a change (median / worst)": f"{ms(statistics.median(changed))} / {ms(max(changed))}",
        "burst of 50 describes (worst; answered)": f"{ms(max(answered)) if answered else '-'}; {len(answered)}/50",
    }


def scenario_long(tree: Path, work: Path) -> dict[str, str]:
    folder = work / "voices"
    folder.mkdir()
    write_voice(folder / "normal.wav", 30.0)
    server = start(tree, work, "--voices-dir", str(folder))
    worst: list[float] = []
    try:
        ready(server)
        wait_log(server, r"voice 'normal' (encoded|loaded)", 1, 120, [])
        before = peak_rss_mb(server)
        sparse_wav(folder / "sparse.wav")
        long_flac(folder / "hour.flac")
        done = wait_log(server, r"voice '(sparse|hour)' ", 2, 300, worst)
        after = peak_rss_mb(server)
    finally:
        server.stop()
    return {
        "peak RSS after a 30 s recording": f"{before:.0f} MB",
        "peak RSS after a 1 GiB sparse WAV and a 1 h FLAC": f"{after:.0f} MB{'' if done else ' (not done in 300 s)'}",
        "worst describe meanwhile": ms(max(worst, default=0.0)),
    }


def scenario_fifo(tree: Path, work: Path, custom_config: Path) -> dict[str, str]:
    folder = work / "household"
    folder.mkdir()
    write_voice(folder / "papa.wav", 3.0)
    write_voice(folder / "oma.wav", 2.0)
    os.mkfifo(folder / "pipe.wav")
    os.mkfifo(folder / "pipe2.wav")
    voices_file = folder / "voices.yaml"
    voices_file.write_text(yaml.safe_dump({"voices": [
        {"name": "papa", "audio": "papa.wav"}, {"name": "piped", "audio": "pipe.wav"},
        {"name": "oma", "audio": "oma.wav", "model": str(custom_config)},
        {"name": "piped2", "audio": "pipe2.wav", "model": str(custom_config)},
    ]}), encoding="utf-8")  # fmt: skip
    (work / "empty").mkdir()
    server = start(tree, work, "--model", "demo", "--model", str(custom_config), "--voices", str(voices_file),
                   "--voices-dir", str(work / "empty"))  # fmt: skip
    try:
        try:
            ready(server, timeout=60)
        except RuntimeError:
            pass  # the old code may never list its voices: measure what the clients get anyway
        describes = [latency(server) for _ in range(12)]
        started = time.monotonic()
        try:
            response = asyncio.run(one_shot(server.port, "Hello there.", voice="oma", timeout=60))
            other = f"{time.monotonic() - started:.1f} s" if response.audio else f"error: {response.error}"
        except (OSError, asyncio.TimeoutError):
            other = "none in 60 s"
    finally:
        server.stop()
    return {"worst of 12 describes (two models, FIFOs in the voices file)": ms(max(describes)),
            "the second model's voice answered after": other}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="code trees to compare (each holds wyoming_pocket_tts/)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each scenario per tree (default 1)")
    parser.add_argument("--scenarios", default="10k,long,fifo", help="which to run (default: 10k,long,fifo)")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.trees]
    wanted = args.scenarios.split(",")
    with tempfile.TemporaryDirectory(prefix="voices-folder-bench-") as scratch:
        root = Path(scratch)
        custom = local_architecture("english_7m_2026-10", root / "model").config_path
        scenarios: dict[str, Callable[[Path, Path], dict[str, str]]] = {
            "10k": scenario_10k, "long": scenario_long,
            "fifo": lambda tree, work: scenario_fifo(tree, work, custom),
        }  # fmt: skip
        results: dict[str, dict[Path, list[dict[str, str]]]] = {}
        for name in wanted:
            for run in range(args.repeat):
                for index, tree in enumerate(trees):  # alternating: A, B, A, B...
                    work = root / f"{name}-{run}-{index}"
                    work.mkdir()
                    print(f"{name}: {tree} (run {run + 1})", file=sys.stderr, flush=True)
                    results.setdefault(name, {}).setdefault(tree, []).append(scenarios[name](tree, work))
    print("| scenario | figure | " + " | ".join(str(tree) for tree in trees) + " |")
    print("|---|---|" + "---|" * len(trees))
    for name, by_tree in results.items():
        for figure in next(iter(by_tree.values()))[0]:
            cells = [", ".join(run[figure] for run in by_tree[tree]) for tree in trees]
            print(f"| {name} | {figure} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
