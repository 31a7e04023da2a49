"""A user's own corpus (egs/custom): a Kaldi dict dir derived from a plain lexicon, and the checks
of the user's data dirs that catch the common mistakes before any work is done.

Dict dir (``prepare_dict``), from a lexicon of ``word phone phone ...`` lines (space or tab
separated; blank lines skipped).  If the second field of the first entry is a number the file is
read as Kaldi's ``lexiconp.txt`` form (``word prob phone ...``) and every line must then have a
probability in (0, 1]; lexiconp.txt is written besides lexicon.txt.  Derived:
  - non-speech words: ``[...]``, ``<...>`` and ``!...`` forms (``[noise]``, ``<unk>``, ``!SIL``)
    and the OOV word; silence phones = the optional silence + the phones that only non-speech
    words use (SPN, NSN, LAU ...), one per line of silence_phones.txt;
  - optional silence: the phone of the lexicon's own one-phone silence word (``!SIL``, ``<sil>``,
    ``[sil]``, ``<silence>`` ...), else ``--silence-phone``, else SIL (``sil`` for a lexicon of
    lower-case phones), added to the lexicon as ``!SIL``;
  - OOV word: ``--oov-word`` (added with the spoken-noise phone SPN/spn if the lexicon lacks it),
    else the lexicon's own (``<unk>``, ``<UNK>``, ``[unk]``, ``<oov>``, ``<unknown>``, any case),
    else ``<unk>`` added with SPN/spn; written to oov.txt for prepare_lang.sh;
  - nonsilence_phones.txt: one line per base phone with its stress (trailing digit) variants
    (``AA AA0 AA1 AA2``), and extra_questions.txt: the silence phones, then one question per
    stress class (no digit, 0, 1, 2, ...), as Kaldi's librispeech local/prepare_dict.sh does.
The dict dir is assembled in a temp dir, checked with ``validate_dict_dir`` and swapped in whole.

Data dirs (``check_corpus``): see that function; its summary is what egs/custom/run.sh reads.
"""
from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field

from pynnet.hmm.lang import POS_SUFFIXES, RESERVED_WORDS, LexEntry, _read_lines, validate_dict_dir
from pynnet.io.atomic import atomic_write, make_temp_dir
from pynnet.io.errors import PynnetError, fail
from pynnet.io.tables import ascii_float, has_other_space

# lower-cased names of the OOV words lexicons use (mini_librispeech: <UNK>; swbd: [unk] ...)
OOV_NAMES = ("<unk>", "[unk]", "<oov>", "[oov]", "<unknown>", "[unknown]")
SILENCE_NAMES = ("!sil", "<sil>", "[sil]", "<silence>", "[silence]", "!silence")
ADDED_SILENCE_WORD = "!SIL"
DEFAULT_OOV_WORD = "<unk>"


def is_nonspeech(word: str) -> bool:
    """``[noise]``, ``<unk>``, ``!SIL``: Kaldi's bracketed and <>-forms of non-speech symbols."""
    return (len(word) > 2 and ((word[0] == "[" and word[-1] == "]") or (word[0] == "<" and word[-1] == ">"))) \
        or (len(word) > 1 and word[0] == "!")


def split_stress(phone: str) -> tuple[str, str]:
    """'AA1' -> ('AA', '1'); 'B' -> ('B', ''); a phone of digits only keeps them as its base."""
    m = re.fullmatch(r"(.*\D)(\d+)", phone)
    return (m.group(1), m.group(2)) if m else (phone, "")


# ----------------------------------------------------------------------------------------------
# The user's lexicon
# ----------------------------------------------------------------------------------------------

@dataclass
class Lexicon:
    path: str
    entries: list[LexEntry]            # file order, exact duplicates dropped
    lines: list[int]                   # the line of each entry
    has_probs: bool                    # read as lexiconp (word prob phones)
    prob_text: list[str]               # each entry's probability as written ('' without)
    duplicates: int = 0

    @property
    def words(self) -> set[str]:
        return {e.word for e in self.entries}

    def line_of(self, word: str) -> int | None:
        for e, n in zip(self.entries, self.lines):
            if e.word == word:
                return n
        return None


