"""normalize() on the kinds of reply issue 28's second corpus found misread, in all seven languages.

The cases are written here from Home Assistant's own response templates (the intents
repository's responses/<language>/: timers, clock, date, weather, climate, lists) filled
with values, and from the units its sensors report; each kind is checked in every
language, not only the examples the issue names.
"""

from __future__ import annotations

import pytest

from wyoming_pocket_tts.text import normalize
from wyoming_pocket_tts.text.numbers import cardinal
from wyoming_pocket_tts.text.unit_names import AMBIGUOUS, HOME_ASSISTANT_UNITS
from wyoming_pocket_tts.text.units import UNITS

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


# --- every unit Home Assistant reports (HassGetState: "{{ state }} {{ unit_of_measurement }}") -----

UNIT_REPLIES = {
    "en": [("The download speed is 95.3 Mbit/s.", "The download speed is ninety-five point three megabits per second."),
           ("The NAS has 1.5 TB free, the backup is 820 MB.",
            "The NAS has one point five terabytes free, the backup is eight hundred and twenty megabytes."),
           ("Rain intensity is 2.5 mm/h.", "Rain intensity is two point five millimeters per hour."),
           ("The tank holds 1 L; the cup 250 mL.", "The tank holds one liter; the cup two hundred and fifty milliliters."),
           ("Set a timer for 5 in the kitchen.", "Set a timer for five in the kitchen."),
           ("Rain today: 0.5 in.", "Rain today: zero point five inches.")],
    "de": [("Die Downloadrate beträgt 95,3 Mbit/s.", "Die Downloadrate beträgt fünfundneunzig Komma drei Megabit pro Sekunde."),
           ("Die Festplatte hat noch 1,5 TB frei, das Backup hat 820 MB.",
            "Die Festplatte hat noch eins Komma fünf Terabyte frei, das Backup hat achthundertzwanzig Megabyte."),
           ("Die Regenintensität beträgt 2,5 mm/h.", "Die Regenintensität beträgt zwei Komma fünf Millimeter pro Stunde."),
           ("Im Tank ist 1 l, in der Tasse 250 ml.", "Im Tank ist ein Liter, in der Tasse zweihundertfünfzig Milliliter."),
           ("Die Leitfähigkeit ist 450 µS/cm.", "Die Leitfähigkeit ist vierhundertfünfzig Mikrosiemens pro Zentimeter.")],
    "fr": [("Le débit descendant est de 95,3 Mbit/s.",
            "Le débit descendant est de quatre-vingt-quinze virgule trois mégabits par seconde."),
           ("La sauvegarde fait 820 MB.", "La sauvegarde fait huit cent vingt mégaoctets."),
           ("Intensité de la pluie : 2,5 mm/h.", "Intensité de la pluie : deux virgule cinq millimètres par heure."),
           ("Le réservoir contient 1 L.", "Le réservoir contient un litre."),
           ("Le débit est de 12 L/min.", "Le débit est de douze litres par minute.")],
    "it": [("La velocità di download è 95,3 Mbit/s.",
            "La velocità di download è novantacinque virgola tre megabit al secondo."),
           ("Il backup è 820 MB.", "Il backup è ottocentoventi megabyte."),
           ("L'intensità della pioggia è 2,5 mm/h.", "L'intensità della pioggia è due virgola cinque millimetri all'ora."),
           ("Il serbatoio contiene 1 L.", "Il serbatoio contiene un litro."),
           ("La potenza è 3 kVA.", "La potenza è tre chilovoltampere.")],
    "pt": [("A velocidade de download é 95,3 Mbit/s.",
            "A velocidade de download é noventa e cinco vírgula três megabits por segundo."),
           ("O NAS tem 1,5 TB livres, a cópia tem 820 MB.",
            "O NAS tem um vírgula cinco terabytes livres, a cópia tem oitocentos e vinte megabytes."),
           ("A intensidade da chuva é 2,5 mm/h.", "A intensidade da chuva é dois vírgula cinco milímetros por hora."),
           ("O depósito tem 1 L.", "O depósito tem um litro."),
           ("A glicose é 95 mg/dL.", "A glicose é noventa e cinco miligramas por decilitro.")],
    "es": [("La velocidad de descarga es de 95,3 Mbit/s.",
            "La velocidad de descarga es de noventa y cinco coma tres megabits por segundo."),
           ("El NAS tiene 1,5 TB libres, la copia ocupa 820 MB.",
            "El NAS tiene uno coma cinco terabytes libres, la copia ocupa ochocientos veinte megabytes."),
           ("La intensidad de lluvia es de 2,5 mm/h.", "La intensidad de lluvia es de dos coma cinco milímetros por hora."),
           ("El depósito tiene 1 L.", "El depósito tiene un litro."),
           ("La presión es de 30 inHg.", "La presión es de treinta pulgadas de mercurio.")],
    "nl": [("De downloadsnelheid is 95,3 Mbit/s.", "De downloadsnelheid is vijfennegentig komma drie megabit per seconde."),
           ("De NAS heeft 1,5 TB vrij, de back-up is 820 MB.",
            "De NAS heeft één komma vijf terabyte vrij, de back-up is achthonderdtwintig megabyte."),
           ("De regenintensiteit is 2,5 mm/h.", "De regenintensiteit is twee komma vijf millimeter per uur."),
           ("De tank bevat 1 L.", "De tank bevat één liter."),
           ("Het verbruik is 15 kWh/100km.", "Het verbruik is vijftien kilowattuur per honderd kilometer.")],
}


@pytest.mark.parametrize(("language", "written", "spoken"), cases(UNIT_REPLIES))
def test_sensor_units_are_read(language: str, written: str, spoken: str) -> None:
    check(language, written, spoken)


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_home_assistant_unit_is_spoken(language: str) -> None:
    # "State: 7 Mbit/s." for each of Home Assistant's units: the unit's name, never the symbol.
    seven = cardinal(7, language)
    for symbol in HOME_ASSISTANT_UNITS:
        spoken = normalize(f"State: 7 {symbol}.", language)
        name = UNITS[language][symbol].plural
        assert spoken == f"State: {seven} {name}.", (symbol, spoken)
        assert not any(char.isdigit() for char in spoken)


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_unit_that_is_also_a_word_is_a_unit_only_where_no_word_follows(language: str) -> None:
    for symbol in sorted(AMBIGUOUS):
        assert normalize(f"7 {symbol} the", language).endswith(f" {symbol} the"), symbol
