// Package logflags is the logging of every long-running command: the
// --log-format and --log-level flags and the one slog logger they make.
//
// Every logger derives from New or NewLeveled, so each line keeps the
// same rules: each key once at the top level, components named outer
// first ("dnsserver.hostresolv"), durations as Go duration strings. Start
// writes the first line of a command whatever the level.
//
// Errors name the flag at fault; the command decides the exit code.
package logflags
