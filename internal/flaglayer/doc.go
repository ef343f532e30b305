// Package flaglayer layers a command's flags over its config file.
//
// A Layer binds each flag to one field of the command's config type. Load
// fills the config in layers. A flag set on the command line wins over
// the file. The file wins over the environment, and that over the type's
// defaults. A flag that is not set never touches the config. So the
// default a flag shows must be the api's; each command's test checks it.
//
// Errors name what is at fault: the file and its field, or the flag of
// the field (Named). The command decides the exit code: an InvalidError
// is a problem with the command line.
package flaglayer
