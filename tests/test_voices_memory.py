"""The server's voice memory: one bound over every model's voices (issue 16)."""

from __future__ import annotations

import threading

from wyoming_pocket_tts.voices.memory import SharedVoiceCache


class State:
    nbytes = 10


def test_one_bound_over_every_model() -> None:
    shared = SharedVoiceCache(max_count=3)
    english, german = shared.for_model("english"), shared.for_model("german")
    for name in ("alba", "mum"):
        english.put(name, State(), 10)
    german.put("juergen", State(), 10)
    german.put("oma", State(), 10)  # the fourth voice of the server: english's oldest goes
    assert shared.keys() == [("english", "mum"), ("german", "juergen"), ("german", "oma")]
    assert english.keys() == ["mum"] and german.keys() == ["juergen", "oma"]
    assert shared.total_bytes == 30 and english.total_bytes == 10 and german.total_bytes == 20


def test_the_same_name_in_two_models_is_two_voices() -> None:
    shared = SharedVoiceCache(max_count=4)
    english, german = shared.for_model("english"), shared.for_model("german")
    mine, theirs = State(), State()
    english.put("demo", mine, 10)
    german.put("demo", theirs, 10)
    assert (entry := english.get("demo")) is not None and entry.value is mine
    assert (entry := german.get("demo")) is not None and entry.value is theirs
    german.remove("demo")
    assert "demo" in english and "demo" not in german


def test_each_models_default_is_pinned_and_a_new_pin_replaces_its_own_only() -> None:
    shared = SharedVoiceCache(max_count=3)
    english, german = shared.for_model("english"), shared.for_model("german")
    english.pin("mum")
    german.pin("oma")
    english.put("mum", State(), 10)
    german.put("oma", State(), 10)
    for name in "abc":
        german.put(name, State(), 10)
    assert shared.keys() == [("english", "mum"), ("german", "oma"), ("german", "c")]
    english.pin("alba")  # the voices file's default changed: mum is no longer protected
    german.put("d", State(), 10)
    assert ("english", "mum") not in shared.keys() and ("german", "oma") in shared.keys()


def test_clear_gives_back_a_models_voices_and_unpins_its_default() -> None:
    shared = SharedVoiceCache(max_count=2)
    english, german = shared.for_model("english"), shared.for_model("german")
    german.pin("oma")
    german.put("oma", State(), 10)
    english.put("mum", State(), 10)
    german.clear()  # the German model is unloaded
    assert shared.keys() == [("english", "mum")] and shared.total_bytes == 10
    english.put("alba", State(), 10)
    english.put("dad", State(), 10)  # nothing of german is protected any more
    assert shared.keys() == [("english", "alba"), ("english", "dad")]


def test_libraries_in_threads_keep_the_bound() -> None:
    shared = SharedVoiceCache(max_count=5)
    shares = [shared.for_model(f"model{n}") for n in range(4)]

    def fill(n: int) -> None:
        for i in range(200):
            shares[n].put(f"voice{i % 7}", State(), 10)
            shares[n].get(f"voice{(i + 3) % 7}")

    threads = [threading.Thread(target=fill, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(shared.keys()) == 5 and shared.total_bytes == 50
