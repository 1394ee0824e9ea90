// Package imagegc owns the garbage collection of container images, as the
// upstream kubelet's image manager: every period (5 minutes) it removes the
// unused images not used for imageMaximumGCAge and, when the image
// filesystem is used above imageGCHighThresholdPercent, the least recently
// used unused images until it is back at imageGCLowThresholdPercent; never
// an image a container (running or not) uses, a pinned image or the
// runtime's sandbox image, nor one first seen less than imageMinimumGCAge
// ago. The eviction manager asks it to free every unused image under disk
// pressure (Reclaim).
//
// Unlike upstream, when each image was first seen and last used is kept in
// a file under the root directory, so a restart neither forgets what was
// recently used nor restarts the minimum age of every image.
//
// Which images go, and how much to free, are pure functions (policy.go).
package imagegc
