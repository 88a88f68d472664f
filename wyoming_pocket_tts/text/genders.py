"""The grammatical gender of the noun a number counts, and the German case it is in.

A number agrees with its noun in German, French, Italian, Spanish and Portuguese ("eine
Stunde", "une heure", "un'ora", "una hora", "duas horas"); English and Dutch numbers do
not change. Home Assistant's replies write the number as digits before its noun ("1 heure
et 21 minutes", "Noch 1 Stunde", "2 horas"), so the normaliser needs the noun's gender:
from a short list of the nouns such replies count, else from the word's ending (Spanish,
Portuguese and Italian nouns in -a, German nouns in -e, -ung, -heit..., are feminine, with
the listed exceptions). A word that is not a noun (a conjunction, a preposition: "1 y 5")
leaves the number as said alone.
"""

from __future__ import annotations

import functools
import re

MASCULINE, FEMININE, NEUTER = "m", "f", "n"
NOMINATIVE, ACCUSATIVE, DATIVE = "nom", "acc", "dat"

# Words that follow a number without being what it counts.
_NOT_NOUNS = {
    "fr": "et ou à de du des en par pour avec sans que qui le la les au aux sur sous jusqu entre moins "
          "plus mille ni mais",
    "it": "e ed o a ad al alla alle di del della delle in per con su da dal dalla che il la le lo gli i fino "
          "tra fra meno più mila ma né",
    "es": "y e o u a al de del en por para con sin que la las el los hasta desde entre menos más mil ni pero "
          "sobre tras según",
    "pt": "e ou a à às ao aos de do da dos das em no na nos nas por para com sem que o os as até desde entre "
          "menos mais mil nem mas sobre",
}
NOT_NOUNS: dict[str, frozenset[str]] = {code: frozenset(words.split()) for code, words in _NOT_NOUNS.items()}

# Nouns whose gender their ending does not tell (or that replies count often), lower case,
# singular and plural.
_LEXICON: dict[str, dict[str, str]] = {
    "fr": {FEMININE: "heure heures minute minutes seconde secondes semaine semaines journée journées année "
                     "années fois personne personnes lampe lampes lumière lumières porte portes fenêtre "
                     "fenêtres pièce pièces prise prises alarme alarmes minuterie minuteries tâche tâches "
                     "chose choses entité entités zone zones liste listes chambre chambres ampoule ampoules "
                     "enceinte enceintes télévision télévisions machine machines voiture voitures batterie "
                     "batteries caméra caméras valeur valeurs étape étapes place places nuit nuits tasse "
                     "tasses cuillère cuillères cuillerée cuillerées pincée pincées part parts fois "
                     "notification notifications tranche tranches soirée soirées matinée matinées prise "
                     "douche douches mesure mesures station stations pile piles vanne vannes",
           MASCULINE: "degré degrés jour jours mois an ans minuteur minuteurs"},
    "it": {FEMININE: "luce luci notte notti chiave chiavi parte parti fine volte ore",
           MASCULINE: "problema problemi sistema sistemi programma programmi tema temi clima giorno pigiama"},
    "es": {FEMININE: "vez veces luz luces noche noches tarde tardes llave llaves calle calles gente nube "
                     "nubes imagen imágenes red redes flor flores parte partes mano manos foto fotos radio "
                     "sal piel fuente fuentes",
           MASCULINE: "día días mapa mapas problema problemas sistema sistemas programa programas tema temas "
                      "clima idioma idiomas planeta planetas sofá sofás mediodía pijama pijamas esquema"},
    "pt": {FEMININE: "vez vezes luz luzes tarde tardes noite noites chave chaves fonte fontes rede redes parte "
                     "partes mão mãos foto fotos gente cor cores flor flores imagem imagens ordem ordens",
           MASCULINE: "dia dias mapa mapas problema problemas sistema sistemas programa programas tema temas "
                      "clima idioma idiomas planeta planetas sofá sofás pijama pijamas"},
    "de": {FEMININE: "tür türen uhr person personen nacht nächte steckdose zeit",
           MASCULINE: "tag tage monat monate timer wecker eintrag einträge artikel raum räume sensor sensoren "
                      "schalter ventilator grad euro dollar cent franken rappen meter kilometer liter "
                      "zentimeter millimeter becher löffel teelöffel esslöffel punkt",
           NEUTER: "jahr jahre licht lichter fenster gerät geräte element elemente mal zimmer glas gläser "
                   "prozent stück watt volt ampere kilo kilogramm gramm pfund ei eier"},
}
LEXICON: dict[str, dict[str, str]] = {
    code: {word: gender for gender, words in table.items() for word in words.split()}
    for code, table in _LEXICON.items()
}

# Endings that make a noun feminine when no list above names it.
_FEMININE_ENDINGS: dict[str, tuple[str, ...]] = {
    "es": ("a", "as", "ción", "ciones", "sión", "siones", "dad", "dades", "tad", "tades", "tud", "tudes",
           "umbre", "umbres"),
    "pt": ("a", "as", "ção", "ções", "são", "sões", "dade", "dades", "agem", "agens"),
    "it": ("a", "zione", "zioni", "sione", "sioni", "tà"),
    "fr": ("tion", "tions", "sion", "sions", "té", "tés", "ette", "ettes", "ure", "ures", "ance", "ances",
           "ence", "ences"),
    "de": ("e", "ung", "ungen", "heit", "heiten", "keit", "keiten", "schaft", "schaften", "ion", "ionen",
           "tät", "täten", "ik", "ei", "eien"),
}

# Dutch "het" nouns a half is counted of ("een half uur"; "een halve liter" otherwise).
DUTCH_NEUTER = frozenset("uur jaar kilo pond ons glas blik pak stuk kwartier ei brood".split())

# German prepositions and the case of the number after them ("in einer Stunde", "für einen Tag").
GERMAN_CASES: dict[str, str] = {
    **{word: DATIVE for word in "mit nach seit von vom vor zu zum zur aus bei beim in im an am binnen "
                                 "innerhalb außer gegenüber".split()},
    **{word: ACCUSATIVE for word in "für um durch gegen ohne über pro je".split()},
}

_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


@functools.lru_cache(maxsize=2048)
def noun_gender(word: str, code: str) -> str | None:
    """The gender of `word` taken as the noun a number counts; None where it is no noun
    (a word numbers need not agree with, or a language whose numbers do not agree)."""
    if code not in _FEMININE_ENDINGS or not _WORD.fullmatch(word):
        return None
    lower = word.lower()
    if code == "de":
        if not word[0].isupper():
            return None  # German nouns are capitalised
    elif lower in NOT_NOUNS[code]:
        return None
    known = LEXICON[code].get(lower)
    if known is not None:
        return known
    if lower.endswith(_FEMININE_ENDINGS[code]):
        return FEMININE
    if code == "de" and lower.endswith("en") and lower[:-1].endswith(_FEMININE_ENDINGS["de"]):
        return FEMININE  # a plural: "Stunden", "Lampen", "Steckdosen"
    return NEUTER if code == "de" else MASCULINE
