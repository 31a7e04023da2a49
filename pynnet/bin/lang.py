"""Programs for lang dirs, language models and decoding graphs (behind utils/prepare_lang.sh,
utils/format_lm.sh, utils/mkgraph.sh and steps/train_lm.sh)."""
from __future__ import annotations

import os
import sys

from pynnet.bin._cli import cli
from pynnet.bin._opts import float_opt, int_opt, kaldi_bool, parser
from pynnet.io.errors import PynnetError, fail


@cli
def prepare_lang_main(argv: list[str] | None = None) -> int:
    from pynnet.hmm.lang import prepare_lang

    p = parser("pynnet-prepare-lang",
               "Make a Kaldi lang dir from a dict dir (utils/prepare_lang.sh).")
    p.add_argument("--position-dependent-phones", type=kaldi_bool, default=True)
    p.add_argument("--num-sil-states", type=int_opt, default=5)
    p.add_argument("--num-nonsil-states", type=int_opt, default=3)
    p.add_argument("--sil-prob", type=float_opt, default=0.5)
    p.add_argument("--share-silence-phones", type=kaldi_bool, default=False,
                   help="all silence phones share one set of pdfs (they differ only in transitions)")
    p.add_argument("--phone-symbol-table", default="",
                   help="keep the phone ids of this phones.txt (e.g. the lang dir a model was trained with)")
    p.add_argument("dict_src_dir")
    p.add_argument("oov_dict_entry")
    p.add_argument("tmp_dir")
    p.add_argument("lang_dir")
    a = p.parse_args(argv)
    if not (0.0 <= a.sil_prob < 1.0):
        raise PynnetError(f"--sil-prob must be in [0, 1), got {a.sil_prob}")
    lang = prepare_lang(a.dict_src_dir, a.oov_dict_entry, a.tmp_dir, a.lang_dir,
                        position_dependent=a.position_dependent_phones, num_sil_states=a.num_sil_states,
                        num_nonsil_states=a.num_nonsil_states, sil_prob=a.sil_prob,
                        phone_symbol_table=a.phone_symbol_table or None,
                        share_silence_phones=a.share_silence_phones)
    print(f"prepare_lang: {a.lang_dir}: {len(lang.words) - 4} words, "
          f"{len(lang.silence_phones) + len(lang.nonsilence_phones)} phones, "
          f"{len(lang.disambig_phones)} disambiguation symbols", file=sys.stderr)
    return 0


@cli
def train_lm_main(argv: list[str] | None = None) -> int:
    from pynnet.hmm.lm import prune_lm, read_sentences, read_vocab, train_lm, UNK

    p = parser("pynnet-train-lm",
               "Train a back-off n-gram LM and write it as ARPA (gzipped if out ends in .gz). "
               "Default: interpolated modified Kneser-Ney trigram.")
    p.add_argument("--order", type=int_opt, default=3)
    p.add_argument("--discount", choices=["kn", "wb"], default="kn",
                   help="kn: interpolated modified Kneser-Ney; wb: interpolated Witten-Bell")
    p.add_argument("--vocab", default="", help="words.txt or a word list; other words become --unk")
    p.add_argument("--unk", default=UNK, help="the OOV word (use the lang's oov.txt word)")
    p.add_argument("--prune", type=float_opt, default=0.0,
                   help="relative-entropy pruning threshold (SRILM ngram -prune), e.g. 1e-7; 0: none")
    p.add_argument("--text-has-uttid", type=kaldi_bool, default=False,
                   help="true: the text is a Kaldi 'text' file (first field is the utterance id)")
    p.add_argument("text")
    p.add_argument("out_arpa")
    a = p.parse_args(argv)
    vocab = read_vocab(a.vocab) if a.vocab else None
    lm = train_lm(read_sentences(a.text, a.text_has_uttid), a.order, vocab, a.discount, a.unk, text_name=a.text)
    if a.prune > 0:
        lm = prune_lm(lm, a.prune)
    lm.write_arpa(a.out_arpa)
    print(f"pynnet-train-lm: wrote {a.out_arpa}: n-grams {lm.num_ngrams()}", file=sys.stderr)
    return 0


