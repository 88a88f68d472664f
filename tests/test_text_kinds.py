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


# --- Recipes read by an LLM: "1/2 taza" is "media taza". ---

FRACTIONS = {
    "en": [
        ('Add 1/2 cup of milk.',
         'Add one half cup of milk.'),
        ('Add 3/4 L of water.',
         'Add three quarters liter of water.'),
    ],
    "de": [
        ('Gib 1/2 Tasse Zucker dazu.',
         'Gib eine halbe Tasse Zucker dazu.'),
        ('Dazu 1/2 l Milch und 1/4 kg Mehl.',
         'Dazu ein halber Liter Milch und ein Viertel Kilogramm Mehl.'),
    ],
    "fr": [
        ('Ajoutez 1/2 tasse de sucre.',
         'Ajoutez une demi tasse de sucre.'),
        ('Ajoutez 1/4 L de lait.',
         'Ajoutez un quart de litre de lait.'),
    ],
    "it": [
        ('Aggiungi 1/2 tazza di zucchero.',
         'Aggiungi mezza tazza di zucchero.'),
        ('Aggiungi 1/2 L di latte.',
         'Aggiungi mezzo litro di latte.'),
    ],
    "pt": [
        ('Junte 1/2 chávena de açúcar.',
         'Junte meia chávena de açúcar.'),
        ('Junte 1/2 L de leite e 1/4 kg de farinha.',
         'Junte meio litro de leite e um quarto de quilo de farinha.'),
    ],
    "es": [
        ('Añade 1/2 taza de azúcar.',
         'Añade media taza de azúcar.'),
        ('Añade 1/2 L de leche y 3/4 kg de harina.',
         'Añade medio litro de leche y tres cuartos de kilo de harina.'),
    ],
    "nl": [
        ('Voeg 1/2 kop suiker toe.',
         'Voeg een halve kop suiker toe.'),
        ('Nog 1/2 uur wachten.',
         'Nog een half uur wachten.'),
    ],
}


# --- Nine digits in groups of three (Spanish, Portuguese) without 0 or +; dialled forms everywhere. ---

PHONES = {
    "en": [
        ('Call +1 555 123 4567.',
         'Call plus one, five five five, one two three, four five six seven.'),
    ],
    "de": [
        ('Ruf +49 30 1234567 an.',
         'Ruf plus vier neun, drei null, eins zwei drei vier fünf sechs sieben an.'),
    ],
    "fr": [
        ('Appelez le +33 1 23 45 67 89.',
         'Appelez le plus trois trois, un, deux trois, quatre cinq, six sept, huit neuf.'),
    ],
    "it": [
        ('Chiama il +39 06 1234 5678.',
         'Chiama il più tre nove, zero sei, uno due tre quattro, cinque sei sette otto.'),
    ],
    "pt": [
        ('Ligue para 912 345 678.',
         'Ligue para nove um dois, três quatro cinco, seis sete oito.'),
        ('Ligue para 213 456 789 ou +351 912 345 678.',
         'Ligue para dois um três, quatro cinco seis, sete oito nove ou mais três cinco um, nove um dois, três quatro cinco, seis sete oito.'),
    ],
    "es": [
        ('Llama al 912 345 678.',
         'Llama al nueve uno dos, tres cuatro cinco, seis siete ocho.'),
        ('Llama al 612 34 56 78.',
         'Llama al seis uno dos, tres cuatro, cinco seis, siete ocho.'),
        ('Hay 200 000 personas.',
         'Hay doscientas mil personas.'),
    ],
    "nl": [
        ('Bel 020 123 4567.',
         'Bel nul twee nul, één twee drie, vier vijf zes zeven.'),
    ],
}


# --- Weekdays in schedules, units and extremes with a dot, and the symbols ≈ ~ ±. ---

