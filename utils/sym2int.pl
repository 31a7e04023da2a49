#!/usr/bin/env perl
# Map symbols to integer ids with a symbol table (words.txt, phones.txt), as Kaldi's sym2int.pl.
#   utils/sym2int.pl [--map-oov <oov-symbol>] [-f <field-range>] <symtab> [<input>...]
#   -f 2-          map fields 2 to the end (1-based; ranges like 3, 2-4, 2-, -3)
#   --map-oov SYM  map symbols not in the table to SYM's id, or to SYM itself if it is a number
#                  (else they are an error)
use strict; use warnings;
use FindBin; use lib "$FindBin::RealBin/lib";
use SymTab qw(parse_command_line read_symtab map_fields);

my $oov;
my ($lo, $hi) = parse_command_line("[--map-oov oov] [-f field-range] symtab [input]",
                                   "--map-oov" => [\$oov, "a symbol"]);
my $symtab = shift @ARGV;
my $id = read_symtab($symtab, 0);
my $oov_id;
if (defined $oov) {
  if ($oov =~ /^[0-9]+$/) {   # an id, as Kaldi's steps pass it: --map-oov $(cat $lang/oov.int)
    $oov_id = $oov;
  } else {
    defined $id->{$oov} or die "$0: OOV symbol '$oov' is not in $symtab\n";
    $oov_id = $id->{$oov};
  }
}
my $num_oov = 0;
map_fields($lo, $hi, sub {
  my $sym = shift;
  return $id->{$sym} if defined $id->{$sym};
  die "$0: $ARGV:$.: symbol '$sym' is not in $symtab\n" unless defined $oov_id;
  $num_oov++;
  return $oov_id;
});
print STDERR "$0: replaced $num_oov OOV instances with '$oov'\n" if $num_oov > 0;
