#!/usr/bin/env python3
# Kaldi's utils/make_unigram_grammar.pl in Python (named .pl so that Kaldi recipes keep working):
#   utils/make_unigram_grammar.pl < text-transcripts > G.txt
# Reads sentences (words, usually integer ids from sym2int.pl) and prints a one-state unigram G in
# OpenFst text form: a self-loop per word, cost -ln(count/total), final cost -ln(sentences/total),
# the end of each sentence counted in the total (pynnet.hmm.graph.unigram_grammar_text).
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))

USAGE = "Usage: make_unigram_grammar.pl < text-transcripts > G.txt\n"


def main(argv):
    if argv:
        sys.stderr.write(USAGE)
        return 0 if argv[0] in ("-h", "--help") else 1
    from pynnet.hmm.lm import unigram_grammar_text
    sentences = [line.split() for line in sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\n")]
    if sentences and sentences[-1] == []:
        sentences.pop()   # (the newline that ends the last line does not start another)
    if not sentences:
        sys.stderr.write("make_unigram_grammar.pl: no sentences on the standard input\n")
        return 1
    sys.stdout.buffer.write(unigram_grammar_text(sentences).encode("utf-8", "surrogateescape"))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
