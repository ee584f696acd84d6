"""The language codes ceg knows, and reading one from the user.

A language is named by its ISO 639-1 code (``de``, ``zh``, ``ar``), or by the
ISO 639-3 code the detector names where a language has no two-letter one
(``yue`` Cantonese, ``ceb`` Cebuano). A tag with a region or a script
(``pt-BR``, ``zh_Hant``, ``DE``) is read as its language. What the detector
cannot name is written ``und-Xxxx`` (BCP 47's "undetermined", with the ISO
15924 script it is written in, ``und-Latn``), or ``und`` when the text has no
letters at all; such text is split, tokenized and compared by its script alone.
"""

from __future__ import annotations

from ..errors import UsageError

__all__ = [
    "AUTO",
    "ENGLISH",
    "ISO_639_1",
    "LANGUAGES",
    "UNDETERMINED",
    "base_language",
    "check_language",
    "is_known",
    "language_name",
]

AUTO = "auto"
ENGLISH = "en"
UNDETERMINED = "und"

#: ISO 639-1, every code with its English name (the Library of Congress list).
ISO_639_1: dict[str, str] = {
    "aa": "Afar", "ab": "Abkhazian", "ae": "Avestan", "af": "Afrikaans", "ak": "Akan",
    "am": "Amharic", "an": "Aragonese", "ar": "Arabic", "as": "Assamese", "av": "Avaric",
    "ay": "Aymara", "az": "Azerbaijani", "ba": "Bashkir", "be": "Belarusian",
    "bg": "Bulgarian", "bi": "Bislama", "bm": "Bambara", "bn": "Bengali", "bo": "Tibetan",
    "br": "Breton", "bs": "Bosnian", "ca": "Catalan", "ce": "Chechen", "ch": "Chamorro",
    "co": "Corsican", "cr": "Cree", "cs": "Czech", "cu": "Church Slavic", "cv": "Chuvash",
    "cy": "Welsh", "da": "Danish", "de": "German", "dv": "Divehi", "dz": "Dzongkha",
    "ee": "Ewe", "el": "Greek", "en": "English", "eo": "Esperanto", "es": "Spanish",
    "et": "Estonian", "eu": "Basque", "fa": "Persian", "ff": "Fulah", "fi": "Finnish",
    "fj": "Fijian", "fo": "Faroese", "fr": "French", "fy": "Western Frisian", "ga": "Irish",
    "gd": "Scottish Gaelic", "gl": "Galician", "gn": "Guarani", "gu": "Gujarati",
    "gv": "Manx", "ha": "Hausa", "he": "Hebrew", "hi": "Hindi", "ho": "Hiri Motu",
    "hr": "Croatian", "ht": "Haitian Creole", "hu": "Hungarian", "hy": "Armenian",
    "hz": "Herero", "ia": "Interlingua", "id": "Indonesian", "ie": "Interlingue",
    "ig": "Igbo", "ii": "Sichuan Yi", "ik": "Inupiaq", "io": "Ido", "is": "Icelandic",
    "it": "Italian", "iu": "Inuktitut", "ja": "Japanese", "jv": "Javanese",
    "ka": "Georgian", "kg": "Kongo", "ki": "Kikuyu", "kj": "Kuanyama", "kk": "Kazakh",
    "kl": "Kalaallisut", "km": "Khmer", "kn": "Kannada", "ko": "Korean", "kr": "Kanuri",
    "ks": "Kashmiri", "ku": "Kurdish", "kv": "Komi", "kw": "Cornish", "ky": "Kyrgyz",
    "la": "Latin", "lb": "Luxembourgish", "lg": "Ganda", "li": "Limburgish", "ln": "Lingala",
    "lo": "Lao", "lt": "Lithuanian", "lu": "Luba-Katanga", "lv": "Latvian",
    "mg": "Malagasy", "mh": "Marshallese", "mi": "Maori", "mk": "Macedonian",
    "ml": "Malayalam", "mn": "Mongolian", "mr": "Marathi", "ms": "Malay", "mt": "Maltese",
    "my": "Burmese", "na": "Nauru", "nb": "Norwegian Bokmål", "nd": "North Ndebele",
    "ne": "Nepali", "ng": "Ndonga", "nl": "Dutch", "nn": "Norwegian Nynorsk",
    "no": "Norwegian", "nr": "South Ndebele", "nv": "Navajo", "ny": "Chichewa",
    "oc": "Occitan", "oj": "Ojibwa", "om": "Oromo", "or": "Odia", "os": "Ossetian",
    "pa": "Punjabi", "pi": "Pali", "pl": "Polish", "ps": "Pashto", "pt": "Portuguese",
    "qu": "Quechua", "rm": "Romansh", "rn": "Rundi", "ro": "Romanian", "ru": "Russian",
    "rw": "Kinyarwanda", "sa": "Sanskrit", "sc": "Sardinian", "sd": "Sindhi",
    "se": "Northern Sami", "sg": "Sango", "si": "Sinhala", "sk": "Slovak", "sl": "Slovenian",
    "sm": "Samoan", "sn": "Shona", "so": "Somali", "sq": "Albanian", "sr": "Serbian",
    "ss": "Swati", "st": "Southern Sotho", "su": "Sundanese", "sv": "Swedish",
    "sw": "Swahili", "ta": "Tamil", "te": "Telugu", "tg": "Tajik", "th": "Thai",
    "ti": "Tigrinya", "tk": "Turkmen", "tl": "Tagalog", "tn": "Tswana", "to": "Tongan",
    "tr": "Turkish", "ts": "Tsonga", "tt": "Tatar", "tw": "Twi", "ty": "Tahitian",
    "ug": "Uyghur", "uk": "Ukrainian", "ur": "Urdu", "uz": "Uzbek", "ve": "Venda",
    "vi": "Vietnamese", "vo": "Volapük", "wa": "Walloon", "wo": "Wolof", "xh": "Xhosa",
    "yi": "Yiddish", "yo": "Yoruba", "za": "Zhuang", "zh": "Chinese", "zu": "Zulu",
}  # fmt: skip