ABBREVIATIONS = {
    "en": [
        ('Open Mon–Fri 9:00–17:00, Sat/Sun closed.',
         "Open Monday to Friday nine o'clock to seventeen hundred, Saturday and Sunday closed."),
        ('It takes about 45 min.',
         'It takes about forty-five minutes.'),
        ('Temperature is ≈ 21 °C, ±0.5 °C.',
         'Temperature is approximately twenty-one degrees Celsius, plus or minus zero point five degrees Celsius.'),
    ],
    "de": [
        ('Geöffnet Mo–Fr 8–18 Uhr, Sa/So geschlossen.',
         'Geöffnet Montag bis Freitag acht bis achtzehn Uhr, Samstag und Sonntag geschlossen.'),
        ('Das dauert 45 Min. Dann ist es fertig.',
         'Das dauert fünfundvierzig Minuten. Dann ist es fertig.'),
        ('Es sind ~21 °C, ±0,5 °C.',
         'Es sind ungefähr einundzwanzig Grad Celsius, plus minus null Komma fünf Grad Celsius.'),
    ],
    "fr": [
        ('Ouvert lun.–ven. de 9h00 à 18h00.',
         'Ouvert lundi à vendredi de neuf heures à dix-huit heures.'),
        ('Cela prend ≈ 45 min.',
         'Cela prend environ quarante-cinq minutes.'),
        ('Il fait ~21 °C, ±0,5 °C.',
         'Il fait environ vingt et un degrés Celsius, plus ou moins zéro virgule cinq degré Celsius.'),
    ],
    "it": [
        ('Aperto lun-ven dalle 9:00 alle 18:00.',
         'Aperto lunedì a venerdì dalle nove alle diciotto in punto.'),
        ('Temperatura max. 25 °C, min. 12 °C.',
         'Temperatura massimo venticinque gradi Celsius, minimo dodici gradi Celsius.'),
        ('Ci sono ~21 °C, ±0,5 °C.',
         'Ci sono circa ventun gradi Celsius, più o meno zero virgola cinque gradi Celsius.'),
    ],
    "pt": [
        ('Aberto seg-sex das 9:00 às 18:00.',
         'Aberto segunda-feira a sexta-feira das nove às dezoito horas.'),
        ('Temperatura máx. 25 °C, mín. 12 °C.',
         'Temperatura máximo vinte e cinco graus Celsius, mínimo doze graus Celsius.'),
        ('Estão ≈ 21 °C, ±0,5 °C.',
         'Estão aproximadamente vinte e um graus Celsius, mais ou menos zero vírgula cinco graus Celsius.'),
    ],
    "es": [
        ('Abierto lun-vie de 9:00 a 18:00.',
         'Abierto lunes a viernes de nueve a dieciocho en punto.'),
        ('Temperatura máx./mín.: 25/12 °C.',
         'Temperatura máximo/mínimo: veinticinco/doce grados Celsius.'),
        ('Hace ~21 °C, ±0,5 °C.',
         'Hace aproximadamente veintiún grados Celsius, más o menos cero coma cinco grados Celsius.'),
    ],
    "nl": [
        ('Open ma-vr van 9:00 tot 17:00.',
         'Open maandag tot vrijdag van negen uur tot zeventien uur.'),
        ('Maandag t/m vrijdag, max. 25 °C.',
         'Maandag tot en met vrijdag, maximaal vijfentwintig graden Celsius.'),
        ('Het is ≈ 21 °C, ±0,5 °C.',
         'Het is ongeveer eenentwintig graden Celsius, plus of min nul komma vijf graden Celsius.'),
    ],
}


# --- dd-mm-yyyy (month first in English, as with slashes). ---

