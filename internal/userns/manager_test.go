package userns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/nodelet/nodelet/internal/ctortest"
)

const (
	testUserNsLength = uint32(65536)
	// skip the first block
	minimumMappingUID = testUserNsLength
	// enough space for 2000 user namespaces
	mappingLen  = testUserNsLength * 2000
	testMaxPods = 110
)

// fixedMappings is a Config.KubeletMappings returning [first, first+n).
func fixedMappings(first, n uint32) func(context.Context, uint32) (uint32, uint32, error) {
	return func(context.Context, uint32) (uint32, uint32, error) { return first, n, nil }
}

// supports is a Config.HandlerSupportsUserNamespaces: the handler "error"
// is unknown, the others support user namespaces as userns says.
func supports(userns bool) func(string) (bool, error) {
	return func(h string) (bool, error) {
		if h == "error" {
			return false, errors.New("unknown runtime")
		}
		return userns, nil
	}
}

// testConfig is the configuration of upstream's testUserNsPodsManager.
func testConfig(podsDir string) Config {
	return Config{
		PodsDir:                       podsDir,
		MaxPods:                       testMaxPods,
		KubeletMappings:               fixedMappings(minimumMappingUID, mappingLen),
		HandlerSupportsUserNamespaces: supports(true),
	}
}

func newTestManager(t *testing.T, cfg Config) (*Manager, context.Context) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	m, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, ctx
}

func hostUsers(v bool) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "pod-uid"}, Spec: v1.PodSpec{HostUsers: &v}}
}

func ptr[T any](v T) *T { return &v }

func TestNew(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	newFn := func(cfg Config) (*Manager, error) { return New(ctx, cfg) }
	dir := t.TempDir()
	base := testConfig(dir)
	with := func(f func(*Config)) Config { c := base; f(&c); return c }
	ctortest.Run(t, newFn, []ctortest.Case[Config]{
		{Name: "no pods dir", Config: with(func(c *Config) { c.PodsDir = "" }), WantErr: "Config.PodsDir is required"},
		{Name: "no handler check", Config: with(func(c *Config) { c.HandlerSupportsUserNamespaces = nil }), WantErr: "Config.HandlerSupportsUserNamespaces is required"},
		{Name: "negative max pods", Config: with(func(c *Config) { c.MaxPods = -1 }), WantErr: "Config.MaxPods -1 must not be negative"},
		{Name: "idsPerPod too small", Config: with(func(c *Config) { c.IDsPerPod = ptr[int64](0) }),
			WantErr: "invalid configuration: userNamespaces.idsPerPod must not be less than 65536"},
		{Name: "idsPerPod not a multiple", Config: with(func(c *Config) { c.IDsPerPod = ptr[int64](65536 + 1) }),
			WantErr: "invalid configuration: userNamespaces.idsPerPod must be a multiple of 65536"},
		{Name: "idsPerPod too large", Config: with(func(c *Config) { c.IDsPerPod = ptr[int64](1 << 32) }),
			WantErr: "invalid configuration: userNamespaces.idsPerPod must not be more than 4294967295"},
		{Name: "mappings fail", Config: with(func(c *Config) {
			c.KubeletMappings = func(context.Context, uint32) (uint32, uint32, error) { return 0, 0, errors.New("boom") }
		}), WantErr: "kubelet mappings: boom"},
		{Name: "firstID not multiple", Config: with(func(c *Config) { c.KubeletMappings = fixedMappings(65536+1, mappingLen) }),
			WantErr: "kubelet user assigned ID 65537 is not a multiple of 65536"},
		{Name: "pods dir missing", Config: with(func(c *Config) { c.PodsDir = filepath.Join(dir, "missing") })},
		{Name: "defaults", Config: base},
	}, func(t *testing.T, m *Manager) {
		if m.userNsLength != DefaultIDsPerPod || m.off != 1 || m.len != 2000 {
			t.Errorf("length %d, blocks [%d,+%d), want %d, [1,+2000)", m.userNsLength, m.off, m.len, DefaultIDsPerPod)
		}
	})
}