def _check_phone(p: str, path: str, n: int | None, what: str) -> None:
    if p.startswith("#"):
        fail(f"{what} '{p}' starts with '#' (reserved for disambiguation symbols)", path, n)
    if p == "<eps>":
        fail(f"'<eps>' is not a valid {what}", path, n)
    if p.endswith(POS_SUFFIXES):
        fail(f"{what} '{p}' ends in _B/_E/_I/_S, which Kaldi reserves for position-dependent phones: "
             "rename it", path, n)


def check_word(w: str, path: str | None = None, n: int | None = None, what: str = "word") -> None:
    if w in RESERVED_WORDS:
        fail(f"{what} '{w}' is reserved (Kaldi's {' '.join(RESERVED_WORDS)})", path, n)
    if w.startswith("#"):
        fail(f"{what} '{w}' starts with '#' (reserved for disambiguation symbols)", path, n)


def read_lexicon(path: str) -> Lexicon:
    """Read a plain (or lexiconp-form) lexicon; every mistake is an error naming file:line."""
    rows = [(n, f) for n, f in _read_lines(path) if f]
    if not rows:
        fail("the lexicon has no entries (expected lines 'word phone phone ...')", path)
    first = rows[0][1]
    has_probs = len(first) > 1 and ascii_float(first[1]) is not None
    entries: list[LexEntry] = []
    lines: list[int] = []
    probs: list[str] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    dups = 0
    with open(path, "rb") as f:
        raw = f.read().decode("utf-8").split("\n")     # _read_lines checked the encoding
    for n, fields in rows:
        line = raw[n - 1].rstrip("\r")
        if has_other_space(line):
            m = next(c for c in line if c.isspace() and c not in " \t")
            fail(f"whitespace character U+{ord(m):04X} (fields are separated by spaces and tabs only)", path, n)
        word, rest = fields[0], fields[1:]
        check_word(word, path, n)
        prob = ""
        if has_probs:
            p = ascii_float(rest[0]) if rest else None
            if p is None or not 0.0 < p <= 1.0:
                fail(f"word '{word}' has no pronunciation probability in (0, 1] (the first line has one, so "
                     "the lexicon is read as 'word prob phone ...')", path, n)
            prob, rest = rest[0], rest[1:]
        if not rest:
            fail(f"word '{word}' has no phones (a lexicon line is 'word phone phone ...')", path, n)
        for p in rest:
            _check_phone(p, path, n, "phone")
        key = (word, tuple(rest))
        if key in seen:
            dups += 1
            continue
        seen.add(key)
        entries.append(LexEntry(word, float(prob) if prob else 1.0, list(rest)))
        lines.append(n)
        probs.append(prob)
    return Lexicon(path, entries, lines, has_probs, probs, dups)


def find_oov_word(lex: Lexicon) -> str | None:
    """The lexicon's own OOV word (<unk>, <UNK>, [unk], <oov> ..., any case), the first listed."""
    return next((e.word for e in lex.entries if e.word.lower() in OOV_NAMES), None)


def find_silence_word(lex: Lexicon) -> tuple[str, str] | None:
    """(word, phone) of the lexicon's one-phone silence word (!SIL, <sil>, [silence] ...)."""
    return next(((e.word, e.phones[0]) for e in lex.entries
                 if e.word.lower() in SILENCE_NAMES and len(e.phones) == 1), None)


# ----------------------------------------------------------------------------------------------
# Deriving and writing the dict dir
# ----------------------------------------------------------------------------------------------

@dataclass
class DictPlan:
    entries: list[LexEntry]
    prob_text: list[str]
    has_probs: bool
    silence_phones: list[str]          # optional silence first
    nonsilence_lines: list[list[str]]
    optional_silence: str
    extra_questions: list[list[str]]
    oov_word: str
    notes: list[str] = field(default_factory=list)


def _lower_case(phones: set[str]) -> bool:
    lower = sum(p != p.upper() and p == p.lower() for p in phones)
    upper = sum(p != p.lower() and p == p.upper() for p in phones)
    return lower > upper


