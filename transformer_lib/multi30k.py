# Hand-written tool module (not generated from a notebook).
"""Finding Multi30k: the six files of task 1 (raw), looked for in a data directory and checked against their
published sha256 sums, or downloaded (with pooch: a temporary file, checked, then moved into place); and
`offline_corpus`, the stand-in the chapters fall back on when the files cannot be had.

Chapter 6 uses it and explains it; it is file plumbing, not the lesson, so it lives here rather than in the chapter:

    pairs = load_multi30k("train")      # [(German, English), ...], 29,000 of them
"""
from __future__ import annotations

import gzip
import os
import random
from pathlib import Path

from transformer_lib.checks.core import check_int
from transformer_lib.checks.data import check_split
from transformer_lib.files import sha256_of

__all__ = ["MULTI30K_URL", "MULTI30K_ENV", "OFFLINE_ENV", "MULTI30K_FILES", "DataUnavailable", "multi30k_dirs",
           "offline_forced", "load_multi30k", "offline_corpus"]

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
MULTI30K_ENV = "MULTI30K_DIR"
OFFLINE_ENV = "MULTI30K_OFFLINE"  # set (to anything but 0): Multi30k is neither looked for nor downloaded
MULTI30K_FILES = {  # split -> ((German file, sha256), (English file, sha256))
    "train": (("train.de.gz", "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"),
              ("train.en.gz", "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f")),
    "val": (("val.de.gz", "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"),
            ("val.en.gz", "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28")),
    "test2016": (("test_2016_flickr.de.gz", "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"),
                 ("test_2016_flickr.en.gz", "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9")),
}


class DataUnavailable(RuntimeError):
    """Multi30k could not be found locally or downloaded; the message says where to put the files."""


def _pooch():
    import warnings

    with warnings.catch_warnings():  # pooch imports tqdm.auto, which warns in kernels without ipywidgets
        warnings.simplefilter("ignore")
        import pooch
    return pooch


def multi30k_dirs(root=None) -> list[Path]:
    """Where load_multi30k looks, in order: `root`, then $MULTI30K_DIR, then the user cache directory."""
    dirs = [Path(root)] if root is not None else []
    if os.environ.get(MULTI30K_ENV):
        dirs.append(Path(os.environ[MULTI30K_ENV]))
    return dirs + [Path(_pooch().os_cache("transformer_lib")) / "multi30k"]


def _find_or_fetch(name: str, sha256: str, root, download: bool) -> Path:
    """The path of one Multi30k file: the first copy found (checked against sha256), else a verified download."""
    dirs = multi30k_dirs(root)
    for path in (folder / name for folder in dirs):
        if path.is_file():
            if sha256_of(path) != sha256:
                raise DataUnavailable(
                    f"{path} is corrupt or not the published file (sha256 mismatch); delete it, or replace it "
                    f"with the file from {MULTI30K_URL}{name}"
                )
            return path
    where = ", ".join(str(d) for d in dirs)
    if not download:
        raise DataUnavailable(f"{name} not found in {where}; put the Multi30k files in one of them "
                              f"(from {MULTI30K_URL}), or set ${MULTI30K_ENV} to their folder, or pass download=True")
    pooch = _pooch()
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel("WARNING")  # its "Downloading data from ..." line, printed even where the download then fails
    try:  # pooch downloads to a temporary file, checks the sha256, then moves it into place
        return Path(pooch.retrieve(MULTI30K_URL + name, known_hash=f"sha256:{sha256}", fname=name, path=dirs[-1],
                                   downloader=pooch.HTTPDownloader(timeout=60, progressbar=False)))
    except Exception as err:  # no network, HTTP error, or a checksum mismatch
        raise DataUnavailable(
            f"could not download {MULTI30K_URL}{name} ({_why(err)}). "
            f"Download the Multi30k task-1 raw files by hand and put them in one of: {where} "
            f"(or set ${MULTI30K_ENV})"
        ) from None
    finally:
        logger.setLevel(level)


def _why(err: Exception) -> str:
    """Why a download failed, in a few words: requests' connection errors carry a chain of pools, hosts and
    resolver errors that no reader can act on."""
    text = (str(err).splitlines() or [""])[0]
    connection = any(kind.__name__ == "ConnectionError" for kind in type(err).__mro__)  # requests' ProxyError too
    if connection and any(word in text for word in ("Max retries", "Resolution", "proxy")):
        text = "the server could not be reached; is there a network?"
    return f"{type(err).__name__}: {text[:160]}"


def offline_forced() -> bool:
    """True while $MULTI30K_OFFLINE is set to anything but "" or "0": the chapters then read the offline corpus at
    once, with no download tried (the test command sets it where Multi30k cannot be had)."""
    return os.environ.get(OFFLINE_ENV, "").strip() not in ("", "0")