func TestNewIDsPerPodGivenToMappings(t *testing.T) {
	var got uint32
	cfg := testConfig(t.TempDir())
	cfg.IDsPerPod = ptr[int64](1048576)
	cfg.KubeletMappings = func(_ context.Context, idsPerPod uint32) (uint32, uint32, error) {
		got = idsPerPod
		first, n := DefaultMappings(idsPerPod)
		return first, n, nil
	}
	m, _ := newTestManager(t, cfg)
	if got != 1048576 || m.userNsLength != 1048576 || m.off != 1 || m.len != 4095 {
		t.Errorf("mappings asked for %d; length %d, blocks [%d,+%d); want 1048576, [1,+4095)", got, m.userNsLength, m.off, m.len)
	}
}

// TestBlocks is upstream's TestMakeUserNsManager, with the exact errors.
func TestBlocks(t *testing.T) {
	cases := []struct {
		name           string
		first, length  uint32
		userNsLength   uint32
		maxPods        int
		wantOff, wantN int
		wantErr        string
	}{
		{name: "default", first: minimumMappingUID, length: mappingLen, userNsLength: 65536, maxPods: testMaxPods, wantOff: 1, wantN: 2000},
		{name: "upstream default range", first: 65536, length: 1<<32 - 65536, userNsLength: 65536, maxPods: testMaxPods, wantOff: 1, wantN: 65535},
		{name: "length not a multiple of the unit", first: 65536, length: 65536, userNsLength: 65537, wantErr: "kubelet user namespace length 65537 is not a multiple of 65536"},
		{name: "firstID not multiple", first: 65536 + 1, length: mappingLen, userNsLength: 65536, wantErr: "kubelet user assigned ID 65537 is not a multiple of 65536"},
		{name: "firstID is less than 65535", first: 1, length: mappingLen, userNsLength: 65536, wantErr: "kubelet user assigned ID 1 is not a multiple of 65536"},
		{name: "firstID is 0", first: 0, length: mappingLen, userNsLength: 65536, wantErr: "kubelet user assigned ID 0 must be greater or equal to 65536"},
		{name: "mappingLen not multiple", first: 65536, length: 65536 + 1, userNsLength: 65536, wantErr: "kubelet user assigned IDs length 65537 is not a multiple of 65536"},
		{name: "range can't fit maxPods", first: 65536, length: 65536, userNsLength: 65536, maxPods: 2, wantErr: "kubelet user assigned IDs are not enough to support 2 pods"},
		{name: "exactly maxPods", first: 65536, length: 65536, userNsLength: 65536, maxPods: 1, wantOff: 1, wantN: 1},
		{name: "default range not a multiple of idsPerPod", first: 196608, length: 1<<32 - 196608, userNsLength: 196608,
			wantErr: "kubelet user assigned IDs length 4294770688 is not a multiple of 196608"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			off, n, err := blocks(tc.first, tc.length, tc.userNsLength, tc.maxPods)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if off != tc.wantOff || n != tc.wantN {
				t.Errorf("blocks [%d,+%d), want [%d,+%d)", off, n, tc.wantOff, tc.wantN)
			}
		})
	}
}