DASHED_DATES = {
    "en": [
        ('Due 03-14-2027.',
         'Due March fourteenth, twenty twenty-seven.'),
    ],
    "de": [
        ('Termin am 14-03-2027.',
         'Termin am vierzehnten März zweitausendsiebenundzwanzig.'),
    ],
    "fr": [
        ('Le 14-03-2027.',
         'Le quatorze mars deux mille vingt-sept.'),
    ],
    "it": [
        ('Il 14-03-2027.',
         'Il quattordici marzo duemilaventisette.'),
    ],
    "pt": [
        ('A 14-03-2027.',
         'A catorze de março de dois mil e vinte e sete.'),
    ],
    "es": [
        ('El 14-03-2027.',
         'El catorce de marzo de dos mil veintisiete.'),
    ],
    "nl": [
        ('De afspraak is op 14-03-2027.',
         'De afspraak is op veertien maart tweeduizendzevenentwintig.'),
    ],
}


# --- "en punto", "in punto", "horas" after the range's last hour only. ---

TIME_RANGES = {
    "en": [
        ('Open 10:00–12:00.',
         "Open ten o'clock to twelve o'clock."),
    ],
    "de": [
        ('Geöffnet von 10:00 bis 12:00 Uhr.',
         'Geöffnet von zehn Uhr bis zwölf Uhr.'),
    ],
    "fr": [
        ('Ouvert de 10:00 à 12:00.',
         'Ouvert de dix heures à douze heures.'),
    ],
    "it": [
        ('Aperto dalle 10:00 alle 12:00.',
         'Aperto dalle dieci alle dodici in punto.'),
        ('Sono le 10:00.',
         'Sono le dieci in punto.'),
    ],
    "pt": [
        ('Aberto das 10:00 às 12:00.',
         'Aberto das dez às doze horas.'),
    ],
    "es": [
        ('Abierto de 10:00 a 12:00.',
         'Abierto de diez a doce en punto.'),
        ('Son las 10:00.',
         'Son las diez en punto.'),
    ],
    "nl": [
        ('Open van 10:00 tot 12:00.',
         'Open van tien uur tot twaalf uur.'),
    ],
}


# --- A unit's or a template's full stop left before a comma. ---

STRAY_STOPS = {
    "en": [
        ('Take 5 min., then stir.',
         'Take five minutes, then stir.'),
    ],
    "de": [
        ('Es sind 5 Std., dann ist es fertig.',
         'Es sind fünf Stunden, dann ist es fertig.'),
    ],
    "fr": [
        ('Le minuteur: 1 minute., puis rien.',
         'Le minuteur: une minute, puis rien.'),
    ],
    "it": [
        ('Il timer: 1 minuto., poi basta.',
         'Il timer: un minuto, poi basta.'),
    ],
    "pt": [
        ('O temporizador: 1 minuto., depois nada.',
         'O temporizador: um minuto, depois nada.'),
    ],
    "es": [
        ('El temporizador: 1 minuto., luego nada.',
         'El temporizador: un minuto, luego nada.'),
    ],
    "nl": [
        ('De timer: 1 minuut., dan niets.',
         'De timer: één minuut, dan niets.'),
    ],
}


# Each kind, in every language: the test's id names the kind and the language.
KINDS = {
    "number_words_agree_with_the_noun": AGREEMENT,
    "sensor_units_are_read": UNIT_REPLIES,
    "a_fraction_before_a_noun_is_its_share_of_it": FRACTIONS,
    "phone_numbers_are_read_in_digit_groups": PHONES,
    "abbreviations_and_symbols_are_said": ABBREVIATIONS,
    "dates_written_with_dashes_are_dates": DASHED_DATES,
    "a_range_of_whole_hours_says_the_hour_word_once": TIME_RANGES,
    "a_stop_before_a_comma_is_dropped": STRAY_STOPS,
}


@pytest.mark.parametrize(("language", "written", "spoken"), [
    pytest.param(language, written, spoken, id=f"{kind}-{language}-{index}")
    for kind, table in KINDS.items()
    for index, (language, written, spoken) in enumerate(cases(table))
])
def test_each_kind_is_read(language: str, written: str, spoken: str) -> None:
    check(language, written, spoken)
