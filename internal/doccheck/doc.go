// Package doccheck holds the tests that keep morph's documentation honest
// where a new user meets it first: every Go block of the READMEs is a whole
// file that compiles as shown; the Go minimum they state is go.mod's go line;
// the main module pins its nested abi module to a commit of the repository;
// and a module outside the repository gets morph with the one `go get` the
// README gives, then builds and runs the README's first program.
//
// It has no code of its own: the tests are the point.
package doccheck
