"""Per-language conventions the normaliser needs, one frozen instance per language.

Number words come from num2words; what it does not know is written here by hand:
the words that glue numbers into phrases (decimal separator, "to", "percent"),
clock and date patterns, month names and the abbreviations each language writes.
Unit and currency names are in `units.py`.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field

_LOGGER = logging.getLogger(__name__)

DEFAULT_LANGUAGE = "en"


@dataclass(frozen=True)
class Abbreviation:
    """A written abbreviation and what is said for it."""

    written: str  # as written, with its dots, e.g. "z.B." (spaces after dots are optional)
    spoken: str
    before_number: bool = False  # "No. 5": only an abbreviation when a number follows
    may_end_sentence: bool = False  # "etc.": keep the sentence's full stop when it ends one
    not_after_number: bool = False  # "min.": after a number it is the unit ("45 min.")


@dataclass(frozen=True)
class Language:
    """What one language writes and says differently from the others."""

    code: str
    decimal_comma: bool  # "19,5" (True) or "19.5" (False) in prose
    thousands_spaces: str  # space characters accepted between groups of three digits
    decimal_word: str
    minus_word: str
    to_word: str  # ranges: "3 to 5"
    and_word: str
    dot_word: str  # versions, URLs: "one dot two"
    at_word: str  # e-mail addresses: "anna at example dot com", "anna ät example Punkt com"
    underscore_word: str  # "_" in an e-mail address
    plus_word: str
    over_word: str  # fractions that have no name: "3 over 8"
    version_word: str
    per_word: str  # "€/kWh", "pro kWh": a price or rate per unit
    fractions: dict[str, str]  # "1/2" -> "one half"
    months: tuple[str, ...]
    month_aliases: dict[str, int] = field(default_factory=dict)  # "Sept" -> 9
    twelve_hour_clock: bool = False  # read times as written with AM/PM (English)
    abbreviations: tuple[Abbreviation, ...] = ()
    # Words before a German ordinal and the ending they ask for ("am dritten", "der dritte").
    ordinal_case_words: dict[str, str] = field(default_factory=dict)
    # Words joining two numbers that count one noun ("1 bis 2 Stunden", "1 o 2 horas").
    range_words: frozenset[str] = frozenset()
    # "1/2" before a noun, by the noun's gender ("m", "f", "n"): "media taza", "eine halbe Tasse".
    half_before_noun: dict[str, str] = field(default_factory=dict)
    # What joins another fraction to its noun: "un cuarto de taza" ("" for none).
    fraction_of: str = ""
    approximately_word: str = "approximately"  # "≈ 20", "~20"
    plus_minus_word: str = "plus or minus"  # "±0.5"
    # Weekdays as abbreviated in schedules ("Mo–Fr", "lun.-ven."), and their names.
    weekday_abbreviations: dict[str, str] = field(default_factory=dict)


# Groups of three digits may be parted by a space ("20 000", SI style) or by a no-break,
# narrow no-break or thin space, in every language.
_SPACES = " \u00a0\u202f\u2009"

ENGLISH = Language(
    code="en",
    approximately_word="approximately",
    plus_minus_word="plus or minus",
    weekday_abbreviations={"Mon": "Monday", "Tue": "Tuesday", "Tues": "Tuesday", "Wed": "Wednesday",
                           "Thu": "Thursday", "Thur": "Thursday", "Thurs": "Thursday", "Fri": "Friday",
                           "Sat": "Saturday", "Sun": "Sunday"},
    range_words=frozenset(['to', 'or']),
    per_word="per",
    decimal_comma=False,
    thousands_spaces=_SPACES,
    decimal_word="point",
    minus_word="minus",
    to_word="to",
    and_word="and",
    dot_word="dot",
    at_word="at",
    underscore_word="underscore",
    plus_word="plus",
    over_word="over",
    version_word="version",
    fractions={"1/2": "one half", "1/3": "one third", "2/3": "two thirds",
               "1/4": "one quarter", "3/4": "three quarters"},
    months=("January", "February", "March", "April", "May", "June", "July", "August",
            "September", "October", "November", "December"),
    month_aliases={"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "Jun": 6, "Jul": 7, "Aug": 8,
                   "Sep": 9, "Sept": 9, "Oct": 10, "Nov": 11, "Dec": 12},
    twelve_hour_clock=True,
    abbreviations=(
        Abbreviation("max.", "maximum", not_after_number=True),
        Abbreviation("min.", "minimum", not_after_number=True),
        Abbreviation("approx.", "approximately"),
        Abbreviation("ca.", "circa"),
        Abbreviation("e.g.", "for example"),
        Abbreviation("i.e.", "that is"),
        Abbreviation("vs.", "versus"),
        Abbreviation("Dr.", "Doctor"),
        Abbreviation("Mr.", "Mister"),
        Abbreviation("Mrs.", "Missus"),
        Abbreviation("No.", "number", before_number=True),
        Abbreviation("Nr.", "number", before_number=True),
        Abbreviation("etc.", "et cetera", may_end_sentence=True),
    ),
)

GERMAN = Language(
    code="de",
    approximately_word="ungefähr",
    plus_minus_word="plus minus",
    weekday_abbreviations={"Mo": "Montag", "Di": "Dienstag", "Mi": "Mittwoch", "Do": "Donnerstag",
                           "Fr": "Freitag", "Sa": "Samstag", "So": "Sonntag"},
    half_before_noun={"m": "ein halber", "f": "eine halbe", "n": "ein halbes"},
    range_words=frozenset(['bis', 'oder']),
    per_word="pro",
    decimal_comma=True,
    thousands_spaces=_SPACES,
    decimal_word="Komma",
    minus_word="minus",
    to_word="bis",
    and_word="und",
    dot_word="Punkt",
    at_word="ät",
    underscore_word="Unterstrich",
    plus_word="plus",
    over_word="durch",
    version_word="Version",
    fractions={"1/2": "ein halb", "1/3": "ein Drittel", "2/3": "zwei Drittel",
               "1/4": "ein Viertel", "3/4": "drei Viertel"},
    months=("Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August",
            "September", "Oktober", "November", "Dezember"),
    month_aliases={"Jänner": 1},
    abbreviations=(
        Abbreviation("max.", "maximal", not_after_number=True),
        Abbreviation("min.", "minimal", not_after_number=True),
        Abbreviation("Mio.", "Millionen"),
        Abbreviation("Mrd.", "Milliarden"),
        Abbreviation("Temp.", "Temperatur"),
        Abbreviation("ca.", "circa"),
        Abbreviation("z.B.", "zum Beispiel"),
        Abbreviation("d.h.", "das heißt"),
        Abbreviation("u.a.", "unter anderem"),
        Abbreviation("bzw.", "beziehungsweise"),
        Abbreviation("evtl.", "eventuell"),
        Abbreviation("ggf.", "gegebenenfalls"),
        Abbreviation("inkl.", "inklusive"),
        Abbreviation("mind.", "mindestens"),
        Abbreviation("vs.", "versus"),
        Abbreviation("Dr.", "Doktor"),
        Abbreviation("Nr.", "Nummer", before_number=True),
        Abbreviation("No.", "Nummer", before_number=True),
        Abbreviation("usw.", "und so weiter", may_end_sentence=True),
        Abbreviation("etc.", "et cetera", may_end_sentence=True),
    ),
    ordinal_case_words={"am": "n", "im": "n", "vom": "n", "zum": "n", "beim": "n", "dem": "n",
                        "den": "n", "des": "n", "zur": "n", "ab": "n",
                        "der": "", "die": "", "das": ""},
)

FRENCH = Language(
    code="fr",
    approximately_word="environ",
    plus_minus_word="plus ou moins",
    weekday_abbreviations={"lun": "lundi", "mar": "mardi", "mer": "mercredi", "jeu": "jeudi",
                           "ven": "vendredi", "sam": "samedi", "dim": "dimanche"},
    half_before_noun={"m": "un demi", "f": "une demi"},
    fraction_of="de",
    range_words=frozenset(['à', 'ou']),
    per_word="par",
    decimal_comma=True,
    thousands_spaces=_SPACES,
    decimal_word="virgule",
    minus_word="moins",
    to_word="à",
    and_word="et",
    dot_word="point",
    at_word="arobase",
    underscore_word="tiret bas",
    plus_word="plus",
    over_word="sur",
    version_word="version",
    fractions={"1/2": "un demi", "1/3": "un tiers", "2/3": "deux tiers",
               "1/4": "un quart", "3/4": "trois quarts"},
    months=("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août",
            "septembre", "octobre", "novembre", "décembre"),
    abbreviations=(
        Abbreviation("max.", "maximum", not_after_number=True),
        Abbreviation("min.", "minimum", not_after_number=True),
        Abbreviation("env.", "environ"),
        Abbreviation("ca.", "environ"),
        Abbreviation("p.ex.", "par exemple"),
        Abbreviation("c.-à-d.", "c'est-à-dire"),
        Abbreviation("vs.", "contre"),
        Abbreviation("Dr.", "docteur"),
        Abbreviation("No.", "numéro", before_number=True),
        Abbreviation("n°", "numéro", before_number=True),
        Abbreviation("etc.", "et cetera", may_end_sentence=True),
    ),
)

ITALIAN = Language(
    code="it",
    approximately_word="circa",
    plus_minus_word="più o meno",
    weekday_abbreviations={"lun": "lunedì", "mar": "martedì", "mer": "mercoledì", "gio": "giovedì",
                           "ven": "venerdì", "sab": "sabato", "dom": "domenica"},
    half_before_noun={"m": "mezzo", "f": "mezza"},
    fraction_of="di",
    range_words=frozenset(['a', 'o']),
    per_word="per",
    decimal_comma=True,
    thousands_spaces=_SPACES,
    decimal_word="virgola",
    minus_word="meno",
    to_word="a",
    and_word="e",
    dot_word="punto",
    at_word="chiocciola",
    underscore_word="trattino basso",
    plus_word="più",
    over_word="su",
    version_word="versione",
    fractions={"1/2": "un mezzo", "1/3": "un terzo", "2/3": "due terzi",
               "1/4": "un quarto", "3/4": "tre quarti"},
    months=("gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto",
            "settembre", "ottobre", "novembre", "dicembre"),
    abbreviations=(
        Abbreviation("max.", "massimo", not_after_number=True),
        Abbreviation("min.", "minimo", not_after_number=True),
        Abbreviation("ca.", "circa"),
        Abbreviation("es.", "per esempio"),
        Abbreviation("vs.", "contro"),
        Abbreviation("Dott.", "dottor"),
        Abbreviation("Dr.", "dottor"),
        Abbreviation("n.", "numero", before_number=True),
        Abbreviation("No.", "numero", before_number=True),
        Abbreviation("ecc.", "eccetera", may_end_sentence=True),
        Abbreviation("etc.", "eccetera", may_end_sentence=True),
    ),
)

PORTUGUESE = Language(
    code="pt",
    approximately_word="aproximadamente",
    plus_minus_word="mais ou menos",
    weekday_abbreviations={"seg": "segunda-feira", "ter": "terça-feira", "qua": "quarta-feira",
                           "qui": "quinta-feira", "sex": "sexta-feira", "sáb": "sábado", "sab": "sábado",
                           "dom": "domingo"},
    half_before_noun={"m": "meio", "f": "meia"},
    fraction_of="de",
    range_words=frozenset(['a', 'ou']),
    per_word="por",
    decimal_comma=True,
    thousands_spaces=_SPACES,
    decimal_word="vírgula",
    minus_word="menos",
    to_word="a",
    and_word="e",
    dot_word="ponto",
    at_word="arroba",
    underscore_word="sublinhado",
    plus_word="mais",
    over_word="sobre",
    version_word="versão",
    fractions={"1/2": "um meio", "1/3": "um terço", "2/3": "dois terços",
               "1/4": "um quarto", "3/4": "três quartos"},
    months=("janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto",
            "setembro", "outubro", "novembro", "dezembro"),
    abbreviations=(
        Abbreviation("máx.", "máximo"),
        Abbreviation("mín.", "mínimo"),
        Abbreviation("max.", "máximo", not_after_number=True),
        Abbreviation("min.", "mínimo", not_after_number=True),
        Abbreviation("aprox.", "aproximadamente"),
        Abbreviation("ca.", "cerca de"),
        Abbreviation("p.ex.", "por exemplo"),
        Abbreviation("vs.", "contra"),
        Abbreviation("Dr.", "Doutor"),
        Abbreviation("Sr.", "Senhor"),
        Abbreviation("Sra.", "Senhora"),
        Abbreviation("n.º", "número", before_number=True),
        Abbreviation("nº", "número", before_number=True),
        Abbreviation("etc.", "etcétera", may_end_sentence=True),
    ),
)

SPANISH = Language(
    code="es",
    approximately_word="aproximadamente",
    plus_minus_word="más o menos",
    weekday_abbreviations={"lun": "lunes", "mar": "martes", "mié": "miércoles", "mie": "miércoles",
                           "jue": "jueves", "vie": "viernes", "sáb": "sábado", "sab": "sábado",
                           "dom": "domingo"},
    half_before_noun={"m": "medio", "f": "media"},
    fraction_of="de",
    range_words=frozenset(['a', 'o']),
    per_word="por",
    decimal_comma=True,
    thousands_spaces=_SPACES,
    decimal_word="coma",
    minus_word="menos",
    to_word="a",
    and_word="y",
    dot_word="punto",
    at_word="arroba",
    underscore_word="guion bajo",
    plus_word="más",
    over_word="entre",
    version_word="versión",
    fractions={"1/2": "un medio", "1/3": "un tercio", "2/3": "dos tercios",
               "1/4": "un cuarto", "3/4": "tres cuartos"},
    months=("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
            "septiembre", "octubre", "noviembre", "diciembre"),
    abbreviations=(
        Abbreviation("máx.", "máximo"),
        Abbreviation("mín.", "mínimo"),
        Abbreviation("max.", "máximo", not_after_number=True),
        Abbreviation("min.", "mínimo", not_after_number=True),
        Abbreviation("aprox.", "aproximadamente"),
        Abbreviation("ca.", "cerca de"),
        Abbreviation("p.ej.", "por ejemplo"),
        Abbreviation("vs.", "contra"),
        Abbreviation("Dr.", "doctor"),
        Abbreviation("Sr.", "señor"),
        Abbreviation("Sra.", "señora"),
        Abbreviation("Ud.", "usted"),
        Abbreviation("n.º", "número", before_number=True),
        Abbreviation("nº", "número", before_number=True),
        Abbreviation("núm.", "número", before_number=True),
        Abbreviation("etc.", "etcétera", may_end_sentence=True),
    ),
)

DUTCH = Language(
    code="nl",
    approximately_word="ongeveer",
    plus_minus_word="plus of min",
    weekday_abbreviations={"ma": "maandag", "di": "dinsdag", "wo": "woensdag", "do": "donderdag",
                           "vr": "vrijdag", "za": "zaterdag", "zo": "zondag"},
    half_before_noun={"m": "een halve", "n": "een half"},
    range_words=frozenset(['tot', 'of']),
    per_word="per",
    decimal_comma=True,
    thousands_spaces=_SPACES,
    decimal_word="komma",
    minus_word="min",
    to_word="tot",
    and_word="en",
    dot_word="punt",
    at_word="apenstaartje",
    underscore_word="laag streepje",
    plus_word="plus",
    over_word="gedeeld door",
    version_word="versie",
    fractions={"1/2": "een half", "1/3": "een derde", "2/3": "twee derde",
               "1/4": "een kwart", "3/4": "drie kwart"},
    months=("januari", "februari", "maart", "april", "mei", "juni", "juli", "augustus",
            "september", "oktober", "november", "december"),
    abbreviations=(
        Abbreviation("t/m", "tot en met"),
        Abbreviation("max.", "maximaal", not_after_number=True),
        Abbreviation("min.", "minimaal", not_after_number=True),
        Abbreviation("ca.", "circa"),
        Abbreviation("bijv.", "bijvoorbeeld"),
        Abbreviation("bv.", "bijvoorbeeld"),
        Abbreviation("d.w.z.", "dat wil zeggen"),
        Abbreviation("o.a.", "onder andere"),
        Abbreviation("vs.", "versus"),
        Abbreviation("Dr.", "dokter"),
        Abbreviation("nr.", "nummer", before_number=True),
        Abbreviation("No.", "nummer", before_number=True),
        Abbreviation("enz.", "enzovoort", may_end_sentence=True),
        Abbreviation("etc.", "et cetera", may_end_sentence=True),
    ),
)

LANGUAGES: dict[str, Language] = {
    rules.code: rules
    for rules in (ENGLISH, GERMAN, FRENCH, ITALIAN, PORTUGUESE, SPANISH, DUTCH)
}


def language_rules(language: str) -> Language:
    """The rules for a language code ("de", "de-DE", "de_CH"); English for any other."""
    code = (language or "").replace("_", "-").split("-")[0].lower()
    rules = LANGUAGES.get(code)
    if rules is None:
        _warn_unknown_language(language)
        return LANGUAGES[DEFAULT_LANGUAGE]
    return rules


@functools.cache
def _warn_unknown_language(language: str) -> None:
    # Cached so each unknown code is logged once per process, without a module-level flag.
    _LOGGER.warning("No text normalisation rules for language %r: using English rules", language)
