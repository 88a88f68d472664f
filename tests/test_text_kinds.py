"""normalize() on the kinds of reply issue 28's second corpus found misread, in all seven languages.

The cases are written here from Home Assistant's own response templates (the intents
repository's responses/<language>/: timers, clock, date, weather, climate, lists) filled
with values, and from the units its sensors report; each kind is checked in every
language, not only the examples the issue names.
"""

from __future__ import annotations

import pytest

from wyoming_pocket_tts.text import normalize

LANGUAGES = ("en", "de", "fr", "it", "pt", "es", "nl")


def cases(table: dict[str, list[tuple[str, str]]]) -> list[tuple[str, str, str]]:
    assert set(table) == set(LANGUAGES), "each kind is checked in every language"
    return [(language, written, spoken) for language in LANGUAGES for written, spoken in table[language]]


def check(language: str, written: str, spoken: str) -> None:
    assert normalize(written, language) == spoken


# --- number words agree with the noun they count (HassTimerStatus, HassGetCurrentTime) ---------

AGREEMENT = {
    "en": [("1 hour and 21 minutes left.", "one hour and twenty-one minutes left."),
           ("1 timer is paused.", "one timer is paused.")],
    "de": [("Noch 1 Stunde und 21 Minuten.", "Noch eine Stunde und einundzwanzig Minuten."),
           ("1 Minute und 1 Sekunde verbleiben.", "eine Minute und eine Sekunde verbleiben."),
           ("1 pausierter Timer.", "ein pausierter Timer."),
           ("Der Timer endet in 1 Stunde.", "Der Timer endet in einer Stunde."),
           ("Das dauert 1 bis 2 Stunden.", "Das dauert eine bis zwei Stunden."),
           ("Lampe 1 von 3 ist an.", "Lampe eins von drei ist an.")],
    "fr": [("1 heure et 21 minutes restantes.", "une heure et vingt et une minutes restantes."),
           ("1 minute et 31 secondes", "une minute et trente et une secondes"),
           ("1 minuteur est en pause.", "un minuteur est en pause."),
           ("Il est 1 heure.", "Il est une heure.")],
    "it": [("1 ora e 21 minuti rimanenti.", "un'ora e ventun minuti rimanenti."),
           ("1 timer in pausa.", "un timer in pausa."),
           ("21 ore", "ventun ore"),
           ("1 porta aperta", "una porta aperta")],
    "pt": [("Restam 1 hora e 21 minutos.", "Restam uma hora e vinte e um minutos."),
           ("2 horas e 2 minutos.", "duas horas e dois minutos."),
           ("21 horas", "vinte e uma horas"),
           ("É 1 e 5", "É uma e cinco"),
           ("São 2 e 20", "São duas e vinte"),
           ("200 pessoas", "duzentas pessoas"),
           ("1 temporizador em pausa.", "um temporizador em pausa.")],
    "es": [("Le quedan 1 hora y 21 minutos.", "Le quedan una hora y veintiún minutos."),
           ("Es la 1 y 5 de la madrugada", "Es la una y cinco de la madrugada"),
           ("Son las 2 y 21 de la tarde", "Son las dos y veintiuno de la tarde"),
           ("a las 21", "a las veintiuna"),
           ("2 horas", "dos horas"),
           ("1 temporizador en pausa.", "un temporizador en pausa."),
           ("1 o 2 horas", "una o dos horas"),
           ("El resultado es 1.", "El resultado es uno.")],
    "nl": [("1 uur en 21 minuten", "één uur en eenentwintig minuten"),
           ("1 gepauzeerde timer.", "één gepauzeerde timer.")],
}


@pytest.mark.parametrize(("language", "written", "spoken"), cases(AGREEMENT))
def test_number_words_agree_with_the_noun(language: str, written: str, spoken: str) -> None:
    check(language, written, spoken)
