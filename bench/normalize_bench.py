"""normalize() per reply: median and p99 over a few hundred Home Assistant and LLM replies.

    python bench/normalize_bench.py [--replies 400] [--seed 15] [--long]

Replies are made from templates of what Home Assistant intents, sensor states and LLM
agents say, in all seven languages, with seeded random values. Reported, side by side in
one run: normalize() on its first pass over the replies (number-word caches cold), on a
second pass (caches warm, as in a running server), and the streamed path: SentenceSplitter
against sentence_stream's SentenceBoundaryDetector over the same replies in 5-character
chunks (their ratio; the splitter must not slow first audio). SSML replies (the same
replies wrapped in speak, s, break, prosody, voice, say-as and sub, as an LLM writes them)
are read by SsmlReader and each segment normalised, as the server does: in one piece, and
streamed in 5-character chunks. `--long` also times degenerate input once each (20,000 and
200,000 digits, "999 " * 1500).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sentence_stream import SentenceBoundaryDetector

# Run from a checkout without installing: the repository root holds the package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wyoming_pocket_tts.text import SentenceSplitter, normalize  # noqa: E402
from wyoming_pocket_tts.text.ssml import Speech, SsmlReader  # noqa: E402

TEMPLATES: dict[str, list[str]] = {
    "en": ["It is {t} °C and cloudy.", "The time is {h12}:{mm} PM.", "Living Room Humidity is {p} %",
           "The dryer used {kwh} kWh today, about ${money}.", "Your timer has 0:{mm}:00 left.",
           "**Weather** ☀️\n\n- Today: sunny, {t} °C\n- Tomorrow: rain, {t} °C\n- Wind: {w} km/h",
           "Sure! I turned on the kitchen lights 💡 and set the thermostat to {t} °C.",
           "Your next event is on 2027-03-{d:02d} at {h24}:{mm}.",
           "Solar produced {watts} W; the battery is at {p} % and {v} V.",
           "Here's your morning summary:\n\n1. **Weather**: {t} °C, humidity {p} %, wind {w} km/h.\n"
           "2. **Energy**: the house used {kwh} kWh yesterday (${money}).\n3. **Calendar**: dentist at "
           "{h12}:{mm} PM, see [details](https://calendar.example.com/event/123).\n\nHave a great day! 😊"],
    "de": ["Es sind {t} °C und bewölkt.", "Es ist {h24}:{mm} Uhr.", "Wohnzimmer Luftfeuchtigkeit ist {p} %",
           "Der Termin ist am {d}. März um {h24}:{mm} Uhr.", "Der Trockner hat {kwhc} kWh verbraucht, ca. {moneyc} €.",
           "**Wetter** ☀️\n\n- Heute: sonnig, {tc} °C\n- Morgen: Regen, {tc} °C",
           "Alles klar! Ich habe z. B. das Licht im Flur eingeschaltet 👍",
           "Hier ist deine Übersicht:\n\n| Raum | Temperatur |\n|---|---|\n| Küche | {tc} °C |\n"
           "| Bad | {tc} °C |\n\nDer Strom kostet heute {moneyc} € pro kWh, ca. {p} % weniger als gestern."],
    "fr": ["Il fait {tc} °C et nuageux.", "Il est {h24}h{mm}.", "L'humidité du salon est de {p} %",
           "Rendez-vous le {d} mars 2027 à {h24}:{mm}.", "Le sèche-linge a consommé env. {kwhc} kWh.",
           "**Météo** ☀️\n\n- Aujourd'hui : {tc} °C\n- Demain : pluie"],
    "it": ["Ci sono {tc} °C.", "Sono le {h24}:{mm}.", "L'umidità è {p} %", "Il vento soffia a {w} km/h."],
    "pt": ["Estão {tc} °C.", "São {h24}:{mm}.", "A humidade é {p} %", "A eletricidade custa {moneyc} €."],
    "es": ["Hace {tc} °C.", "Son las {h24}:{mm}.", "La humedad es {p} %", "La luz cuesta {moneyc} € hoy."],
    "nl": ["Het is {tc} °C.", "Het is {h24}:{mm}.", "De luchtvochtigheid is {p} %", "Stroom kost {moneyc} €."],
}
# Issue 28's kinds, from Home Assistant's own templates (timers, clock, sensor units) and
# recipes and schedules as an LLM writes them: added to each language's templates.
MORE_TEMPLATES: dict[str, list[str]] = {
    "en": ["1 hour and {d} minutes left.", "The download speed is {kwh} Mbit/s, {w} GB used.",
           "Add 1/2 cup of milk; open Mon–Fri {h24}:00–18:00."],
    "de": ["Noch 1 Stunde und {d} Minuten.", "Die Downloadrate beträgt {kwhc} Mbit/s, {w} GB belegt.",
           "Geöffnet Mo–Fr 8–18 Uhr, ca. ±0,5 °C, Termin am {d}-03-2027."],
    "fr": ["1 heure et {d} minutes restantes.", "Le débit est de {kwhc} Mbit/s, pluie {tc} mm/h."],
    "it": ["1 ora e {d} minuti rimanenti.", "Aggiungi 1/2 tazza di zucchero, {w} L di acqua."],
    "pt": ["É 1 e {d}.", "Ligue para 912 345 678, restam 2 horas e {d} minutos."],
    "es": ["Es la 1 y {d} de la madrugada.", "Añade 1/2 taza de azúcar; abierto lun-vie de 9:00 a 18:00."],
    "nl": ["1 uur en {d} minuten", "De afspraak is op {d}-03-2027, 1/2 uur, {kwhc} Mbit/s."],
}
for _language, _more in MORE_TEMPLATES.items():
    TEMPLATES[_language] = [*TEMPLATES[_language], *_more]

# Degenerate input (issue 27): each is normalised once and its CPU time reported.
LONG_INPUTS = {
    '"999 " * 1500': "999 " * 1500,
    "20,000 digits": "1" * 20_000,
    "200,000 digits": "1" * 200_000,
}


# How SSML wraps a reply ({reply}); {d}, {h24}, {mm} are drawn like the replies' values.
SSML_TEMPLATES = [
    "<speak>{reply}</speak>",
    '<speak><p><s>{reply}</s><break time="400ms"/><s>OK.</s></p></speak>',
    '<speak>{reply} <break strength="strong"/><prosody rate="slow">Take care.</prosody></speak>',
    '<speak xml:lang="{language}">{reply} <say-as interpret-as="date" format="dmy">{d}.03.2027</say-as>, '
    '<say-as interpret-as="time">{h24}:{mm}</say-as>.</speak>',
    '<speak><voice name="alba">{reply}</voice> <sub alias="Home Assistant">HA</sub> '
    '<say-as interpret-as="telephone">+49 30 {d}{mm}</say-as> <emphasis>now</emphasis>.</speak>',
]


def ssml_replies(made: list[tuple[str, str]], seed: int) -> list[tuple[str, str]]:
    """Each reply in one of SSML_TEMPLATES (its markup characters escaped)."""
    generator = random.Random(seed)
    wrapped = []
    for text, language in made:
        escaped = text.replace("&", "&amp;").replace("<", "&lt;")
        wrapped.append((generator.choice(SSML_TEMPLATES).format(
            reply=escaped, language=language, d=generator.randint(1, 28), h24=generator.randint(0, 23),
            mm=f"{generator.randint(0, 59):02d}"), language))
    return wrapped


def speak_ssml(text: str, language: str, chunk: int | None = None) -> list[str]:
    """What the server does with an SSML reply before the engine: read it, normalise each segment."""
    reader = SsmlReader(language)
    step = chunk or len(text) or 1
    segments = [s for start in range(0, len(text), step) for s in reader.add_chunk(text[start:start + step])]
    return [normalize(s.text, s.language) for s in [*segments, *reader.finish()] if isinstance(s, Speech)]


def replies(count: int, seed: int) -> list[tuple[str, str]]:
    generator = random.Random(seed)
    made = []
    for index in range(count):
        language = list(TEMPLATES)[index % len(TEMPLATES)]
        template = generator.choice(TEMPLATES[language])
        temperature = round(generator.uniform(-10, 35), 1)
        kwh, money = round(generator.uniform(0.1, 30), 2), round(generator.uniform(0.1, 99), 2)
        made.append((template.format(
            t=temperature, tc=str(temperature).replace(".", ","), h12=generator.randint(1, 12),
            h24=generator.randint(0, 23), mm=f"{generator.randint(0, 59):02d}", p=generator.randint(0, 100),
            kwh=kwh, kwhc=str(kwh).replace(".", ","), money=f"{money:.2f}",
            moneyc=f"{money:.2f}".replace(".", ","), w=generator.randint(0, 80),
            d=generator.randint(1, 28), watts=generator.randint(0, 9000), v=round(generator.uniform(11, 14), 1),
        ), language))
    return made


def per_reply_us(work: Callable[[str, str], object],
                 made: list[tuple[str, str]]) -> tuple[list[float], list[float]]:
    """Wall time and this thread's CPU time per reply, in µs.

    On a shared machine the wall-time tail is the scheduler's (a preempted call waits
    whole 4 ms slices); the CPU time shows what the work itself costs.
    """
    wall, cpu = [], []
    for text, language in made:
        start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
        work(text, language)
        cpu.append((time.thread_time_ns() - start_cpu) / 1000)
        wall.append((time.perf_counter_ns() - start) / 1000)
    return wall, cpu


def split_ours(text: str, language: str) -> list[str]:
    splitter = SentenceSplitter(language)
    sentences = [s for start in range(0, len(text), 5) for s in splitter.add_chunk(text[start:start + 5])]
    return sentences + [splitter.finish()]


def split_library(text: str, language: str) -> list[str]:
    detector = SentenceBoundaryDetector()
    sentences = [s for start in range(0, len(text), 5) for s in detector.add_chunk(text[start:start + 5])]
    return sentences + [detector.finish()]


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=400)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--long", action="store_true",
                        help="also time degenerate input (long digit runs; minutes on code before issue 27)")
    args = parser.parse_args()
    made = replies(args.replies, args.seed)
    normalize("warm up the imports and compiled patterns: 1 °C", "en")
    cold = per_reply_us(normalize, made)
    warm = per_reply_us(normalize, made)
    ours = per_reply_us(split_ours, made)
    library = per_reply_us(split_library, made)
    wrapped = ssml_replies(made, args.seed)
    ssml_whole = per_reply_us(speak_ssml, wrapped)
    ssml_streamed = per_reply_us(lambda text, language: speak_ssml(text, language, chunk=5), wrapped)
    print(f"{len(made)} replies, {statistics.mean(len(text) for text, _ in made):.0f} characters on average "
          f"({statistics.mean(len(text) for text, _ in wrapped):.0f} as SSML)")
    print(f"{'':42s} {'wall median':>12s} {'wall p99':>10s} {'CPU median':>11s} {'CPU p99':>9s}  (µs)")
    for name, (wall, cpu) in (("normalize, first pass (caches cold)", cold),
                              ("normalize, second pass (caches warm)", warm),
                              ("SentenceSplitter, 5-char chunks", ours),
                              ("sentence_stream detector, 5-char chunks", library),
                              ("SSML read + normalize, one piece", ssml_whole),
                              ("SSML read + normalize, 5-char chunks", ssml_streamed)):
        print(f"{name:42s} {statistics.median(wall):12.1f} {p99(wall):10.1f} "
              f"{statistics.median(cpu):11.1f} {p99(cpu):9.1f}")
    print(f"SentenceSplitter / sentence_stream CPU median ratio: "
          f"{statistics.median(ours[1]) / statistics.median(library[1]):.2f}")
    if args.long:
        for name, text in LONG_INPUTS.items():
            started = time.thread_time()
            try:
                normalize(text, "en")
                outcome = "ok"
            except Exception as error:  # noqa: BLE001 - reported, as the server would have
                outcome = f"{type(error).__name__}: {str(error)[:60]}"
            print(f"normalize({name}): {time.thread_time() - started:.3f} s CPU, {outcome}")


if __name__ == "__main__":
    main()
