"""Names for every unit Home Assistant's sensors report, composed per language.

Home Assistant writes its units as symbols (its `UnitOf*` constants, `homeassistant/const.py`
and `components/sensor/const.py`: "Mbit/s", "GB", "mm/h", "mL", "kvarh", "µS/cm"...): more
than a hundred, most of them a metric prefix on a base unit, a power of a length, or one
unit per another. Rather than write each one out seven times, a language here names its
prefixes, its base units and how it says "square", "cubic" and "per"; `unit_names(code)`
composes the rest. `units.py` writes out the common ones by hand (with their idioms:
"chilometri orari", "Kilometer pro Stunde"), which take precedence.

Symbols that are also words ("in", "mi", "ha", "st", "bar", "d") are marked `AMBIGUOUS`: they
are read as units only where no lower-case word follows ("5 in." but not "5 in the hall").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

# Every unit symbol Home Assistant's constants define (its sensor units), as it writes them;
# `units.py` adds a few that people write too ("l", "ml", "Min.").
HOME_ASSISTANT_UNITS = (
    # power, apparent and reactive power, energy, reactive energy, energy per distance
    "mW", "W", "kW", "MW", "GW", "TW", "BTU/h", "mVA", "VA", "kVA", "mvar", "var", "kvar",
    "J", "kJ", "MJ", "GJ", "mWh", "Wh", "kWh", "MWh", "GWh", "TWh", "cal", "kcal", "Mcal", "Gcal",
    "varh", "kvarh", "kWh/100km", "Wh/km", "mi/kWh", "km/kWh",
    # electric current and potential, frequency
    "mA", "A", "µV", "mV", "V", "kV", "MV", "Hz", "kHz", "MHz", "GHz",
    # temperature, angle, time
    "°C", "°F", "K", "°", "µs", "ms", "s", "min", "h", "d",
    # length, area, volume, flow
    "mm", "cm", "m", "km", "in", "ft", "yd", "mi", "nmi",
    "m²", "cm²", "km²", "mm²", "in²", "ft²", "yd²", "mi²", "ac", "ha",
    "ft³", "CCF", "MCF", "m³", "L", "mL", "gal", "fl. oz.",
    "m³/h", "m³/min", "m³/s", "ft³/min", "L/h", "L/min", "L/s", "gal/h", "gal/min", "gal/d", "mL/s",
    # mass, pressure, sound, speed
    "g", "kg", "mg", "µg", "oz", "lb", "st",
    "mPa", "Pa", "hPa", "kPa", "bar", "cbar", "mbar", "mmHg", "inHg", "inH2O", "psi",
    "dB", "dBA", "dBm",
    "Beaufort", "ft/s", "in/s", "m/min", "m/s", "km/h", "kn", "mph", "mm/s",
    # precipitation, irradiance, light, concentration, conductivity
    "in/d", "in/h", "mm/d", "mm/h", "W/m²", "BTU/(h⋅ft²)", "lx", "%", "rpm",
    "g/m³", "mg/m³", "µg/m³", "µg/ft³", "p/m³", "ppm", "ppb", "mg/dL", "mmol/L",
    "S/cm", "µS/cm", "mS/cm",
    # information and data rate
    "bit", "kbit", "Mbit", "Gbit", "B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB",
    "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB",
    "bit/s", "kbit/s", "Mbit/s", "Gbit/s", "B/s", "kB/s", "MB/s", "GB/s", "KiB/s", "MiB/s", "GiB/s",
    # currency
    "¢",
)

# Symbols that are words too: read as units only where no lower-case word follows.
AMBIGUOUS = frozenset({"in", "mi", "ha", "ac", "st", "bar", "d", "cal", "var", "gal", "ft", "yd", "oz", "lb",
                       "kn", "K", "J", "B", "l", "bit"})

_PREFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi", "µ", "m", "c", "d", "h", "k", "M", "G", "T", "P",
             "E", "Z", "Y")


@dataclass(frozen=True)
class Wording:
    """How one language names composed units. Specs are "singular|plural" with "f:" for a
    feminine noun ("m:" for a German masculine one), as in `units.py`."""

    prefixes: dict[str, str]  # "k" -> "kilo"
    bases: dict[str, str]  # "W" -> "watt|watts"
    per: str  # "per": "megabits per second"
    square: str  # "square {}" / "{} carré": "{}" stands for the unit's name
    cubic: str
    square_feminine: str = ""  # Romance: the feminine form ("milla cuadrada")
    cubic_feminine: str = ""
    denominators: dict[str, str] | None = None  # idioms for "per X": Italian "al secondo"
    capitalise: bool = False  # German nouns


def _spec(singular: str, plural: str, feminine: bool, masculine: bool = False) -> str:
    marker = "f:" if feminine else "m:" if masculine else ""
    return f"{marker}{singular}|{plural}"


def _parse(spec: str) -> tuple[str, str, bool, bool]:
    feminine, masculine = spec.startswith("f:"), spec.startswith("m:")
    singular, _, plural = spec.removeprefix("f:").removeprefix("m:").partition("|")
    return singular, plural or singular, feminine, masculine


def _with_prefix(wording: Wording, prefix: str, base: str) -> str:
    singular, plural, feminine, masculine = _parse(wording.bases[base])
    word = wording.prefixes[prefix]
    if wording.capitalise:
        return _spec((word + singular.lower()).capitalize(), (word + plural.lower()).capitalize(),
                     feminine, masculine)
    return _spec(word + singular, word + plural, feminine, masculine)


def _named(wording: Wording, symbol: str) -> str | None:
    """The spec for `symbol` in this wording, or None where it cannot be composed."""
    if symbol in wording.bases:
        return wording.bases[symbol]
    for power, (form, feminine_form) in (("²", (wording.square, wording.square_feminine)),
                                         ("³", (wording.cubic, wording.cubic_feminine))):
        if symbol.endswith(power) and (inner := _named(wording, symbol[:-1])) is not None:
            singular, plural, feminine, masculine = _parse(inner)
            chosen = feminine_form if feminine and feminine_form else form
            one, many = chosen.split("|") if "|" in chosen else (chosen, chosen)
            if wording.capitalise:  # "Quadratmeter": one word
                return _spec(one.format(singular.lower()).capitalize(), many.format(plural.lower()).capitalize(),
                             feminine, masculine)
            return _spec(one.format(singular), many.format(plural), feminine, masculine)
    if "/" in symbol:
        top, _, bottom = symbol.partition("/")
        top_spec, bottom_spec = _named(wording, top), _named(wording, bottom)
        if top_spec is None or bottom_spec is None:
            return None
        singular, plural, feminine, masculine = _parse(top_spec)
        denominator = (wording.denominators or {}).get(bottom) or f"{wording.per} {_parse(bottom_spec)[0]}"
        return _spec(f"{singular} {denominator}", f"{plural} {denominator}", feminine, masculine)
    for prefix in _PREFIXES:
        base = symbol[len(prefix):]
        if symbol.startswith(prefix) and base in wording.bases and prefix in wording.prefixes:
            return _with_prefix(wording, prefix, base)
    return None


_EN = Wording(
    prefixes={"Ki": "kibi", "Mi": "mebi", "Gi": "gibi", "Ti": "tebi", "Pi": "pebi", "Ei": "exbi", "Zi": "zebi",
              "Yi": "yobi", "µ": "micro", "m": "milli", "c": "centi", "d": "deci", "h": "hecto", "k": "kilo",
              "M": "mega", "G": "giga", "T": "tera", "P": "peta", "E": "exa", "Z": "zetta", "Y": "yotta"},
    bases={"dB": "decibel|decibels", "ppm": "part per million|parts per million", "lx": "lux", "%": "percent", "°C": "degree Celsius|degrees Celsius", "°F": "degree Fahrenheit|degrees Fahrenheit", "°": "degree|degrees", "mph": "mile per hour|miles per hour",
           "W": "watt|watts", "VA": "volt-ampere|volt-amperes", "var": "var|vars", "varh": "var hour|var hours",
           "J": "joule|joules", "Wh": "watt hour|watt hours", "cal": "calorie|calories", "A": "amp|amps",
           "V": "volt|volts", "Hz": "hertz", "Pa": "pascal|pascals", "bar": "bar|bars", "B": "byte|bytes",
           "bit": "bit|bits", "g": "gram|grams", "m": "meter|meters", "L": "liter|liters", "s": "second|seconds",
           "S": "siemens", "mol": "mole|moles", "K": "kelvin|kelvins", "in": "inch|inches", "ft": "foot|feet",
           "yd": "yard|yards", "mi": "mile|miles", "nmi": "nautical mile|nautical miles", "oz": "ounce|ounces",
           "lb": "pound|pounds", "st": "stone|stone", "gal": "gallon|gallons", "fl. oz.": "fluid ounce|fluid ounces",
           "psi": "psi", "mmHg": "millimeter of mercury|millimeters of mercury",
           "inHg": "inch of mercury|inches of mercury", "inH2O": "inch of water|inches of water",
           "kn": "knot|knots", "rpm": "revolution per minute|revolutions per minute", "ac": "acre|acres",
           "ha": "hectare|hectares", "CCF": "hundred cubic feet", "MCF": "thousand cubic feet",
           "BTU": "BTU|BTUs", "Beaufort": "Beaufort", "dBm": "decibel milliwatt|decibel milliwatts",
           "dBA": "A-weighted decibel|A-weighted decibels", "ppb": "part per billion|parts per billion",
           "p": "particle|particles", "h": "hour|hours", "min": "minute|minutes", "d": "day|days",
           "dL": "deciliter|deciliters", "100km": "hundred kilometers", "¢": "cent|cents",
           "BTU/(h⋅ft²)": "BTU per hour and square foot|BTUs per hour and square foot"},
    per="per", square="square {}", cubic="cubic {}",
)

_DE = Wording(
    prefixes={**_EN.prefixes, "µ": "mikro", "c": "zenti", "d": "dezi", "h": "hekto"},
    bases={"dB": "Dezibel", "ppm": "ppm", "lx": "Lux", "%": "Prozent", "°C": "m:Grad Celsius", "°F": "m:Grad Fahrenheit", "°": "m:Grad", "mph": "f:Meile pro Stunde|Meilen pro Stunde",
           "W": "Watt", "VA": "Voltampere", "var": "Var", "varh": "Varstunde|Varstunden", "J": "Joule",
           "Wh": "f:Wattstunde|Wattstunden", "cal": "f:Kalorie|Kalorien", "A": "Ampere", "V": "Volt",
           "Hz": "Hertz", "Pa": "Pascal", "bar": "Bar", "B": "Byte", "bit": "Bit", "g": "Gramm",
           "m": "m:Meter", "L": "m:Liter", "s": "f:Sekunde|Sekunden", "S": "Siemens", "mol": "Mol",
           "K": "Kelvin", "in": "m:Zoll", "ft": "m:Fuß", "yd": "Yard", "mi": "f:Meile|Meilen",
           "nmi": "f:Seemeile|Seemeilen", "oz": "f:Unze|Unzen", "lb": "Pfund", "st": "Stone",
           "gal": "f:Gallone|Gallonen", "fl. oz.": "f:Flüssigunze|Flüssigunzen", "psi": "psi",
           "mmHg": "m:Millimeter Quecksilbersäule", "inHg": "m:Zoll Quecksilbersäule",
           "inH2O": "m:Zoll Wassersäule", "kn": "m:Knoten", "rpm": "f:Umdrehung pro Minute|Umdrehungen pro Minute",
           "ac": "m:Acre", "ha": "m:Hektar", "CCF": "hundert Kubikfuß", "MCF": "tausend Kubikfuß",
           "BTU": "BTU", "Beaufort": "Beaufort", "dBm": "Dezibel Milliwatt", "dBA": "Dezibel A",
           "ppb": "ppb", "p": "Partikel", "h": "f:Stunde|Stunden", "min": "f:Minute|Minuten",
           "d": "m:Tag|Tage", "dL": "m:Deziliter", "100km": "hundert Kilometer", "¢": "m:Cent",
           "BTU/(h⋅ft²)": "BTU pro Stunde und Quadratfuß"},
    per="pro", square="Quadrat{}", cubic="Kubik{}", capitalise=True,
)

_FR = Wording(
    prefixes={**_EN.prefixes, "M": "méga", "T": "téra", "P": "péta", "d": "déci", "h": "hecto", "Mi": "mébi",
              "Ti": "tébi", "Pi": "pébi", "Z": "zetta"},
    bases={"dB": "décibel|décibels", "ppm": "f:partie par million|parties par million", "lx": "lux", "%": "pour cent", "°C": "degré Celsius|degrés Celsius", "°F": "degré Fahrenheit|degrés Fahrenheit", "°": "degré|degrés", "mph": "mile par heure|miles par heure",
           "W": "watt|watts", "VA": "voltampère|voltampères", "var": "var|vars", "varh": "varheure|varheures",
           "J": "joule|joules", "Wh": "wattheure|wattheures", "cal": "f:calorie|calories", "A": "ampère|ampères",
           "V": "volt|volts", "Hz": "hertz", "Pa": "pascal|pascals", "bar": "bar|bars", "B": "octet|octets",
           "bit": "bit|bits", "g": "gramme|grammes", "m": "mètre|mètres", "L": "litre|litres",
           "s": "f:seconde|secondes", "S": "siemens", "mol": "f:mole|moles", "K": "kelvin|kelvins",
           "in": "pouce|pouces", "ft": "pied|pieds", "yd": "yard|yards", "mi": "mile|miles",
           "nmi": "mille marin|milles marins", "oz": "f:once|onces", "lb": "f:livre|livres", "st": "stone|stones",
           "gal": "gallon|gallons", "fl. oz.": "f:once liquide|onces liquides", "psi": "psi",
           "mmHg": "millimètre de mercure|millimètres de mercure", "inHg": "pouce de mercure|pouces de mercure",
           "inH2O": "pouce d'eau|pouces d'eau", "kn": "nœud|nœuds", "rpm": "tour par minute|tours par minute",
           "ac": "f:acre|acres", "ha": "hectare|hectares", "CCF": "cent pieds cubes", "MCF": "mille pieds cubes",
           "BTU": "BTU", "Beaufort": "Beaufort", "dBm": "décibel milliwatt|décibels milliwatt",
           "dBA": "décibel A|décibels A", "ppb": "f:partie par milliard|parties par milliard",
           "p": "f:particule|particules", "h": "f:heure|heures", "min": "f:minute|minutes", "d": "jour|jours",
           "dL": "décilitre|décilitres", "100km": "cent kilomètres", "¢": "cent|cents",
           "BTU/(h⋅ft²)": "BTU par heure et pied carré"},
    per="par", square="{} carré|{} carrés", cubic="{} cube|{} cubes", square_feminine="{} carrée|{} carrées",
)

_IT = Wording(
    prefixes={**_EN.prefixes, "k": "chilo"},
    bases={"mi²": "miglio quadrato|miglia quadrate",
           "dB": "decibel", "ppm": "f:parte per milione|parti per milione", "lx": "lux", "%": "percento", "°C": "grado Celsius|gradi Celsius", "°F": "grado Fahrenheit|gradi Fahrenheit", "°": "grado|gradi", "mph": "miglio orario|miglia orarie",
           "W": "watt", "VA": "voltampere", "var": "var", "varh": "varora", "J": "joule", "Wh": "wattora",
           "cal": "f:caloria|calorie", "A": "ampere", "V": "volt", "Hz": "hertz", "Pa": "pascal", "bar": "bar",
           "B": "byte", "bit": "bit", "g": "grammo|grammi", "m": "metro|metri", "L": "litro|litri",
           "s": "secondo|secondi", "S": "siemens", "mol": "f:mole|moli", "K": "kelvin", "in": "pollice|pollici",
           "ft": "piede|piedi", "yd": "f:iarda|iarde", "mi": "miglio|miglia", "nmi": "miglio nautico|miglia nautiche",
           "oz": "f:oncia|once", "lb": "f:libbra|libbre", "st": "stone", "gal": "gallone|galloni",
           "fl. oz.": "f:oncia liquida|once liquide", "psi": "psi",
           "mmHg": "millimetro di mercurio|millimetri di mercurio", "inHg": "pollice di mercurio|pollici di mercurio",
           "inH2O": "pollice d'acqua|pollici d'acqua", "kn": "nodo|nodi", "rpm": "giro al minuto|giri al minuto",
           "ac": "acro|acri", "ha": "ettaro|ettari", "CCF": "cento piedi cubi", "MCF": "mille piedi cubi",
           "BTU": "BTU", "Beaufort": "Beaufort", "dBm": "decibel milliwatt", "dBA": "decibel A",
           "ppb": "f:parte per miliardo|parti per miliardo", "p": "f:particella|particelle", "h": "f:ora|ore",
           "min": "minuto|minuti", "d": "giorno|giorni", "dL": "decilitro|decilitri", "100km": "cento chilometri",
           "¢": "centesimo|centesimi", "BTU/(h⋅ft²)": "BTU per ora e piede quadrato"},
    per="per", square="{} quadrato|{} quadrati", cubic="{} cubo|{} cubi",
    square_feminine="{} quadrata|{} quadrate", cubic_feminine="{} cuba|{} cube",
    denominators={"s": "al secondo", "h": "all'ora", "min": "al minuto", "d": "al giorno"},
)

_ES = Wording(
    prefixes={**_EN.prefixes, "m": "mili"},
    bases={"mm": "milímetro|milímetros", "cm": "centímetro|centímetros", "km": "kilómetro|kilómetros",
           "dB": "decibelio|decibelios", "ppm": "f:parte por millón|partes por millón", "lx": "lux", "%": "por ciento", "°C": "grado Celsius|grados Celsius", "°F": "grado Fahrenheit|grados Fahrenheit", "°": "grado|grados", "mph": "f:milla por hora|millas por hora",
           "W": "vatio|vatios", "VA": "voltamperio|voltamperios", "var": "var|vares",
           "varh": "var hora|vares hora", "J": "julio|julios", "Wh": "vatio hora|vatios hora",
           "cal": "f:caloría|calorías", "A": "amperio|amperios", "V": "voltio|voltios", "Hz": "hercio|hercios",
           "Pa": "pascal|pascales", "bar": "bar|bares", "B": "byte|bytes", "bit": "bit|bits",
           "g": "gramo|gramos", "m": "metro|metros", "L": "litro|litros", "s": "segundo|segundos",
           "S": "siemens", "mol": "mol|moles", "K": "kelvin|kelvins", "in": "f:pulgada|pulgadas",
           "ft": "pie|pies", "yd": "f:yarda|yardas", "mi": "f:milla|millas", "nmi": "f:milla náutica|millas náuticas",
           "oz": "f:onza|onzas", "lb": "f:libra|libras", "st": "stone|stones", "gal": "galón|galones",
           "fl. oz.": "f:onza líquida|onzas líquidas", "psi": "psi",
           "mmHg": "milímetro de mercurio|milímetros de mercurio", "inHg": "f:pulgada de mercurio|pulgadas de mercurio",
           "inH2O": "f:pulgada de agua|pulgadas de agua", "kn": "nudo|nudos",
           "rpm": "f:revolución por minuto|revoluciones por minuto", "ac": "acre|acres", "ha": "f:hectárea|hectáreas",
           "CCF": "cien pies cúbicos", "MCF": "mil pies cúbicos", "BTU": "BTU", "Beaufort": "Beaufort",
           "dBm": "decibelio milivatio|decibelios milivatio", "dBA": "decibelio A|decibelios A",
           "ppb": "f:parte por mil millones|partes por mil millones", "p": "f:partícula|partículas",
           "h": "f:hora|horas", "min": "minuto|minutos", "d": "día|días", "dL": "decilitro|decilitros",
           "100km": "cien kilómetros", "¢": "centavo|centavos", "BTU/(h⋅ft²)": "BTU por hora y pie cuadrado"},
    per="por", square="{} cuadrado|{} cuadrados", cubic="{} cúbico|{} cúbicos",
    square_feminine="{} cuadrada|{} cuadradas", cubic_feminine="{} cúbica|{} cúbicas",
)

_PT = Wording(
    prefixes={**_EN.prefixes, "k": "quilo", "m": "mili"},
    bases={"mm": "milímetro|milímetros", "cm": "centímetro|centímetros", "km": "quilómetro|quilómetros",
           "dB": "decibel|decibéis", "ppm": "f:parte por milhão|partes por milhão", "lx": "lux", "%": "por cento", "°C": "grau Celsius|graus Celsius", "°F": "grau Fahrenheit|graus Fahrenheit", "°": "grau|graus", "mph": "f:milha por hora|milhas por hora",
           "W": "watt|watts", "VA": "volt-ampere|volts-ampere", "var": "var|vares", "varh": "var-hora|vares-hora",
           "J": "joule|joules", "Wh": "watt-hora|watts-hora", "cal": "f:caloria|calorias", "A": "ampere|amperes",
           "V": "volt|volts", "Hz": "hertz", "Pa": "pascal|pascais", "bar": "bar|bares", "B": "byte|bytes",
           "bit": "bit|bits", "g": "grama|gramas", "m": "metro|metros", "L": "litro|litros",
           "s": "segundo|segundos", "S": "siemens", "mol": "mol|moles", "K": "kelvin|kelvins",
           "in": "f:polegada|polegadas", "ft": "pé|pés", "yd": "f:jarda|jardas", "mi": "f:milha|milhas",
           "nmi": "f:milha náutica|milhas náuticas", "oz": "f:onça|onças", "lb": "f:libra|libras",
           "st": "stone|stones", "gal": "galão|galões", "fl. oz.": "f:onça líquida|onças líquidas", "psi": "psi",
           "mmHg": "milímetro de mercúrio|milímetros de mercúrio",
           "inHg": "f:polegada de mercúrio|polegadas de mercúrio", "inH2O": "f:polegada de água|polegadas de água",
           "kn": "nó|nós", "rpm": "f:rotação por minuto|rotações por minuto", "ac": "acre|acres",
           "ha": "hectare|hectares", "CCF": "cem pés cúbicos", "MCF": "mil pés cúbicos", "BTU": "BTU",
           "Beaufort": "Beaufort", "dBm": "decibel miliwatt|decibéis miliwatt", "dBA": "decibel A|decibéis A",
           "ppb": "f:parte por bilião|partes por bilião", "p": "f:partícula|partículas", "h": "f:hora|horas",
           "min": "minuto|minutos", "d": "dia|dias", "dL": "decilitro|decilitros", "100km": "cem quilómetros",
           "¢": "cêntimo|cêntimos", "BTU/(h⋅ft²)": "BTU por hora e pé quadrado"},
    per="por", square="{} quadrado|{} quadrados", cubic="{} cúbico|{} cúbicos",
    square_feminine="{} quadrada|{} quadradas", cubic_feminine="{} cúbica|{} cúbicas",
)

_NL = Wording(
    prefixes={**_EN.prefixes},
    bases={"dB": "decibel", "ppm": "ppm", "lx": "lux", "%": "procent", "°C": "graad Celsius|graden Celsius", "°F": "graad Fahrenheit|graden Fahrenheit", "°": "graad|graden", "mph": "mijl per uur",
           "W": "watt", "VA": "voltampère", "var": "var", "varh": "varuur", "J": "joule", "Wh": "wattuur",
           "cal": "calorie|calorieën", "A": "ampère", "V": "volt", "Hz": "hertz", "Pa": "pascal", "bar": "bar",
           "B": "byte", "bit": "bit", "g": "gram", "m": "meter", "L": "liter", "s": "seconde|seconden",
           "S": "siemens", "mol": "mol", "K": "kelvin", "in": "inch", "ft": "voet", "yd": "yard", "mi": "mijl",
           "nmi": "zeemijl", "oz": "ons", "lb": "pond", "st": "stone", "gal": "gallon", "fl. oz.": "vloeibare ons",
           "psi": "psi", "mmHg": "millimeter kwik", "inHg": "inch kwik", "inH2O": "inch water", "kn": "knoop|knopen",
           "rpm": "toeren per minuut", "ac": "acre", "ha": "hectare", "CCF": "honderd kubieke voet",
           "MCF": "duizend kubieke voet", "BTU": "BTU", "Beaufort": "Beaufort", "dBm": "decibel milliwatt",
           "dBA": "decibel A", "ppb": "ppb", "p": "deeltje|deeltjes", "h": "uur", "min": "minuut|minuten",
           "d": "dag|dagen", "dL": "deciliter", "100km": "honderd kilometer", "¢": "cent",
           "BTU/(h⋅ft²)": "BTU per uur per vierkante voet"},
    per="per", square="vierkante {}", cubic="kubieke {}",
)

_WORDINGS = {"en": _EN, "de": _DE, "fr": _FR, "it": _IT, "es": _ES, "pt": _PT, "nl": _NL}


@functools.cache
def unit_names(code: str) -> dict[str, str]:
    """Every Home Assistant unit symbol's spec in language `code` (see `Wording`)."""
    wording = _WORDINGS[code]
    names = {}
    for symbol in HOME_ASSISTANT_UNITS:
        spec = _named(wording, symbol)
        if spec is None:
            raise ValueError(f"no {code} name composes for the unit {symbol!r}")
        names[symbol] = spec
    return names
