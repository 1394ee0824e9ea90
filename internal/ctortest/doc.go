// Package ctortest checks components' constructors in their unit tests.
// Every component under internal/ is built by New(Config) (*T, error), which
// fails naming a required field that is missing and defaults the others
// (the clock first of all); Run takes a table of configurations and what
// each must give. Only tests import it.
package ctortest
