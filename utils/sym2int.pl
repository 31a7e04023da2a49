#!/usr/bin/env perl
# Map symbols to integer ids with a symbol table (words.txt, phones.txt), as Kaldi's sym2int.pl.
#   utils/sym2int.pl [--map-oov <oov-symbol>] [-f <field-range>] <symtab> [<input>...]
#   -f 2-          map fields 2 to the end (1-based; ranges like 3, 2-4, 2-, -3)
#   --map-oov SYM  map symbols not in the table to SYM's id (else they are an error)
use strict; use warnings;
my $range = "1-"; my $oov;
while (@ARGV && $ARGV[0] =~ /^-/) {
  my $o = shift @ARGV;
  if ($o eq "-f") { $range = shift @ARGV // die "$0: -f needs a field range\n"; }
  elsif ($o =~ /^-f(.+)$/) { $range = $1; }
  elsif ($o eq "--map-oov") { $oov = shift @ARGV // die "$0: --map-oov needs a symbol\n"; }
  elsif ($o eq "--") { last; }
  else { die "$0: unknown option $o\nUsage: $0 [--map-oov oov] [-f field-range] symtab [input]\n"; }
}
@ARGV >= 1 or die "Usage: $0 [--map-oov oov] [-f field-range] symtab [input]\n";
my ($lo, $hi);
if ($range =~ /^(\d+)$/) { ($lo, $hi) = ($1, $1); }
elsif ($range =~ /^(\d*)-(\d*)$/) { $lo = $1 eq "" ? 1 : $1; $hi = $2 eq "" ? 1e9 : $2; }
else { die "$0: bad field range '$range'\n"; }
my $symtab = shift @ARGV;
open(my $S, "<", $symtab) or die "$0: cannot open symbol table $symtab\n";
my %id;
while (<$S>) {
  my @f = split;
  next unless @f;
  @f == 2 or die "$0: $symtab:$.: expected 'symbol id', got: $_";
  $id{$f[0]} = $f[1];
}
close $S;
my $oov_id;
if (defined $oov) {
  defined $id{$oov} or die "$0: OOV symbol '$oov' is not in $symtab\n";
  $oov_id = $id{$oov};
}
my $num_oov = 0;
while (<>) {
  my @f = split;
  for (my $i = 0; $i < @f; $i++) {
    my $n = $i + 1;
    next if $n < $lo || $n > $hi;
    if (defined $id{$f[$i]}) { $f[$i] = $id{$f[$i]}; }
    elsif (defined $oov_id) { $f[$i] = $oov_id; $num_oov++; }
    else { die "$0: $ARGV:$.: symbol '$f[$i]' is not in $symtab\n"; }
  }
  print join(" ", @f), "\n";
}
print STDERR "$0: replaced $num_oov OOV instances with '$oov'\n" if $num_oov > 0;