#: Languages the detector (py3langid) names that have no ISO 639-1 code.
DETECTOR_EXTRA: dict[str, str] = {
    "ace": "Acehnese", "ary": "Moroccan Arabic", "arz": "Egyptian Arabic",
    "bcl": "Central Bikol", "crh": "Crimean Tatar", "ext": "Extremaduran",
    "fuv": "Nigerian Fulfulde", "gcf": "Guadeloupean Creole", "gcr": "Guianese Creole",
    "gom": "Goan Konkani", "grc": "Ancient Greek", "gug": "Paraguayan Guarani",
    "guw": "Gun", "hbo": "Ancient Hebrew", "kab": "Kabyle", "kik": "Kikuyu",
    "lij": "Ligurian", "ltg": "Latgalian", "nso": "Northern Sotho",
    "pcm": "Nigerian Pidgin", "sdh": "Southern Kurdish", "uzs": "Southern Uzbek",
    "vec": "Venetian", "wuu": "Wu Chinese", "yue": "Cantonese",
}  # fmt: skip

#: Every language code ceg accepts and writes, with its English name.
LANGUAGES: dict[str, str] = {**ISO_639_1, **DETECTOR_EXTRA}


def base_language(code: str) -> str:
    """The language part of a tag, lower-cased: ``pt-BR`` -> ``pt``, ``und-Latn`` -> ``und``."""
    return code.replace("_", "-").split("-", 1)[0].strip().lower()


def is_known(code: str) -> bool:
    """Whether ``code`` (a language, or ``und``/``und-Xxxx``) is one ceg can write."""
    return base_language(code) in LANGUAGES or base_language(code) == UNDETERMINED


def language_name(code: str) -> str:
    """The English name of ``code``: ``de`` -> ``German``, ``und-Latn`` ->
    ``undetermined (Latn)``."""
    base = base_language(code)
    if base == UNDETERMINED:
        script = code.partition("-")[2]
        return f"undetermined ({script})" if script else "undetermined"
    return LANGUAGES.get(base, code)


def check_language(value: str, option: str = "--language") -> str:
    """``auto`` or the language code of ``value``, as ceg writes it; a usage error otherwise.

    ``DE``, ``de-AT`` and ``de_AT`` all give ``de``: ceg's processing depends on
    the language, not the region.
    """
    text = str(value).strip()
    if text.lower() == AUTO:
        return AUTO
    code = base_language(text)
    if code in LANGUAGES:
        return code
    raise UsageError(
        f"{option} {value}: not a language code ceg knows; use auto or an ISO 639-1 code "
        "such as en, de, zh (ceg languages lists them all)"
    )
