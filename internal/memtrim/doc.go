// Package memtrim owns one thing: giving back, once start-up is over, the
// pages of nodelet's own binary that only start-up used.
//
// Most of nodelet's resident memory is its binary's code and read-only
// data, mapped from the file: the package initialisers, flag and
// configuration parsing, the first list of every informer and the
// registration run once, and the kernel maps neighbouring pages of the
// page cache with each fault. Once the node is registered and every pod
// source was seen, Trimmer asks the kernel to reclaim those file pages
// (madvise MADV_PAGEOUT on the binary's read-only private mappings); the
// ones the running agent uses are faulted back from the file as it runs.
// Nothing writable is touched, so no state is lost: the pages are clean
// copies of the file. On a kernel without MADV_PAGEOUT (before 5.4) it
// logs why and does nothing.
package memtrim
