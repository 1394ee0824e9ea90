package main

import (
	"os"
	"testing"
)

// procTimes reads this process's own /proc/PID/stat: its parent, and CPU
// time that grows as it works.
func TestProcTimes(t *testing.T) {
	before, err := procTimes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.ppid != os.Getppid() {
		t.Fatalf("ppid %d, want %d", before.ppid, os.Getppid())
	}
	x := 0
	for i := 0; i < 300_000_000; i++ {
		x += i ^ (x >> 3)
	}
	after, _ := procTimes(os.Getpid())
	if after.user+after.system <= before.user+before.system {
		t.Fatalf("CPU %v -> %v after busy work (%d)", before.user+before.system, after.user+after.system, x)
	}
}