@cli
def lm_ppl_main(argv: list[str] | None = None) -> int:
    from pynnet.hmm.lm import BackoffLM, perplexity, read_sentences

    p = parser("pynnet-lm-ppl", "Perplexity of an ARPA LM on a text (SRILM ngram -unk -ppl output format).")
    p.add_argument("--text-has-uttid", type=kaldi_bool, default=False)
    p.add_argument("lm")
    p.add_argument("text")
    a = p.parse_args(argv)
    lm = BackoffLM.read_arpa(a.lm)
    st = perplexity(lm, read_sentences(a.text, a.text_has_uttid))
    print(st.srilm_lines(a.text))
    return 0


@cli
def make_unigram_grammar_main(argv: list[str] | None = None) -> int:
    from pynnet.hmm.graph import unigram_g

    p = parser("pynnet-make-unigram-grammar",
               "G.fst of a unigram LM over a data dir's transcripts, for denominator lattices "
               "(steps/nnet/make_denlats.sh; Kaldi's sym2int.pl --map-oov | make_unigram_grammar.pl | "
               "fstcompile | fstarcsort)",
               usage="%(prog)s [--oov-word <word>] <words.txt> <text> <G.fst>\n"
                     "  e.g. %(prog)s --oov-word '<unk>' data/lang/words.txt data/train/text exp/dnn_denlats/lang/G.fst")
    p.add_argument("--oov-word", default="", help="words not in words.txt count as this word "
                   "(default: the word of oov.txt next to words.txt)")
    p.add_argument("words_txt")
    p.add_argument("text", help="a Kaldi text file (utterance id, then the words)")
    p.add_argument("g_fst")
    a = p.parse_args(argv)
    nwords, nsent = unigram_g(a.text, a.words_txt, a.oov_word or None, a.g_fst)
    print(f"pynnet-make-unigram-grammar: {a.g_fst}: unigram over {nwords} words of {nsent} transcripts",
          file=sys.stderr)
    return 0


@cli
def format_lm_main(argv: list[str] | None = None) -> int:
    from pynnet.hmm.graph import format_lm

    p = parser("pynnet-format-lm",
               "Copy a lang dir and add G.fst made from an ARPA LM (utils/format_lm.sh).")
    p.add_argument("lang_dir")
    p.add_argument("arpa")
    p.add_argument("lexicon", help="the dict dir's lexicon.txt (words with empty pronunciations), or ''")
    p.add_argument("out_dir")
    a = p.parse_args(argv)
    format_lm(a.lang_dir, a.arpa, a.lexicon or None, a.out_dir)
    return 0


@cli
def mkgraph_main(argv: list[str] | None = None) -> int:
    p = parser("pynnet-mkgraph", "Build HCLG.fst (utils/mkgraph.sh).")
    p.add_argument("--self-loop-scale", type=float_opt, default=0.1)
    p.add_argument("--transition-scale", type=float_opt, default=1.0)
    p.add_argument("--remove-oov", type=kaldi_bool, default=False, help="remove the OOV word's arcs from G")
    p.add_argument("lang_test_dir")
    p.add_argument("model_dir", help="has final.mdl and tree")
    p.add_argument("graph_dir")
    a = p.parse_args(argv)
    import kaldi_hmm_gmm  # noqa: F401  (before kaldifst)
    from pynnet.hmm.graph import make_hclg
    from pynnet.hmm.model_io import read_transition_model
    from pynnet.hmm.tree_io import check_tree_matches_model, read_tree

    for f in ("final.mdl", "tree"):
        if not os.path.exists(os.path.join(a.model_dir, f)):
            fail(f"no {f}", a.model_dir)
    # Like utils/lang/check_phones_compatible.sh: a model trained on another phone set is useless.
    mp = os.path.join(a.model_dir, "phones.txt")
    if os.path.exists(mp):
        with open(mp, "rb") as f1, open(os.path.join(a.lang_test_dir, "phones.txt"), "rb") as f2:
            if f1.read() != f2.read():
                fail(f"phones.txt differs from {a.lang_test_dir}/phones.txt: the model was trained "
                     "with another lang dir", mp)
    tm = read_transition_model(os.path.join(a.model_dir, "final.mdl"))
    ctx = read_tree(os.path.join(a.model_dir, "tree"))
    check_tree_matches_model(ctx, tm, os.path.join(a.model_dir, "tree"), os.path.join(a.model_dir, "final.mdl"))
    info = make_hclg(a.lang_test_dir, ctx, tm, a.graph_dir, self_loop_scale=a.self_loop_scale,
                     transition_scale=a.transition_scale, remove_oov=a.remove_oov)
    print(f"mkgraph: {a.graph_dir}/HCLG.fst: {info.hclg_states} states, {info.hclg_arcs} arcs "
          f"in {info.seconds:.1f}s ({info.cpu_seconds:.1f}s CPU)", file=sys.stderr)
    return 0