def make_dict(lex: Lexicon, oov_word: str | None = None, silence_phone: str | None = None) -> DictPlan:
    """The dict dir's contents for ``lex`` (see the module doc for the rules)."""
    entries = list(lex.entries)
    probs = list(lex.prob_text)
    notes: list[str] = []
    if lex.duplicates:
        notes.append(f"dropped {lex.duplicates} repeated entr{'y' if lex.duplicates == 1 else 'ies'}")
    if oov_word is not None:
        check_word(oov_word, what="--oov-word")
    oov = oov_word if oov_word is not None else find_oov_word(lex) or DEFAULT_OOV_WORD
    speech = lambda w: not is_nonspeech(w) and w != oov  # noqa: E731
    speech_phones = {p for e in entries if speech(e.word) for p in e.phones}
    if not speech_phones:
        fail("no word of the lexicon is a speech word (all are [..], <..> or !.. forms)", lex.path)
    case = str.lower if _lower_case(speech_phones) else str.upper

    def add(word: str, phone: str, why: str) -> None:
        entries.append(LexEntry(word, 1.0, [phone]))
        probs.append("1.0" if lex.has_probs else "")
        notes.append(f"added '{word} {phone}' ({why})")

    # optional silence
    own = find_silence_word(lex)
    if silence_phone is not None:
        _check_phone(silence_phone, None, None, "--silence-phone")
        opt = silence_phone
    else:
        opt = own[1] if own else case("SIL")
    # (prepare_lang needs no word for it; Kaldi's recipes list one all the same, so that a
    # transcript's !SIL is a word)
    if not any(e.phones == [opt] for e in entries) and ADDED_SILENCE_WORD not in lex.words:
        add(ADDED_SILENCE_WORD, opt, "the optional silence")
    if opt in speech_phones:
        user = next(e.word for e in entries if speech(e.word) and opt in e.phones)
        fail(f"the optional silence phone '{opt}' is also a phone of the word '{user}'", lex.path, lex.line_of(user))

    # OOV word
    if oov not in lex.words:
        add(oov, case("SPN"), "the OOV word, with the spoken-noise phone" if oov_word is not None
            else "the OOV word: the lexicon has none")
    phones_nonspeech = {p for e in entries if not speech(e.word) for p in e.phones}
    silence = [opt] + sorted((phones_nonspeech - speech_phones) - {opt}, key=str.encode)
    groups: dict[str, list[str]] = {}
    classes: dict[str, list[str]] = {}
    for p in sorted(speech_phones, key=str.encode):
        base, stress = split_stress(p)
        groups.setdefault(base, []).append(p)
        classes.setdefault(stress, []).append(p)
    nonsil_lines = sorted(groups.values(), key=lambda g: [x.encode() for x in g])
    questions = [list(silence)] + [classes[k] for k in sorted(classes, key=lambda k: (k != "", k.encode()))]
    return DictPlan(entries, probs, lex.has_probs, silence, nonsil_lines, opt, questions, oov, notes)