func TestUserNsManagerAllocate(t *testing.T) {
	customUserNsLength := uint32(1048576)
	cases := []struct {
		name           string
		userNsLength   uint32
		mappingFirstID uint32
		mappingLen     uint32
	}{
		{name: "default", userNsLength: testUserNsLength, mappingFirstID: minimumMappingUID, mappingLen: mappingLen},
		{name: "custom", userNsLength: customUserNsLength, mappingFirstID: customUserNsLength, mappingLen: customUserNsLength * 2000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.IDsPerPod = ptr(int64(tc.userNsLength))
			cfg.KubeletMappings = fixedMappings(tc.mappingFirstID, tc.mappingLen)
			m, ctx := newTestManager(t, cfg)
			logger := ktesting.NewLogger(t, ktesting.NewConfig())

			allocated, length, err := m.allocateOne(logger, "one")
			if err != nil {
				t.Fatal(err)
			}
			if length != tc.userNsLength || !m.isSet(allocated) {
				t.Fatalf("allocated %d length %d set %v", allocated, length, m.isSet(allocated))
			}
			allocated2, length2, err := m.allocateOne(logger, "two")
			if err != nil {
				t.Fatal(err)
			}
			if allocated == allocated2 || length != length2 {
				t.Fatalf("second allocation %d+%d, first %d+%d", allocated2, length2, allocated, length)
			}

			// Re-recording the same pod with the same range works...
			if err := m.record(logger, "two", allocated2, length2); err != nil {
				t.Fatal(err)
			}
			// ...but not with anything different.
			if err := m.record(logger, "two", allocated2+1, length2); err == nil {
				t.Fatal("recording a different range worked")
			}

			m.Release(ctx, "one")
			m.Release(ctx, "two")
			if m.isSet(allocated) || m.isSet(allocated2) {
				t.Fatal("released ranges still set")
			}

			var allocs []uint32
			for i := 0; i < 1000; i++ {
				allocated, length, err = m.allocateOne(logger, types.UID(fmt.Sprintf("%d", i)))
				if err != nil {
					t.Fatal(err)
				}
				if length != tc.userNsLength {
					t.Fatalf("iteration %d: length %d", i, length)
				}
				if allocated < tc.mappingFirstID || allocated > tc.mappingFirstID+tc.mappingLen-tc.userNsLength {
					t.Fatalf("iteration %d: %d out of the range", i, allocated)
				}
				allocs = append(allocs, allocated)
			}
			if m.used.used() != 1000 {
				t.Fatalf("%d blocks used, want 1000", m.used.used())
			}
			for i, v := range allocs {
				uid := types.UID(fmt.Sprintf("%d", i))
				if !m.isSet(v) {
					t.Fatalf("%d not set", v)
				}
				m.Release(ctx, uid)
				if m.isSet(v) {
					t.Fatalf("%d set after release", v)
				}
				if err := m.record(logger, uid, v, tc.userNsLength); err != nil {
					t.Fatal(err)
				}
				m.Release(ctx, uid)
				if m.isSet(v) {
					t.Fatalf("%d set after the second release", v)
				}
			}
		})
	}
}