def load_multi30k(split: str, root=None, download: bool = True) -> list[tuple[str, str]]:
    """(German, English) sentence pairs of Multi30k task 1: split "train" (29,000), "val" (1,014), "test2016" (1,000).

    Files are looked for in `root`, then $MULTI30K_DIR, then the user cache directory; missing ones are
    downloaded into the cache and verified by sha256. Raises DataUnavailable, saying what to do, otherwise, and at
    once while $MULTI30K_OFFLINE is set.
    """
    check_split(split, MULTI30K_FILES)
    if offline_forced():
        raise DataUnavailable(f"${OFFLINE_ENV} is set, so Multi30k is neither looked for nor downloaded; unset it to "
                              "read Multi30k")
    columns = []
    for name, sha256 in MULTI30K_FILES[split]:  # the German file, then the English one
        with gzip.open(_find_or_fetch(name, sha256, root, download), "rt", encoding="utf-8") as handle:
            columns.append([line.rstrip("\n") for line in handle])
    de, en = columns
    if len(de) != len(en):
        raise DataUnavailable(f"Multi30k {split}: {len(de)} German but {len(en)} English lines")
    return list(zip(de, en))


# The offline corpus: a small German-English grammar written for this book, about a hundred words.
_SUBJECTS = [  # (German noun, English noun, gender: m, f, n or p for plural)
    ("Mann", "man", "m"), ("Hund", "dog", "m"), ("Junge", "boy", "m"), ("Radfahrer", "cyclist", "m"),
    ("Frau", "woman", "f"), ("Katze", "cat", "f"), ("Person", "person", "f"), ("Sängerin", "singer", "f"),
    ("Mädchen", "girl", "n"), ("Kind", "child", "n"), ("Pferd", "horse", "n"), ("Baby", "baby", "n"),
    ("Männer", "men", "p"), ("Frauen", "women", "p"), ("Kinder", "children", "p"), ("Hunde", "dogs", "p"),
]
_ADJECTIVES = [("klein", "small"), ("groß", "big"), ("jung", "young"), ("alt", "old"), ("braun", "brown"),
               ("weiß", "white"), ("schwarz", "black"), ("glücklich", "happy"), ("müde", "tired")]
_VERBS = [  # (German singular, German plural, English singular, English plural)
    ("läuft", "laufen", "runs", "run"), ("spielt", "spielen", "plays", "play"), ("sitzt", "sitzen", "sits", "sit"),
    ("steht", "stehen", "stands", "stand"), ("springt", "springen", "jumps", "jump"),
    ("wartet", "warten", "waits", "wait"), ("schläft", "schlafen", "sleeps", "sleep"),
]
_PLACES = [("im Park", "in the park"), ("auf der Straße", "on the street"), ("am Strand", "on the beach"),
           ("im Schnee", "in the snow"), ("vor einem Haus", "in front of a house"), ("im Wasser", "in the water"),
           ("auf einer Wiese", "on a meadow"), ("neben einem Auto", "next to a car")]
_EXTRAS = [("", ""), ("mit einem Ball", "with a ball"), ("mit einem Freund", "with a friend"),
           ("in der Sonne", "in the sun")]
_ARTICLE = {"m": ("Ein", "er"), "f": ("Eine", "e"), "n": ("Ein", "es"), "p": ("Zwei", "e")}  # article, ending


def offline_corpus(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n (German, English) pairs from a small grammar the book ships, for when Multi30k is unavailable.

    Sentences look like Multi30k's ("Ein kleiner Hund läuft im Schnee." / "A small dog runs in the snow.")
    but use about a hundred words; a model trained on them is no Multi30k model.
    """
    check_int("n", n)
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        noun_de, noun_en, gender = rng.choice(_SUBJECTS)
        article, ending = _ARTICLE[gender]
        adj_de, adj_en = rng.choice(_ADJECTIVES) if rng.random() < 0.6 else ("", "")
        if adj_de:  # "klein" + "er"; an adjective ending in e ("müde") takes the ending without its e
            adj_de += ending[1:] if adj_de.endswith("e") else ending
        verb = rng.choice(_VERBS)
        place_de, place_en = rng.choice(_PLACES)
        extra_de, extra_en = rng.choice(_EXTRAS)
        plural = gender == "p"
        de = " ".join(w for w in [article, adj_de, noun_de, verb[1 if plural else 0], extra_de, place_de] if w) + "."
        en_article = "Two" if plural else ("An" if (adj_en or noun_en)[0] in "aeiou" else "A")
        en = " ".join(w for w in [en_article, adj_en, noun_en, verb[3 if plural else 2], extra_en, place_en] if w) + "."
        pairs.append((de, en))
    return pairs
