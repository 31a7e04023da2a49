# Shared by utils/int2sym.pl and utils/sym2int.pl: their command line (-f <field-range>, --,
# per-script options), symbol tables (words.txt, phones.txt) and the field-mapping loop.
package SymTab;
use strict; use warnings;
use Exporter 'import';
our @EXPORT_OK = qw(parse_command_line read_symtab map_fields);

# parse_command_line($usage, %options): takes the options off @ARGV: -f RANGE (or -fRANGE; fields
# are 1-based, ranges like 3, 2-4, 2-, -3; default all), "--", and each of %options
# (name => [\$var, "what it needs"]) with its value.  Returns the field range as ($lo, $hi);
# leaves <symtab> [<input>...] in @ARGV.
sub parse_command_line {
  my ($usage, %options) = @_;
  my $range = "1-";
  while (@ARGV && $ARGV[0] =~ /^-/) {
    my $o = shift @ARGV;
    if ($o eq "-f") { $range = shift @ARGV // die "$0: -f needs a field range\n"; }
    elsif ($o =~ /^-f(.+)$/) { $range = $1; }
    elsif (exists $options{$o}) { ${$options{$o}[0]} = shift @ARGV // die "$0: $o needs $options{$o}[1]\n"; }
    elsif ($o eq "--") { last; }
    else { die "$0: unknown option $o\nUsage: $0 $usage\n"; }
  }
  @ARGV >= 1 or die "Usage: $0 $usage\n";
  return ($1, $1) if $range =~ /^(\d+)$/;
  return ($1 eq "" ? 1 : $1, $2 eq "" ? 1e9 : $2) if $range =~ /^(\d*)-(\d*)$/;
  die "$0: bad field range '$range'\n";
}

# read_symtab($path, $by_id): the 'symbol id' lines of $path as a hash ref, symbol => id, or
# id => symbol when $by_id.
sub read_symtab {
  my ($path, $by_id) = @_;
  open(my $S, "<", $path) or die "$0: cannot open symbol table $path\n";
  my %map;
  while (<$S>) {
    my @f = split;
    next unless @f;
    @f == 2 or die "$0: $path:$.: expected 'symbol id', got: $_";
    if ($by_id) { $map{$f[1]} = $f[0]; } else { $map{$f[0]} = $f[1]; }
  }
  close $S;
  return \%map;
}

# map_fields($lo, $hi, $map): each line of the input files (or stdin) with fields $lo..$hi
# replaced by $map->($field), which dies naming "$ARGV:$." for a field it cannot map.
sub map_fields {
  my ($lo, $hi, $map) = @_;
  while (<main::ARGV>) {
    my @f = split;
    for (my $i = 0; $i < @f; $i++) {
      my $n = $i + 1;
      next if $n < $lo || $n > $hi;
      $f[$i] = $map->($f[$i]);
    }
    print join(" ", @f), "\n";
  }
}

1;
