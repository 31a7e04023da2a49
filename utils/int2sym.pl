#!/usr/bin/env perl
# Map integer ids to symbols with a symbol table (words.txt, phones.txt), as Kaldi's int2sym.pl.
#   utils/int2sym.pl [-f <field-range>] <symtab> [<input>...]
#   -f 2-   map fields 2 to the end (fields are 1-based; ranges like 3, 2-4, 2-, -3)
# An id missing from the table is an error naming the input line.
use strict; use warnings;
my $range = "1-";
while (@ARGV && $ARGV[0] =~ /^-/) {
  my $o = shift @ARGV;
  if ($o eq "-f") { $range = shift @ARGV // die "$0: -f needs a field range\n"; }
  elsif ($o =~ /^-f(.+)$/) { $range = $1; }
  elsif ($o eq "--") { last; }
  else { die "$0: unknown option $o\nUsage: $0 [-f field-range] symtab [input]\n"; }
}
@ARGV >= 1 or die "Usage: $0 [-f field-range] symtab [input]\n";
my ($lo, $hi);
if ($range =~ /^(\d+)$/) { ($lo, $hi) = ($1, $1); }
elsif ($range =~ /^(\d*)-(\d*)$/) { $lo = $1 eq "" ? 1 : $1; $hi = $2 eq "" ? 1e9 : $2; }
else { die "$0: bad field range '$range'\n"; }
my $symtab = shift @ARGV;
open(my $S, "<", $symtab) or die "$0: cannot open symbol table $symtab\n";
my %sym;
while (<$S>) {
  my @f = split;
  next unless @f;
  @f == 2 or die "$0: $symtab:$.: expected 'symbol id', got: $_";
  $sym{$f[1]} = $f[0];
}
close $S;
while (<>) {
  my @f = split;
  for (my $i = 0; $i < @f; $i++) {
    my $n = $i + 1;
    next if $n < $lo || $n > $hi;
    defined $sym{$f[$i]} or die "$0: $ARGV:$.: no symbol for id '$f[$i]' in $symtab\n";
    $f[$i] = $sym{$f[$i]};
  }
  print join(" ", @f), "\n";
}
