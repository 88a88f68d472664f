"""Spoken names of the units Home Assistant sensors report, and of currencies.

Written by hand: num2words names numbers, not units, and its currency support misses
the Swiss franc and reads integers as cents. Each entry is "singular|plural" (one form
when both are the same); a leading "f:" marks a feminine noun, which changes the number
before it in German, French, Italian, Spanish and Portuguese ("eine Stunde", "une heure"),
and "m:" a German masculine one ("für einen Euro"; unmarked German nouns are neuter).
"""

from __future__ import annotations

from dataclasses import dataclass

from .unit_names import unit_names


@dataclass(frozen=True)
class Noun:
    """A unit or currency name in one language."""

    singular: str
    plural: str
    feminine: bool = False
    masculine: bool = False  # German only: "für einen Euro" (neuter: "für ein Kilo")

    def form(self, singular: bool) -> str:
        return self.singular if singular else self.plural


def _nouns(table: dict[str, str]) -> dict[str, Noun]:
    nouns = {}
    for symbol, spec in table.items():
        feminine, masculine = spec.startswith("f:"), spec.startswith("m:")
        singular, _, plural = spec.removeprefix("f:").removeprefix("m:").partition("|")
        nouns[symbol] = Noun(singular, plural or singular, feminine, masculine)
    return nouns


# Symbols as Home Assistant writes them; "µ" is also accepted as the Greek "μ", "m³" as "m3".
UNIT_SYMBOLS = ("°C", "°F", "%", "kWh", "Wh", "MWh", "kW", "W", "V", "A", "mA", "km/h", "m/s",
                "mph", "km", "mm", "cm", "m³", "m²", "m", "kg", "g", "hPa", "mbar", "lx",
                "ppm", "µg/m³", "dB", "min", "h", "s", "ms", "L", "°")

