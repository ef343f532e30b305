// Package completion writes dnsconfigurer's bash, zsh and fish completion
// scripts from its subcommands and their flags.
//
// The scripts name subcommands, flags and fixed words; files are left to
// the shell. A Command is read from a flag set, so a script offers the
// flags the subcommand really defines.
package completion
