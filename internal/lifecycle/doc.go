// Package lifecycle owns how nodelet's loops run beside the main loop: a
// Loop is a name, a Run(ctx) error and whether its failure is fatal; a
// Group starts loops (in the order they are given, as each becomes
// possible), reports every failure the same way, runs a non-fatal loop that
// failed again after a back-off, tells the main loop of the first fatal
// error (Done, Err), and stops the loops in reverse order, each waited for,
// on shutdown (Stop).
//
// A loop that another waits for offers a ready channel (closed once it is
// usable, as virtual-kubelet's Ready()): the consumer waits on the channel
// inside its own Run, never polls.
package lifecycle