_WRITTEN: dict[str, dict[str, Noun]] = {
    "en": _nouns({
        "l": "liter|liters", "ml": "milliliter|milliliters", "mL": "milliliter|milliliters", "Min.": "minute|minutes",
        "°C": "degree Celsius|degrees Celsius", "°F": "degree Fahrenheit|degrees Fahrenheit",
        "°": "degree|degrees", "%": "percent", "kWh": "kilowatt hour|kilowatt hours",
        "Wh": "watt hour|watt hours", "MWh": "megawatt hour|megawatt hours",
        "kW": "kilowatt|kilowatts", "W": "watt|watts", "V": "volt|volts", "A": "amp|amps",
        "mA": "milliamp|milliamps", "km/h": "kilometer per hour|kilometers per hour",
        "m/s": "meter per second|meters per second", "mph": "mile per hour|miles per hour",
        "km": "kilometer|kilometers", "mm": "millimeter|millimeters",
        "cm": "centimeter|centimeters", "m³": "cubic meter|cubic meters",
        "m²": "square meter|square meters", "m": "meter|meters", "kg": "kilogram|kilograms",
        "g": "gram|grams", "hPa": "hectopascal|hectopascals", "mbar": "millibar|millibars",
        "lx": "lux", "ppm": "part per million|parts per million",
        "µg/m³": "microgram per cubic meter|micrograms per cubic meter",
        "dB": "decibel|decibels", "min": "minute|minutes", "h": "hour|hours",
        "s": "second|seconds", "ms": "millisecond|milliseconds", "L": "liter|liters",
    }),
    "de": _nouns({
        "l": "m:Liter", "ml": "m:Milliliter", "mL": "m:Milliliter", "Min.": "f:Minute|Minuten", "Min": "f:Minute|Minuten", "Std.": "f:Stunde|Stunden", "Std": "f:Stunde|Stunden", "Sek.": "f:Sekunde|Sekunden", "Sek": "f:Sekunde|Sekunden",
        "°C": "m:Grad Celsius", "°F": "m:Grad Fahrenheit", "°": "m:Grad", "%": "Prozent",
        "kWh": "f:Kilowattstunde|Kilowattstunden", "Wh": "f:Wattstunde|Wattstunden",
        "MWh": "f:Megawattstunde|Megawattstunden", "kW": "Kilowatt", "W": "Watt",
        "V": "Volt", "A": "Ampere", "mA": "Milliampere", "km/h": "m:Kilometer pro Stunde",
        "m/s": "m:Meter pro Sekunde", "mph": "f:Meile pro Stunde|Meilen pro Stunde",
        "km": "m:Kilometer", "mm": "m:Millimeter", "cm": "m:Zentimeter", "m³": "m:Kubikmeter",
        "m²": "m:Quadratmeter", "m": "m:Meter", "kg": "Kilogramm", "g": "Gramm",
        "hPa": "Hektopascal", "mbar": "Millibar", "lx": "Lux", "ppm": "ppm",
        "µg/m³": "Mikrogramm pro Kubikmeter", "dB": "Dezibel", "min": "f:Minute|Minuten",
        "h": "f:Stunde|Stunden", "s": "f:Sekunde|Sekunden",
        "ms": "f:Millisekunde|Millisekunden", "L": "m:Liter", "Uhr": "Uhr",
    }),
    "fr": _nouns({
        "l": "litre|litres", "ml": "millilitre|millilitres", "mL": "millilitre|millilitres", "Mo": "mégaoctet|mégaoctets", "Go": "gigaoctet|gigaoctets", "ko": "kilooctet|kilooctets", "To": "téraoctet|téraoctets", "Mo/s": "mégaoctet par seconde|mégaoctets par seconde",
        "°C": "degré Celsius|degrés Celsius", "°F": "degré Fahrenheit|degrés Fahrenheit",
        "°": "degré|degrés", "%": "pour cent", "kWh": "kilowattheure|kilowattheures",
        "Wh": "wattheure|wattheures", "MWh": "mégawattheure|mégawattheures",
        "kW": "kilowatt|kilowatts", "W": "watt|watts", "V": "volt|volts",
        "A": "ampère|ampères", "mA": "milliampère|milliampères",
        "km/h": "kilomètre par heure|kilomètres par heure",
        "m/s": "mètre par seconde|mètres par seconde", "mph": "mile par heure|miles par heure",
        "km": "kilomètre|kilomètres", "mm": "millimètre|millimètres",
        "cm": "centimètre|centimètres", "m³": "mètre cube|mètres cubes",
        "m²": "mètre carré|mètres carrés", "m": "mètre|mètres", "kg": "kilo|kilos",
        "g": "gramme|grammes", "hPa": "hectopascal|hectopascals", "mbar": "millibar|millibars",
        "lx": "lux", "ppm": "partie par million|parties par million",
        "µg/m³": "microgramme par mètre cube|microgrammes par mètre cube",
        "dB": "décibel|décibels", "min": "f:minute|minutes", "h": "f:heure|heures",
        "s": "f:seconde|secondes", "ms": "f:milliseconde|millisecondes", "L": "litre|litres",
    }),
    "it": _nouns({
        "l": "litro|litri", "ml": "millilitro|millilitri", "mL": "millilitro|millilitri",
        "°C": "grado Celsius|gradi Celsius", "°F": "grado Fahrenheit|gradi Fahrenheit",
        "°": "grado|gradi", "%": "percento", "kWh": "chilowattora", "Wh": "wattora",
        "MWh": "megawattora", "kW": "chilowatt", "W": "watt", "V": "volt", "A": "ampere",
        "mA": "milliampere", "km/h": "chilometro orario|chilometri orari",
        "m/s": "metro al secondo|metri al secondo", "mph": "f:miglio orario|miglia orarie",
        "km": "chilometro|chilometri", "mm": "millimetro|millimetri",
        "cm": "centimetro|centimetri", "m³": "metro cubo|metri cubi",
        "m²": "metro quadrato|metri quadrati", "m": "metro|metri", "kg": "chilo|chili",
        "g": "grammo|grammi", "hPa": "ettopascal", "mbar": "millibar", "lx": "lux",
        "ppm": "parte per milione|parti per milione",
        "µg/m³": "microgrammo per metro cubo|microgrammi per metro cubo",
        "dB": "decibel", "min": "minuto|minuti", "h": "f:ora|ore", "s": "secondo|secondi",
        "ms": "millisecondo|millisecondi", "L": "litro|litri",
    }),
    "pt": _nouns({
        "l": "litro|litros", "ml": "mililitro|mililitros", "mL": "mililitro|mililitros",
        "°C": "grau Celsius|graus Celsius", "°F": "grau Fahrenheit|graus Fahrenheit",
        "°": "grau|graus", "%": "por cento", "kWh": "quilowatt-hora|quilowatts-hora",
        "Wh": "watt-hora|watts-hora", "MWh": "megawatt-hora|megawatts-hora",
        "kW": "quilowatt|quilowatts", "W": "watt|watts", "V": "volt|volts",
        "A": "ampere|amperes", "mA": "miliampere|miliamperes",
        "km/h": "quilómetro por hora|quilómetros por hora",
        "m/s": "metro por segundo|metros por segundo", "mph": "f:milha por hora|milhas por hora",
        "km": "quilómetro|quilómetros", "mm": "milímetro|milímetros",
        "cm": "centímetro|centímetros", "m³": "metro cúbico|metros cúbicos",
        "m²": "metro quadrado|metros quadrados", "m": "metro|metros", "kg": "quilo|quilos",
        "g": "grama|gramas", "hPa": "hectopascal|hectopascais", "mbar": "milibar|milibares",
        "lx": "lux", "ppm": "f:parte por milhão|partes por milhão",
        "µg/m³": "micrograma por metro cúbico|microgramas por metro cúbico",
        "dB": "decibel|decibéis", "min": "minuto|minutos", "h": "f:hora|horas",
        "s": "segundo|segundos", "ms": "milissegundo|milissegundos", "L": "litro|litros",
    }),
    "es": _nouns({
        "l": "litro|litros", "ml": "mililitro|mililitros", "mL": "mililitro|mililitros",
        "°C": "grado Celsius|grados Celsius", "°F": "grado Fahrenheit|grados Fahrenheit",
        "°": "grado|grados", "%": "por ciento", "kWh": "kilovatio hora|kilovatios hora",
        "Wh": "vatio hora|vatios hora", "MWh": "megavatio hora|megavatios hora",
        "kW": "kilovatio|kilovatios", "W": "vatio|vatios", "V": "voltio|voltios",
        "A": "amperio|amperios", "mA": "miliamperio|miliamperios",
        "km/h": "kilómetro por hora|kilómetros por hora",
        "m/s": "metro por segundo|metros por segundo", "mph": "f:milla por hora|millas por hora",
        "km": "kilómetro|kilómetros", "mm": "milímetro|milímetros",
        "cm": "centímetro|centímetros", "m³": "metro cúbico|metros cúbicos",
        "m²": "metro cuadrado|metros cuadrados", "m": "metro|metros", "kg": "kilo|kilos",
        "g": "gramo|gramos", "hPa": "hectopascal|hectopascales", "mbar": "milibar|milibares",
        "lx": "lux", "ppm": "f:parte por millón|partes por millón",
        "µg/m³": "microgramo por metro cúbico|microgramos por metro cúbico",
        "dB": "decibelio|decibelios", "min": "minuto|minutos", "h": "f:hora|horas",
        "s": "segundo|segundos", "ms": "milisegundo|milisegundos", "L": "litro|litros",
    }),
    "nl": _nouns({
        "l": "liter", "ml": "milliliter", "mL": "milliliter", "min.": "minuut|minuten",
        "°C": "graad Celsius|graden Celsius", "°F": "graad Fahrenheit|graden Fahrenheit",
        "°": "graad|graden",
        "%": "procent", "kWh": "kilowattuur", "Wh": "wattuur", "MWh": "megawattuur",
        "kW": "kilowatt", "W": "watt", "V": "volt", "A": "ampère", "mA": "milliampère",
        "km/h": "kilometer per uur", "m/s": "meter per seconde", "mph": "mijl per uur",
        "km": "kilometer", "mm": "millimeter", "cm": "centimeter", "m³": "kubieke meter",
        "m²": "vierkante meter", "m": "meter", "kg": "kilo", "g": "gram",
        "hPa": "hectopascal", "mbar": "millibar", "lx": "lux", "ppm": "ppm",
        "µg/m³": "microgram per kubieke meter", "dB": "decibel", "min": "minuut|minuten",
        "h": "uur", "s": "seconde|seconden", "ms": "milliseconde|milliseconden",
        "L": "liter", "uur": "uur",
    }),
}

