// Package events owns the recent events of the node's pods, kept in memory
// (the last PerPod of each pod, for at most MaxPods pods, the least recently
// touched forgotten first) so that `nodelet describe` can show them, in
// standalone mode and while the API server is away as well.
package events