func TestAllocateExhausted(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.KubeletMappings = fixedMappings(65536, 2*65536)
	cfg.MaxPods = 2
	m, ctx := newTestManager(t, cfg)
	for _, uid := range []types.UID{"a", "b"} {
		p := hostUsers(false)
		p.UID = uid
		if _, err := m.GetOrCreateUserNamespaceMappings(ctx, p, ""); err != nil {
			t.Fatal(err)
		}
	}
	p := hostUsers(false)
	p.UID = "c"
	_, err := m.GetOrCreateUserNamespaceMappings(ctx, p, "")
	want := "create user namespace: could not find an empty slot to allocate a user namespace"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	m.Release(ctx, "a")
	if _, err := m.GetOrCreateUserNamespaceMappings(ctx, p, ""); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

func TestUserNsManagerParseUserNsFile(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		wantErr string
	}{
		{name: "basic", file: `{"uidMappings":[ { "hostId":131072, "containerId":0, "length":65536 } ],
			"gidMappings":[ { "hostId":131072, "containerId":0, "length":65536 } ]}`},
		{name: "invalid length", file: `{"uidMappings":[ { "hostId":131072, "containerId":0, "length":0 } ],
			"gidMappings":[ { "hostId":131072, "containerId":0, "length":0 } ]}`,
			wantErr: "wrong user namespace length 0"},
		{name: "wrong offset", file: `{"uidMappings":[ {"hostId":131072, "containerId":0, "length":65536 } ],
			"gidMappings":[ {"hostId":1, "containerId":0, "length":65536 } ]}`,
			wantErr: "invalid user namespace configuration: GID and UID mapping should be identical"},
		{name: "two GID mappings", file: `{"uidMappings":[ { "hostId":131072, "containerId":0, "length":userNsLength } ],
			"gidMappings":[ { "hostId":131072, "containerId":0, "length":userNsLength }, { "hostId":196608, "containerId":0, "length":65536 } ]}`,
			wantErr: "invalid user namespace mappings file: "},
		{name: "two GID mappings, valid JSON", file: `{"uidMappings":[ { "hostId":131072, "containerId":0, "length":65536 } ],
			"gidMappings":[ { "hostId":131072, "containerId":0, "length":65536 }, { "hostId":196608, "containerId":0, "length":65536 } ]}`,
			wantErr: "invalid user namespace configuration: GID and UID mappings should be identical."},
		{name: "two UID mappings", file: `{"uidMappings":[ { "hostId":131072, "containerId":0, "length":65536 }, { "hostId":196608, "containerId":0, "length":65536 } ],
			"gidMappings":[ { "hostId":131072, "containerId":0, "length":65536 } ]}`,
			wantErr: "invalid user namespace configuration: no more than one mapping allowed."},
		{name: "no root UID", file: `{"uidMappings":[ { "hostId":131072, "containerId":1, "length":65536 } ],
			"gidMappings":[ { "hostId":131072, "containerId":0, "length":65536 } ]}`,
			wantErr: "invalid user namespace configuration: GID and UID mapping should be identical"},
		{name: "no root UID nor GID", file: `{"uidMappings":[ { "hostId":131072, "containerId":1, "length":65536 } ],
			"gidMappings":[ { "hostId":131072, "containerId":1, "length":65536 } ]}`,
			wantErr: "invalid user namespace configuration: UID 0 must be mapped"},
		{name: "offset not a block", file: `{"uidMappings":[ { "hostId":131073, "containerId":0, "length":65536 } ],
			"gidMappings":[ { "hostId":131073, "containerId":0, "length":65536 } ]}`,
			wantErr: "wrong user namespace offset specified 131073"},
		{name: "out of range", file: `{"uidMappings":[ { "hostId":0, "containerId":0, "length":65536 } ],
			"gidMappings":[ { "hostId":0, "containerId":0, "length":65536 } ]}`,
			wantErr: "id 0 is out of range"},
	}

	m, _ := newTestManager(t, testConfig(t.TempDir()))
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.parseUserNsFileAndRecord(logger, types.UID(tc.name), []byte(tc.file))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestRecordTaken(t *testing.T) {
	m, _ := newTestManager(t, testConfig(t.TempDir()))
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	if err := m.record(logger, "a", 131072, 65536); err != nil {
		t.Fatal(err)
	}
	err := m.record(logger, "b", 131072, 65536)
	if err == nil || err.Error() != `range picked for pod "b" already taken` {
		t.Fatalf("error %v", err)
	}
	err = m.record(logger, "a", 196608, 65536)
	if err == nil || err.Error() != `different user namespace range already used by pod "a"` {
		t.Fatalf("error %v", err)
	}
}

func TestGetOrCreateUserNamespaceMappings(t *testing.T) {
	cases := []struct {
		name           string
		pod            *v1.Pod
		runtimeUserns  bool
		runtimeHandler string
		expMode        runtimeapi.NamespaceMode
		wantErr        string
	}{
		{name: "no user namespace", pod: &v1.Pod{}, expMode: runtimeapi.NamespaceMode_NODE},
		{name: "nil pod", pod: nil, expMode: runtimeapi.NamespaceMode_NODE},
		{name: "opt-in to host user namespace", pod: hostUsers(true), expMode: runtimeapi.NamespaceMode_NODE},
		{name: "user namespace", pod: hostUsers(false), runtimeUserns: true, expMode: runtimeapi.NamespaceMode_POD},
		{name: "user namespace, but no runtime support", pod: hostUsers(false),
			wantErr: "can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{name: "user namespace, handler without support", pod: hostUsers(false), runtimeHandler: "kata",
			wantErr: "can't set `spec.hostUsers: false`, RuntimeClass handler \"kata\" does not support user namespaces"},
		{name: "user namespace, but runtime returns error", pod: hostUsers(false), runtimeHandler: "error",
			wantErr: "can't set `spec.hostUsers: false`, RuntimeClass handler \"error\" does not support user namespaces: unknown runtime"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.HandlerSupportsUserNamespaces = supports(tc.runtimeUserns)
			m, ctx := newTestManager(t, cfg)

			userns, err := m.GetOrCreateUserNamespaceMappings(ctx, tc.pod, tc.runtimeHandler)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if userns != nil {
					t.Fatalf("user namespace %v with an error", userns)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if userns.GetMode() != tc.expMode {
				t.Fatalf("mode %v, want %v", userns.GetMode(), tc.expMode)
			}
			if tc.expMode == runtimeapi.NamespaceMode_NODE {
				if len(userns.Uids) != 0 || len(userns.Gids) != 0 {
					t.Fatalf("NODE mode with mappings %v", userns)
				}
				return
			}
			if len(userns.Uids) != 1 || len(userns.Gids) != 1 {
				t.Fatalf("mappings %v, want one UID and one GID", userns)
			}
			u, g := userns.Uids[0], userns.Gids[0]
			if u.ContainerId != 0 || u.Length != 65536 || u.HostId%65536 != 0 || u.HostId < minimumMappingUID ||
				u.HostId >= minimumMappingUID+mappingLen || u.HostId != g.HostId || u.Length != g.Length || g.ContainerId != 0 {
				t.Fatalf("mappings %v", userns)
			}
			if !m.podAllocated(tc.pod.UID) {
				t.Fatal("pod not allocated")
			}
		})
	}
}

// TestRecordFile checks the record's name and format, and that the pod
// gets the same mappings on every call and after a restart.
func TestRecordFile(t *testing.T) {
	podsDir := t.TempDir()
	cfg := testConfig(podsDir)
	m, ctx := newTestManager(t, cfg)
	m.used.intN = func(int) int { return 1 } // block 2: IDs 131072..196607

	pod := hostUsers(false)
	got, err := m.GetOrCreateUserNamespaceMappings(ctx, pod, "")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(podsDir, "pod-uid", "userns"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`
	if string(data) != want {
		t.Fatalf("record %s, want %s", data, want)
	}
	entries, _ := os.ReadDir(filepath.Join(podsDir, "pod-uid"))
	if len(entries) != 1 {
		t.Fatalf("pod dir holds %v, want only the record", entries)
	}
	if got.Uids[0].HostId != 131072 {
		t.Fatalf("mappings %v", got)
	}

	again, err := m.GetOrCreateUserNamespaceMappings(ctx, pod, "")
	if err != nil {
		t.Fatal(err)
	}
	if again.String() != got.String() {
		t.Fatalf("second call %v, first %v", again, got)
	}

	// A restart reads the record back: the block stays taken and the pod
	// keeps it.
	m2, ctx := newTestManager(t, cfg)
	if !m2.podAllocated("pod-uid") || !m2.isSet(131072) {
		t.Fatal("record not read back at start")
	}
	after, err := m2.GetOrCreateUserNamespaceMappings(ctx, pod, "")
	if err != nil {
		t.Fatal(err)
	}
	if after.String() != got.String() {
		t.Fatalf("after restart %v, before %v", after, got)
	}

	// Release removes the record.
	m2.Release(ctx, "pod-uid")
	if _, err := os.Stat(filepath.Join(podsDir, "pod-uid", "userns")); !os.IsNotExist(err) {
		t.Fatalf("record after release: %v", err)
	}
	if m2.podAllocated("pod-uid") || m2.isSet(131072) {
		t.Fatal("still allocated after release")
	}
}

// TestNewReadsUpstreamRecords starts on a pods dir the kubelet left:
// directories with and without records, and a file.
func TestNewReadsUpstreamRecords(t *testing.T) {
	podsDir := t.TempDir()
	write := func(uid, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(podsDir, uid), 0o750); err != nil {
			t.Fatal(err)
		}
		if content != "" {
			if err := os.WriteFile(filepath.Join(podsDir, uid, "userns"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("a", `{"uidMappings":[{"hostId":196608,"containerId":0,"length":65536}],"gidMappings":[{"hostId":196608,"containerId":0,"length":65536}]}`)
	write("b", "")
	if err := os.WriteFile(filepath.Join(podsDir, "c"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := newTestManager(t, testConfig(podsDir))
	if !m.podAllocated("a") || m.podAllocated("b") || m.podAllocated("c") || !m.isSet(196608) || m.used.used() != 1 {
		t.Fatalf("allocations %v", m.usedBy)
	}

	// A second pod claiming the same block stops the start.
	write("d", `{"uidMappings":[{"hostId":196608,"containerId":0,"length":65536}],"gidMappings":[{"hostId":196608,"containerId":0,"length":65536}]}`)
	_, ctx := ktesting.NewTestContext(t)
	_, err := New(ctx, testConfig(podsDir))
	if want := `record pod mappings for existing pod "d": range picked for pod "d" already taken`; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	// So does a record of another idsPerPod.
	cfg := testConfig(podsDir)
	cfg.IDsPerPod = ptr[int64](131072)
	cfg.KubeletMappings = fixedMappings(131072, 131072*200)
	_, err = New(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "wrong user namespace length 65536") {
		t.Fatalf("error %v", err)
	}
}

func TestNewFailsListPods(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pods")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	_, err := New(ctx, testConfig(file))
	if err == nil || !strings.Contains(err.Error(), "read pods from disk") {
		t.Fatalf("error %v, want one reading pods from disk", err)
	}
}

func TestRecordBounds(t *testing.T) {
	// Room for exactly 1 pod.
	cfg := testConfig(t.TempDir())
	cfg.KubeletMappings = fixedMappings(65536, 65536)
	cfg.MaxPods = 1
	m, _ := newTestManager(t, cfg)
	logger := ktesting.NewLogger(t, ktesting.NewConfig())

	if err := m.record(logger, "0", 65536, 65536); err != nil {
		t.Fatal(err)
	}
	err := m.record(logger, "2", 2*65536, 65536)
	if err == nil || err.Error() != "id 131072 is out of range" {
		t.Fatalf("error %v, want out of range", err)
	}
}

func TestCleanupOrphaned(t *testing.T) {
	cases := []struct {
		name                 string
		known                []types.UID // pods of the pod manager or running
		listPods             []types.UID // pod directories
		podSetBeforeCleanup  []types.UID
		podSetAfterCleanup   []types.UID
		podUnsetAfterCleanup []types.UID
	}{
		{name: "no stale pods", listPods: []types.UID{"pod-1", "pod-2"}},
		{name: "no stale pods set", podSetBeforeCleanup: []types.UID{"pod-1", "pod-2"}, listPods: []types.UID{"pod-1", "pod-2"},
			podUnsetAfterCleanup: []types.UID{"pod-1", "pod-2"}},
		{name: "one known pod", listPods: []types.UID{"pod-1", "pod-2"}, podSetBeforeCleanup: []types.UID{"pod-1", "pod-2"},
			known: []types.UID{"pod-1"}, podSetAfterCleanup: []types.UID{"pod-1"}, podUnsetAfterCleanup: []types.UID{"pod-2"}},
		{name: "pod set before cleanup but not listed ==> unset", podSetBeforeCleanup: []types.UID{"pod-1", "pod-2"},
			known: []types.UID{"pod-1"}, podUnsetAfterCleanup: []types.UID{"pod-1", "pod-2"}},
		{name: "no listed pods ==> all unset", podSetBeforeCleanup: []types.UID{"pod-1", "pod-2"},
			podUnsetAfterCleanup: []types.UID{"pod-1", "pod-2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			podsDir := t.TempDir()
			for _, uid := range tc.listPods {
				if err := os.Mkdir(filepath.Join(podsDir, string(uid)), 0o750); err != nil {
					t.Fatal(err)
				}
			}
			m, ctx := newTestManager(t, testConfig(podsDir))
			logger := ktesting.NewLogger(t, ktesting.NewConfig())
			for i, pod := range tc.podSetBeforeCleanup {
				if err := m.record(logger, pod, uint32((i+1)*65536), 65536); err != nil {
					t.Fatal(err)
				}
			}
			known := map[types.UID]bool{}
			for _, uid := range tc.known {
				known[uid] = true
			}
			if err := m.CleanupOrphaned(ctx, func(uid types.UID) bool { return known[uid] }); err != nil {
				t.Fatal(err)
			}
			for _, pod := range tc.podSetAfterCleanup {
				if !m.podAllocated(pod) {
					t.Errorf("pod %q should be allocated", pod)
				}
			}
			for _, pod := range tc.podUnsetAfterCleanup {
				if m.podAllocated(pod) {
					t.Errorf("pod %q should not be allocated", pod)
				}
			}
		})
	}
}

func TestCleanupOrphanedListFails(t *testing.T) {
	podsDir := filepath.Join(t.TempDir(), "pods")
	m, ctx := newTestManager(t, testConfig(podsDir))
	err := m.CleanupOrphaned(ctx, func(types.UID) bool { return true })
	if err == nil || !strings.HasPrefix(err.Error(), "user namespace: read pods from disk: ") {
		t.Fatalf("error %v", err)
	}
}

func TestReleaseReinitializesMap(t *testing.T) {
	m, ctx := newTestManager(t, testConfig(t.TempDir()))
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	if err := m.record(logger, "keep", 65536, 65536); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < mapReInitializeThreshold; i++ {
		uid := types.UID(fmt.Sprint(i))
		if _, _, err := m.allocateOne(logger, uid); err != nil {
			t.Fatal(err)
		}
		m.Release(ctx, uid)
	}
	if m.removed != 0 || len(m.usedBy) != 1 || !m.podAllocated("keep") || m.used.used() != 1 {
		t.Fatalf("removed %d, allocations %v", m.removed, m.usedBy)
	}
	m.Release(ctx, "unknown") // no-op
}