def write_dict(plan: DictPlan, dict_dir: str) -> list[str]:
    """Write the dict dir: into a temp dir beside ``dict_dir``, validated as Kaldi's
    validate_dict_dir.pl validates it, then swapped in whole (no stale lexiconp.txt of an earlier
    run survives, and a failure leaves the old one).  Returns the validator's warnings."""
    dict_dir = os.path.abspath(dict_dir)
    parent = os.path.dirname(dict_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = make_temp_dir(parent, f".{os.path.basename(dict_dir)}.")
    old = None
    try:
        order = sorted(range(len(plan.entries)),
                       key=lambda i: (plan.entries[i].word.encode(), " ".join(plan.entries[i].phones).encode()))
        j = lambda name: os.path.join(tmp, name)  # noqa: E731
        with atomic_write(j("lexicon.txt")) as f:
            f.writelines(f"{plan.entries[i].word} {' '.join(plan.entries[i].phones)}\n" for i in order)
        if plan.has_probs:
            with atomic_write(j("lexiconp.txt")) as f:
                f.writelines(f"{plan.entries[i].word} {plan.prob_text[i]} {' '.join(plan.entries[i].phones)}\n"
                             for i in order)
        with atomic_write(j("silence_phones.txt")) as f:
            f.writelines(p + "\n" for p in plan.silence_phones)
        with atomic_write(j("optional_silence.txt")) as f:
            f.write(plan.optional_silence + "\n")
        with atomic_write(j("nonsilence_phones.txt")) as f:
            f.writelines(" ".join(line) + "\n" for line in plan.nonsilence_lines)
        with atomic_write(j("extra_questions.txt")) as f:
            f.writelines(" ".join(q) + "\n" for q in plan.extra_questions)
        with atomic_write(j("oov.txt")) as f:
            f.write(plan.oov_word + "\n")
        try:
            warnings = [w.replace(tmp, dict_dir) for w in validate_dict_dir(tmp)]
        except PynnetError as e:   # a bug here, not the user's mistake: say which
            raise PynnetError(f"the derived dict dir does not validate: {e}") from e
        if os.path.lexists(dict_dir):
            if not os.path.isdir(dict_dir):
                fail("exists and is not a directory", dict_dir)
            old = make_temp_dir(parent, f".{os.path.basename(dict_dir)}.old.")
            os.rmdir(old)
            os.rename(dict_dir, old)
        os.rename(tmp, dict_dir)
        tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return warnings


def prepare_dict(lexicon: str, dict_dir: str, oov_word: str | None = None,
                 silence_phone: str | None = None) -> DictPlan:
    """pynnet-prepare-dict: read ``lexicon``, derive and write the dict dir ``dict_dir``."""
    plan = make_dict(read_lexicon(lexicon), oov_word, silence_phone)
    write_dict(plan, dict_dir)
    return plan


# ----------------------------------------------------------------------------------------------
# Checking the user's data dirs
# ----------------------------------------------------------------------------------------------

MAX_OOV_SHOWN = 20
DEFAULT_MAX_PIPES = 20


@dataclass
class AudioInfo:
    rate: int
    channels: int
    frames: int


def _sphere_info(path: str) -> AudioInfo:
    """Rate, channels and samples from a SPHERE header alone (read_sphere reads all the samples)."""
    from pynnet.io.audio import _parse_sphere_header
    with open(path, "rb") as f:
        first = f.read(16)
        try:
            size = int(first[8:16].split(b"\n")[0])
        except ValueError:
            fail("bad SPHERE header size line", path)
        f.seek(0)
        fields = _parse_sphere_header(f.read(size), path)
        data_bytes = os.fstat(f.fileno()).st_size - size
    try:
        rate, channels = int(fields["sample_rate"]), int(fields.get("channel_count", 1))
    except (KeyError, ValueError):
        fail("SPHERE header lacks sample_rate", path)
    nbytes = int(fields.get("sample_n_bytes", 2)) or 2
    frames = int(fields.get("sample_count", data_bytes // (nbytes * max(channels, 1))))
    return AudioInfo(rate, channels, frames)


def is_pipe(rx: str) -> bool:
    return rx.rstrip(" \t").endswith("|")


def audio_info(rx: str, where: str) -> AudioInfo:
    """What one wav.scp value holds: from the header of a plain file (WAV, FLAC, SPHERE ...);
    a pipe (``cmd |``) or an ``ark:offset`` entry is read whole.  Missing and unreadable audio
    are PynnetErrors ``where: ...`` naming the file."""
    rx = rx.strip(" \t")
    if is_pipe(rx) or (not os.path.exists(rx) and re.search(r":\d+$", rx)):
        from pynnet.io.audio import read_rxfilename
        data, rate = read_rxfilename(rx, where)
        return AudioInfo(rate, data.shape[1], data.shape[0])
    if not os.path.exists(rx):
        fail(f"no such audio file '{rx}'", where)
    try:
        with open(rx, "rb") as f:
            sphere = f.read(7) == b"NIST_1A"
        if sphere:
            info = _sphere_info(rx)
        else:
            import soundfile as sf
            i = sf.info(rx)
            info = AudioInfo(int(i.samplerate), int(i.channels), int(i.frames))
    except PynnetError as e:
        fail(f"cannot read audio file '{rx}': {e}", where)
    except Exception as e:  # soundfile's own error types; OSError (a directory, no permission)
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        why = re.sub(r"^Error opening .*?: ", "", why.replace(repr(rx), "FILE").replace(rx, "FILE"))  # named below
        fail(f"cannot read audio file '{rx}': {why}", where)
    if info.frames <= 0:
        fail(f"audio file '{rx}' has no samples", where)
    return info


def _stereo_fix(rx: str) -> str:
    f = rx.strip(" \t")
    if f.lower().endswith(".sph"):
        return f"sph2pipe -f wav -p -c 1 {f} |"
    return f"sox {f} -t wav - remix 1 |"


@dataclass
class DirSummary:
    path: str
    utterances: int
    speakers: int
    seconds: float
    hours_estimated: bool      # some durations extrapolated (pipes not run, no utt2dur)
    sample_rates: list[int]
    words: int
    oov_tokens: int
    oov_types: int
    pipes: int
    pipes_read: int

    def to_json(self) -> dict:
        return {"utterances": self.utterances, "speakers": self.speakers,
                "hours": round(self.seconds / 3600, 6), "seconds": round(self.seconds, 2),
                "hours_estimated": self.hours_estimated, "words": self.words,
                "oov_tokens": self.oov_tokens, "oov_types": self.oov_types,
                "pipes": self.pipes, "pipes_read": self.pipes_read}


@dataclass
class CorpusCheck:
    dirs: list[DirSummary]
    sample_rate: int | None
    problems: list[str]                               # one line each; empty: all is well
    speakers: int = 0
    mapped_text: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # dir -> (utt, words)
    warnings: list[str] = field(default_factory=list)   # the validator's (one speaker ...)

    def summary(self) -> dict:
        """The JSON summary: sample_rate; dirs: {dir as given: {utterances, speakers, hours,
        seconds, hours_estimated, words, oov_tokens, oov_types, pipes, pipes_read}}; total:
        {utterances, speakers, hours, seconds}."""
        secs = sum(d.seconds for d in self.dirs)
        return {"sample_rate": self.sample_rate,
                "dirs": {d.path: d.to_json() for d in self.dirs},
                "total": {"utterances": sum(d.utterances for d in self.dirs), "speakers": self.speakers,
                          "hours": round(secs / 3600, 6), "seconds": round(secs, 2)}}


def _first_and_more(items: list[str]) -> str:
    return items[0] + (f" (and {len(items) - 1} more)" if len(items) > 1 else "")


def _load(path: str):
    """The data dir with its tables C-sorted and spk2utt derived from utt2spk (fix_data_dir.sh
    makes the same of the recipe's copy), for the validator; user files may be unsorted."""
    from pynnet.io import datadir as D
    for name in ("wav.scp", "text"):
        if not os.path.exists(os.path.join(path, name)):
            if os.path.isdir(path):
                fail("no such file (a data dir needs wav.scp, text and utt2spk)", os.path.join(path, name))
    dd = D.load_data_dir(path, strict=False, prog="pynnet-check-corpus")
    tables = {name: {k: t[k] for k in sorted(t, key=str.encode)} for name, t in dd.tables.items()
              if name != "spk2utt"}
    spk2utt: dict[str, list[str]] = {}
    for u, s in tables["utt2spk"].items():
        spk2utt.setdefault(s, []).append(u)
    tables["spk2utt"] = {s: " ".join(us) for s, us in sorted(spk2utt.items(), key=lambda kv: kv[0].encode())}
    return D.DataDir(path, tables, dd.lines, dd.plain, dd.extra_kinds)


def check_corpus(dirs: list[str], lexicon: str | None = None, oov_word: str | None = None,
                 max_pipes: int = DEFAULT_MAX_PIPES, progress: bool = True) -> CorpusCheck:
    """Check the user's data dirs (wav.scp, text, utt2spk; spk2utt, segments, utt2dur are read if
    there) for the common mistakes, one line each in ``problems`` naming file (and line):
    utterance-ids without their speaker-id prefix; what Kaldi's validate_data_dir.sh --no-feats
    refuses (``datadir.validate``); empty transcripts; words missing from ``lexicon`` (with
    counts; mapped to ``oov_word`` when given, into ``mapped_text``); audio that does not exist or
    does not read; multi-channel audio with no channel chosen; sample rates that differ across
    all the dirs.  Plain files are checked from their headers; pipes (``cmd |``) are run, the
    first ``max_pipes`` of each dir (all if negative): the durations of those not run come from
    utt2dur or are extrapolated (``hours_estimated``).  Malformed files (a line with too few
    fields, a duplicate key, bytes that are not UTF-8) are raised at once."""
    from tqdm import tqdm

    from pynnet.io import datadir as D
    from pynnet.io.progress import progress_kwargs
    from pynnet.io.tables import split_fields

    lex_words: set[str] | None = None
    suggest = oov_word or DEFAULT_OOV_WORD
    if lexicon is not None:
        lex = read_lexicon(lexicon)
        lex_words = lex.words
        suggest = oov_word or find_oov_word(lex) or DEFAULT_OOV_WORD
    if oov_word is not None:
        check_word(oov_word, what="--oov-word")
    problems: list[str] = []
    warnings: list[str] = []
    summaries: list[DirSummary] = []
    mapped: dict[str, list[tuple[str, str]]] = {}
    first_at_rate: dict[int, str] = {}       # rate -> 'wav.scp:line (file)' of its first recording
    count_at_rate: Counter = Counter()
    all_speakers: set[str] = set()
    for path in dirs:
        dd = _load(path)
        u2s = dd.utt2spk
        all_speakers.update(u2s.values())
        # speaker-id prefixes (Kaldi sorts on utterance-id and needs a speaker's utterances together)
        bad = [u for u, s in u2s.items() if not u.startswith(s)]
        if bad:
            u = min(bad, key=lambda x: dd.where("utt2spk", x)[1] or 0)
            f, n = dd.where("utt2spk", u)
            problems.append(f"{f}:{n}: utterance-id '{u}' does not begin with its speaker-id '{u2s[u]}' "
                            f"({len(bad)} of {len(u2s)} utterances): Kaldi sorts by utterance-id and needs each "
                            f"speaker's utterances together; rename the utterances to begin with their speaker-id "
                            f"(e.g. '{u2s[u]}-{u}') in wav.scp, text and utt2spk")
        try:
            warnings += [f"{path}: {w}" for w in D.validate(dd, no_feats=True, no_spk_sort=bool(bad))
                         if "do not start with their speaker-id" not in w]
        except PynnetError as e:
            problems.append(str(e))
        text = dd.tables.get("text", {})
        by_line = lambda us: sorted(us, key=lambda x: dd.where("text", x)[1] or 0)  # noqa: E731
        empty = by_line([u for u, w in text.items() if not w])
        if empty:
            f, n = dd.where("text", empty[0])
            problems.append(f"{f}:{n}: utterance '{empty[0]}' has an empty transcript ({len(empty)} in {f}): "
                            "give it its words, or remove the utterance from wav.scp, text and utt2spk")
        tokens = 0
        oov: Counter = Counter()
        words_of = {u: split_fields(w) for u, w in text.items()}
        for ws in words_of.values():
            tokens += len(ws)
            if lex_words is not None:
                oov.update(w for w in ws if w not in lex_words)
        if oov:
            if oov_word is None:
                shown = oov.most_common(MAX_OOV_SHOWN)
                listed = ", ".join(f"{w} ({c})" for w, c in shown)
                more = f" and {len(oov) - len(shown)} more" if len(oov) > len(shown) else ""
                problems.append(f"{dd.file('text')}: {len(oov)} word(s), {sum(oov.values())} of {tokens} tokens, "
                                f"are not in the lexicon {lexicon}: {listed}{more}; add them to the lexicon, or map "
                                f"them to the OOV word with --oov-word {suggest}")
            else:
                order = sorted(text, key=lambda u: dd.where("text", u)[1] or 0)
                mapped[path] = [(u, " ".join(w if w in lex_words else oov_word for w in words_of[u]))
                                for u in order]

        # audio
        wav = dd.tables.get("wav.scp", {})
        missing, unreadable, stereo = [], [], []
        durs: dict[str, float] = {}
        rates: set[int] = set()
        pipes = sum(is_pipe(rx) for rx in wav.values())
        pipes_read = 0
        items = sorted(wav.items(), key=lambda kv: dd.where("wav.scp", kv[0])[1] or 0)
        for reco, rx in tqdm(items, desc=f"checking {path}", unit="file", **progress_kwargs(progress)):
            f, n = dd.where("wav.scp", reco)
            where = f"{f}:{n}"
            if is_pipe(rx):
                if 0 <= max_pipes <= pipes_read:
                    continue
                pipes_read += 1
            try:
                info = audio_info(rx, where)
            except PynnetError as e:
                (missing if "no such audio file" in str(e) else unreadable).append(str(e))
                continue
            durs[reco] = info.frames / info.rate
            rates.add(info.rate)
            count_at_rate[info.rate] += 1
            first_at_rate.setdefault(info.rate, f"{where} ({rx.strip()})")
            if info.channels > 1:
                stereo.append(f"{where}: '{rx.strip()}' has {info.channels} channels and no channel is chosen: "
                              f"Kaldi needs one, e.g. '{_stereo_fix(rx) if not is_pipe(rx) else '... | sox -t wav - -t wav - remix 1 |'}'")
        for kind in (missing, unreadable, stereo):
            if kind:
                problems.append(_first_and_more(kind))

        # durations: utterances from their segments or recordings; what was not read from utt2dur
        # or the mean of those that were
        utt2dur = dd.utt2dur or {}
        seg = dd.segments
        utt_secs: list[float | None] = []
        for u in u2s:
            if seg is not None and u in seg:
                s = seg[u]
                utt_secs.append((s.end - s.start) if s.end > 0 else durs.get(s.recording, utt2dur.get(u)))
            else:
                utt_secs.append(durs.get(u, utt2dur.get(u)))
        known = [x for x in utt_secs if x is not None]
        estimated = len(known) < len(utt_secs)
        seconds = sum(known) + (len(utt_secs) - len(known)) * (sum(known) / len(known) if known else 0.0)
        summaries.append(DirSummary(path, len(u2s), len(set(u2s.values())), seconds, estimated,
                                    sorted(rates), tokens, sum(oov.values()), len(oov), pipes, pipes_read))
    sample_rate = None
    if len(count_at_rate) > 1:
        (r1, n1), (r2, n2) = count_at_rate.most_common(2)
        others = "" if len(count_at_rate) == 2 else f" ({len(count_at_rate)} rates in all)"
        problems.append(f"mixed sample rates: {first_at_rate[r1]} is {r1} Hz ({n1} file(s)) but {first_at_rate[r2]} is "
                        f"{r2} Hz ({n2} file(s)){others}: resample in wav.scp, e.g. 'sox FILE -r {r1} -t wav - |'")
    elif count_at_rate:
        sample_rate = next(iter(count_at_rate))
    return CorpusCheck(summaries, sample_rate, problems, len(all_speakers), mapped, warnings)


def write_mapped_text(data_dir: str, rows: list[tuple[str, str]]) -> None:
    """Replace <data_dir>/text by ``rows`` (atomically), the original kept as text.orig (an
    existing text.orig, the first original, is kept)."""
    text = os.path.join(data_dir, "text")
    orig = text + ".orig"
    if not os.path.exists(orig):
        with open(text, "rb") as f, atomic_write(orig, "wb") as g:
            shutil.copyfileobj(f, g)
    with atomic_write(text) as f:
        f.writelines(f"{u} {w}\n" if w else f"{u}\n" for u, w in rows)