@cli
def validate_dict_dir_main(argv: list[str] | None = None) -> int:
    from pynnet.bin._cli import prog_name
    from pynnet.hmm.lang import validate_dict_dir

    p = parser("pynnet-validate-dict-dir",
               "Check a dict dir (data/local/dict) as Kaldi's utils/validate_dict_dir.pl does: everything "
               "prepare_lang refuses, and besides carriage returns (DOS line ends), whitespace other than "
               "spaces and tabs, a last line without newline, phone names ending in _B/_E/_I/_S, a "
               "lexicon.txt beside lexiconp.txt that disagrees with it, phones on one line of "
               "nonsilence_phones.txt that no line of extra_questions.txt tells apart. Progress on stdout, "
               "then '--> SUCCESS [validating dictionary directory <dir>]'; the first error is one line "
               "on stderr (exit 1); nonsilence phones no word uses are a WARNING line. Not supported "
               "(an error, as prepare_lang refuses them): lexiconp_silprob.txt, silprob.txt, "
               "nonterminals.txt; files that are not UTF-8.")
    p.add_argument("dict_dir")
    a = p.parse_args(argv)
    d = a.dict_dir.rstrip("/") or "/"
    for w in validate_dict_dir(d, say=print):
        print(f"WARNING ({prog_name()}): {w}", file=sys.stderr)
    print(f"--> SUCCESS [validating dictionary directory {d}]")
    return 0


@cli
def validate_lang_main(argv: list[str] | None = None) -> int:
    from pynnet.bin._cli import prog_name
    from pynnet.hmm.lang import MAX_WORDS_THROUGH_L, validate_lang_dir

    p = parser("pynnet-validate-lang",
               "Check a lang dir (with G.fst if it has one) as Kaldi's utils/validate_lang.pl does: "
               "phones.txt and words.txt (unique symbols and ids, <eps> 0, <s> and </s> with a G.fst); "
               "phones/{silence,nonsilence,optional_silence,context_indep,disambig}.{txt,int,csl}, "
               "roots, sets, extra_questions, word_boundary, wdisambig* against phones.txt and each "
               "other; topo covering every phone once; oov.{txt,int}; L.fst and L_disambig.fst "
               "(readable, labels in the tables, olabel-sorted, #0 self-loops on L_disambig's final "
               f"states, the best path for up to {MAX_WORDS_THROUGH_L} words of words.txt spells them "
               "with the word boundaries of word_boundary.txt); G.fst (readable, labels in words.txt, "
               "ilabel-sorted, no <s>/</s> on arcs, disambiguation symbols only on back-off arcs with "
               "<eps> output, no cycle of disambiguation/<eps> arcs, determinizable alone and composed "
               "with L_disambig). Not checked: L through random paths (Kaldi's; we take the best "
               "path of one word sequence), determinizability beyond 2 x the states + 100000 "
               "(reported as an error), subword lang dirs (subword_separator.txt: refused) and "
               "grammar (#nonterm) symbols beyond letting them through. Progress on stdout, then "
               "'--> SUCCESS [validating lang directory <dir>]' (or Kaldi's '--> WARNING (check output "
               "above for warnings)' after WARNING lines on stderr), exit 0; the first error is one "
               "line on stderr, exit 1.")
    p.add_argument("--skip-determinization-check", action="store_true",
                   help="do not determinize G.fst and L_disambig.fst o G.fst (slow for big LMs)")
    p.add_argument("--skip-disambig-check", action="store_true",
                   help="do not check phones/disambig.{txt,int,csl} (lang dirs without disambiguation symbols)")
    p.add_argument("--skip-generate-words-check", action="store_true",
                   help="do not send a word sequence through L.fst and L_disambig.fst")
    p.add_argument("lang_dir")
    a = p.parse_args(argv)
    d = a.lang_dir.rstrip("/") or "/"
    warnings = validate_lang_dir(d, skip_determinization_check=a.skip_determinization_check,
                                 skip_disambig_check=a.skip_disambig_check,
                                 skip_generate_words_check=a.skip_generate_words_check, say=print)
    sys.stdout.flush()
    for w in warnings:
        print(f"WARNING ({prog_name()}): {w}", file=sys.stderr)
    print("--> WARNING (check output above for warnings)" if warnings
          else f"--> SUCCESS [validating lang directory {d}]")
    return 0
