package kuberuntime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestSelectDead(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	dc := func(id, uid, name string, age time.Duration) deadContainer {
		return deadContainer{id: id, podUID: uid, name: name, created: now.Add(-age)}
	}
	dead := []deadContainer{
		dc("a1", "a", "c", 3*time.Minute), dc("a2", "a", "c", 2*time.Minute), dc("a3", "a", "c", time.Minute),
		dc("a-init", "a", "init", 10*time.Minute),
		dc("gone1", "gone", "c", time.Minute), dc("gone2", "gone", "c", 2*time.Minute),
		dc("b1", "b", "c", 5*time.Second),
	}
	removable := func(uid string) bool { return uid == "gone" }
	for _, tc := range []struct {
		name    string
		p       GCPolicy
		running map[string]bool
		want    string
	}{
		{"default: one per container, all of a removed pod's", DefaultGCPolicy, nil, "a1,a2,gone1,gone2"},
		{"minimum age", GCPolicy{MinAge: 90 * time.Second, MaxPerPodContainer: 1, MaxContainers: -1}, nil, "a1,gone2"},
		{"no limit", GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1}, nil, "gone1,gone2"},
		{"node limit: the oldest go, one each kept", GCPolicy{MaxPerPodContainer: -1, MaxContainers: 2}, nil, "a-init,a1,a2,gone1,gone2"},
		{"reclaim: all, one each of running pods", GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1, KeepOneOfRunningPods: true},
			map[string]bool{"a": true}, "a1,a2,b1,gone1,gone2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range selectDead(dead, tc.p, now, removable, tc.running) {
				got = append(got, c.id)
			}
			sort.Strings(got)
			if s := strings.Join(got, ","); s != tc.want {
				t.Errorf("removed %s, want %s", s, tc.want)
			}
		})
	}
}

type removablePods map[string]bool

func (r removablePods) Removable(uid string) bool { return r[uid] }

// A collection against the CRI: dead containers beyond one per container
// go with their logs, a running one and a just-created one stay; a removed
// pod's sandbox goes, a live pod keeps its newest.
func TestGarbageCollect(t *testing.T) {
	m, rt, clk := newTestManager(t)
	now := clk.Now()
	logs := t.TempDir()
	ctr := func(id, uid, sandbox, name string, state runtimeapi.ContainerState, age time.Duration) *critest.FakeContainer {
		log := filepath.Join(logs, id+".log")
		if err := os.WriteFile(log, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return &critest.FakeContainer{SandboxID: sandbox, ContainerStatus: runtimeapi.ContainerStatus{
			Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name}, State: state, CreatedAt: now.Add(-age).UnixNano(),
			Labels: map[string]string{PodUIDLabel: uid, ContainerNameLabel: name}, LogPath: log,
		}}
	}
	sb := func(id, uid string, state runtimeapi.PodSandboxState, age time.Duration) *critest.FakePodSandbox {
		return &critest.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
			Id: id, Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid}, State: state, CreatedAt: now.Add(-age).UnixNano(),
		}}
	}
	exited, running, created := runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_CREATED
	rt.SetFakeSandboxes([]*critest.FakePodSandbox{
		sb("live-old", "live", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, time.Hour),
		sb("live-new", "live", runtimeapi.PodSandboxState_SANDBOX_READY, time.Minute),
		sb("done", "done", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, time.Hour),
		sb("gone", "gone", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, time.Hour),
	})
	rt.SetFakeContainers([]*critest.FakeContainer{
		ctr("run", "live", "live-new", "c", running, time.Minute),
		ctr("dead1", "live", "live-new", "c", exited, 2*time.Minute),
		ctr("dead2", "live", "live-new", "c", exited, 3*time.Minute),
		ctr("new", "live", "live-new", "d", created, time.Second),
		ctr("done1", "done", "done", "c", exited, time.Hour),
		ctr("gone1", "gone", "gone", "c", exited, time.Hour),
	})
	if err := m.GarbageCollect(context.Background(), DefaultGCPolicy, removablePods{"gone": true}, true); err != nil {
		t.Fatal(err)
	}
	var left []string
	for id := range rt.Containers {
		left = append(left, id)
	}
	sort.Strings(left)
	if s := strings.Join(left, ","); s != "dead1,done1,new,run" {
		t.Errorf("containers left %s", s)
	}
	for _, id := range []string{"dead2", "gone1"} {
		if _, err := os.Stat(filepath.Join(logs, id+".log")); !os.IsNotExist(err) {
			t.Errorf("the log of %s stayed: %v", id, err)
		}
	}
	var sandboxes []string
	for id := range rt.Sandboxes {
		sandboxes = append(sandboxes, id)
	}
	sort.Strings(sandboxes)
	if s := strings.Join(sandboxes, ","); s != "done,live-new" {
		t.Errorf("sandboxes left %s", s)
	}
	// Without every source seen, a pod is never taken for removed.
	rt.SetFakeContainers([]*critest.FakeContainer{ctr("gone2", "gone", "gone", "c", exited, time.Hour)})
	if err := m.GarbageCollect(context.Background(), GCPolicy{MaxPerPodContainer: 1, MaxContainers: -1}, removablePods{"gone": true}, false); err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.Containers["gone2"]; !ok {
		t.Error("a pod's container removed before every source was seen")
	}
	// The reclaim: the completed pod's last container goes too.
	rt.SetFakeContainers([]*critest.FakeContainer{ctr("done2", "done", "done", "c", exited, time.Hour), ctr("dead3", "live", "live-new", "c", exited, time.Minute)})
	if err := m.DeleteAllUnusedContainers(context.Background(), removablePods{}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for id := range rt.Containers {
		ids = append(ids, id)
	}
	if !slices.Equal(ids, []string{"dead3"}) {
		t.Errorf("after the reclaim: %v", ids)
	}
}