# Written here (with their idioms) first, then every other unit Home Assistant reports.
UNITS: dict[str, dict[str, Noun]] = {
    code: {**_nouns(unit_names(code)), **written} for code, written in _WRITTEN.items()
}

# Currency symbols and codes as written, mapped to ISO codes.
CURRENCY_SIGNS = {"$": "USD", "US$": "USD", "€": "EUR", "£": "GBP", "CHF": "CHF", "Fr.": "CHF",
                  "EUR": "EUR", "USD": "USD", "GBP": "GBP"}

# code -> (main unit, hundredth)
CURRENCIES: dict[str, dict[str, tuple[Noun, Noun]]] = {
    language: {code: (_nouns({"": main})[""], _nouns({"": minor})[""])
               for code, (main, minor) in table.items()}
    for language, table in {
        "en": {"EUR": ("euro|euros", "cent|cents"), "USD": ("dollar|dollars", "cent|cents"),
               "GBP": ("pound|pounds", "penny|pence"),
               "CHF": ("Swiss franc|Swiss francs", "centime|centimes")},
        "de": {"EUR": ("m:Euro", "m:Cent"), "USD": ("m:Dollar", "m:Cent"), "GBP": ("Pfund", "m:Penny|Pence"),
               "CHF": ("m:Franken", "m:Rappen")},
        "fr": {"EUR": ("euro|euros", "centime|centimes"), "USD": ("dollar|dollars", "cent|cents"),
               "GBP": ("f:livre|livres", "penny|pence"),
               "CHF": ("franc suisse|francs suisses", "centime|centimes")},
        "it": {"EUR": ("euro", "centesimo|centesimi"), "USD": ("dollaro|dollari", "centesimo|centesimi"),
               "GBP": ("f:sterlina|sterline", "penny|pence"),
               "CHF": ("franco svizzero|franchi svizzeri", "centesimo|centesimi")},
        "pt": {"EUR": ("euro|euros", "cêntimo|cêntimos"), "USD": ("dólar|dólares", "cêntimo|cêntimos"),
               "GBP": ("f:libra|libras", "penny|pence"),
               "CHF": ("franco suíço|francos suíços", "cêntimo|cêntimos")},
        "es": {"EUR": ("euro|euros", "céntimo|céntimos"), "USD": ("dólar|dólares", "centavo|centavos"),
               "GBP": ("f:libra|libras", "penique|peniques"),
               "CHF": ("franco suizo|francos suizos", "céntimo|céntimos")},
        "nl": {"EUR": ("euro", "cent"), "USD": ("dollar", "cent"), "GBP": ("pond", "penny|pence"),
               "CHF": ("Zwitserse frank|Zwitserse frank", "rappen")},
    }.items()
}
