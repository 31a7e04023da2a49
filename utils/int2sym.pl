#!/usr/bin/env perl
# Map integer ids to symbols with a symbol table (words.txt, phones.txt), as Kaldi's int2sym.pl.
#   utils/int2sym.pl [-f <field-range>] <symtab> [<input>...]
#   -f 2-   map fields 2 to the end (fields are 1-based; ranges like 3, 2-4, 2-, -3)
# An id missing from the table is an error naming the input line.
use strict; use warnings;
use FindBin; use lib "$FindBin::RealBin/lib";
use SymTab qw(parse_command_line read_symtab map_fields);

my ($lo, $hi) = parse_command_line("[-f field-range] symtab [input]");
my $symtab = shift @ARGV;
my $sym = read_symtab($symtab, 1);
map_fields($lo, $hi, sub {
  my $id = shift;
  defined $sym->{$id} or die "$0: $ARGV:$.: no symbol for id '$id' in $symtab\n";
  return $sym->{$id};
});
